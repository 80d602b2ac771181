#include "monitor/PilotController.h"

#include "workflow/PilotRecorder.h"
#include "history/HistoryWriter.h"
#include "monitor/SampleBuffer.h"

#include <QMetaObject>
#include <QPointer>
#include <QThread>
#include <spdlog/spdlog.h>

#include <exception>
#include <memory>

namespace pb::ui {
namespace {

// The engine's events go into the buffer; nothing here touches Qt objects of the GUI thread.
class BufferObserver final : public PilotObserver {
public:
    explicit BufferObserver(SampleBuffer &buffer) : m_buffer(buffer) {}
    void phaseStarted(Phase phase, int64_t step) override { m_buffer.setPhase(phase, step); }
    void phaseFinished(const PhaseMark &mark) override { m_buffer.appendPhase(mark); }
    void stepFinished(const StepSample &sample) override { m_buffer.appendSample(sample); }

private:
    SampleBuffer &m_buffer;
};

} // namespace

PilotController::PilotController(SampleBuffer &buffer, QObject *parent) : QObject(parent), m_buffer(buffer)
{
    m_thread = new QThread(this);
    m_thread->setObjectName(QStringLiteral("pilot-engine"));
    m_context = new QObject;
    m_context->moveToThread(m_thread);
    connect(m_thread, &QThread::finished, m_context, &QObject::deleteLater);
    m_thread->start();
}

PilotController::~PilotController()
{
    m_cancel.store(true);
    m_thread->quit();
    m_thread->wait();
}

bool PilotController::start(const RunConfig &config, PilotOptions options, const QString &databasePath)
{
    if (m_running)
        return false;
    m_running = true;
    m_runId = 0;
    m_cancel.store(false);
    m_buffer.clear();
    const int generation = ++m_generation;
    options.cancel = &m_cancel;
    QPointer<PilotController> self(this);
    QMetaObject::invokeMethod(m_context, [this, self, config, options, databasePath, generation] {
        // Runs on the engine thread. `this` is only touched through queued calls guarded by `self`
        // and the generation; the controller's destructor waits for this function to return.
        auto post = [this, self, generation](auto fn) {
            QMetaObject::invokeMethod(this, [self, generation, fn] {
                if (self && self->m_generation == generation)
                    fn(*self);
            }, Qt::QueuedConnection);
        };
        try {
            HistoryWriter writer(databasePath);
            BufferObserver observer(m_buffer);
            PilotRecorder recorder(writer, &observer, &m_cancel);
            recorder.setRecordsCalibration(true);
            const int64_t runId = recorder.begin(config, options);
            post([runId](PilotController &c) {
                c.m_runId = runId;
                Q_EMIT c.runStarted(runId);
            });
            PilotRun run;
            QString engineError;
            try {
                PilotEngine engine;
                run = engine.run(config, options, &recorder);
            } catch (const std::exception &e) {
                // Recorded as failed so the history never keeps a run that looks still running.
                engineError = QString::fromUtf8(e.what());
                run.summary.verdict = Verdict::Failed;
                run.summary.message = e.what();
            }
            const QString historyError = QString::fromStdString(recorder.historyError());
            if (!historyError.isEmpty() && engineError.isEmpty()) {
                run.summary.verdict = Verdict::Failed;
                run.summary.message = historyError.toStdString();
            }
            recorder.finish(run);
            const PilotSummary summary = run.summary;
            spdlog::info("GUI pilot run {} finished: {}", runId, toString(summary.verdict));
            if (!engineError.isEmpty()) {
                spdlog::error("GUI pilot run {} failed: {}", runId, engineError.toStdString());
                post([engineError](PilotController &c) {
                    c.m_running = false;
                    Q_EMIT c.runFailed(engineError);
                });
                return;
            }
            post([runId, summary, historyError](PilotController &c) {
                c.m_running = false;
                Q_EMIT c.runFinished(runId, summary, historyError);
            });
        } catch (const std::exception &e) {
            const QString message = QString::fromUtf8(e.what());
            spdlog::error("GUI pilot failed: {}", e.what());
            post([message](PilotController &c) {
                c.m_running = false;
                Q_EMIT c.runFailed(message);
            });
        } catch (...) {
            spdlog::error("GUI pilot failed with an unknown exception");
            post([](PilotController &c) {
                c.m_running = false;
                Q_EMIT c.runFailed(tr("The engine stopped with an unknown error."));
            });
        }
    }, Qt::QueuedConnection);
    return true;
}

void PilotController::cancel()
{
    if (m_running)
        m_cancel.store(true);
}

} // namespace pb::ui
