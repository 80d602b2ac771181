#include "monitor/WatchController.h"

#include "monitor/SampleBuffer.h"

#include <QMetaObject>
#include <QPointer>
#include <QThread>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <utility>

namespace pb::ui {

// Runs on the worker thread: steps and bytes go into the buffers, the rare events (started, a
// notice) as queued calls. Nothing here touches a GUI-thread object directly.
class WatchController::Observer final : public watch::WatchObserver {
public:
    using Post = std::function<void(std::function<void(WatchController &)>)>;
    Observer(WatchController &controller, Post post) : m_controller(controller), m_post(std::move(post)) {}

    void started(qint64 pid, const QString &deviceSource) override
    {
        m_post([pid, deviceSource](WatchController &c) {
            c.m_deviceSource = deviceSource;
            Q_EMIT c.processStarted(pid, deviceSource);
            Q_EMIT c.runStarted(0);
        });
    }
    void output(bool isStderr, const QByteArray &bytes) override { m_controller.appendOutput(isStderr, bytes); }
    void devices(const watch::SamplerReading &r) override
    {
        m_controller.notePeak(watch::watchedMemoryBytes(r)); // the figure the core's verdict reports
    }
    void notice(const QString &text) override
    {
        m_post([text](WatchController &c) { Q_EMIT c.notice(text); });
    }
    void stepSource(const std::string &source) override
    {
        m_post([source = QString::fromStdString(source)](WatchController &c) { c.m_stepSource = source; });
    }
    void stepFinished(const StepSample &sample) override { m_controller.m_buffer.appendSample(sample); }

private:
    WatchController &m_controller;
    Post m_post;
};

WatchController::WatchController(SampleBuffer &buffer, QObject *parent) : QObject(parent), m_buffer(buffer)
{
    m_thread = new QThread(this);
    m_thread->setObjectName(QStringLiteral("watched-command"));
    m_context = new QObject;
    m_context->moveToThread(m_thread);
    connect(m_thread, &QThread::finished, m_context, &QObject::deleteLater);
    m_thread->start();
}

WatchController::~WatchController()
{
    m_cancel.store(true);
    m_thread->quit();
    m_thread->wait();
}

bool WatchController::start(WatchRunRequest request)
{
    if (m_running)
        return false;
    m_running = true;
    m_cancel.store(false);
    m_peakMemoryBytes.store(-1);
    m_deviceSource.clear();
    m_stepSource.clear();
    m_logPath.clear();
    m_buffer.clear();
    {
        std::lock_guard lock(m_outputMutex);
        m_pendingOutput.clear();
        m_pendingBytes = m_droppedBytes = 0;
    }
    m_stdoutDecoder.resetState();
    m_stderrDecoder.resetState();
    const int generation = ++m_generation;
    request.options.cancel = &m_cancel;
    QPointer<WatchController> self(this);
    QMetaObject::invokeMethod(m_context, [this, self, request = std::move(request), generation]() mutable {
        // Runs on the worker thread. `this` is only touched through queued calls guarded by `self`
        // and the generation, and through the buffers; the destructor waits for this to return.
        auto post = [this, self, generation](std::function<void(WatchController &)> fn) {
            QMetaObject::invokeMethod(this, [self, generation, fn = std::move(fn)] {
                if (self && self->m_generation == generation)
                    fn(*self);
            }, Qt::QueuedConnection);
        };
        // The last output before the outcome, so every listener sees the whole of it first.
        auto finish = [post](std::function<void(WatchController &)> emitOutcome) {
            post([emitOutcome = std::move(emitOutcome)](WatchController &c) {
                c.drainOutput();
                c.m_running = false;
                emitOutcome(c);
            });
        };
        try {
            Observer observer(*this, post);
            const RecordedWatch recorded = runRecordedWatch(std::move(request), observer);
            const PilotSummary summary = recorded.result.summary;
            const QString stepSource = QString::fromStdString(recorded.result.stepSource);
            const QString deviceSource = QString::fromStdString(recorded.result.deviceSource);
            const QString logPath = recorded.result.logPath;
            const qint64 runId = recorded.runId;
            spdlog::info("GUI watch run {} finished: {}", runId, toString(summary.verdict));
            finish([runId, summary, stepSource, deviceSource, logPath](WatchController &c) {
                c.m_stepSource = stepSource;
                c.m_deviceSource = deviceSource;
                c.m_logPath = logPath;
                Q_EMIT c.runFinished(runId, summary, stepSource, deviceSource);
            });
        } catch (const std::exception &e) {
            const QString message = QString::fromUtf8(e.what());
            spdlog::error("GUI watch refused: {}", e.what());
            finish([message](WatchController &c) { Q_EMIT c.runFailed(message); });
        } catch (...) {
            spdlog::error("GUI watch failed with an unknown exception");
            finish([](WatchController &c) { Q_EMIT c.runFailed(tr("Watching the command stopped with an unknown error.")); });
        }
    }, Qt::QueuedConnection);
    return true;
}

void WatchController::cancel()
{
    if (m_running)
        m_cancel.store(true);
}

void WatchController::appendOutput(bool isStderr, const QByteArray &bytes)
{
    if (bytes.isEmpty())
        return;
    std::lock_guard lock(m_outputMutex);
    if (!m_pendingOutput.empty() && m_pendingOutput.back().isStderr == isStderr)
        m_pendingOutput.back().bytes += bytes;
    else
        m_pendingOutput.push_back({isStderr, bytes});
    m_pendingBytes += bytes.size();
    while (m_pendingBytes > kMaxPendingOutputBytes && m_pendingOutput.size() > 1) {
        m_pendingBytes -= m_pendingOutput.front().bytes.size();
        m_droppedBytes += m_pendingOutput.front().bytes.size();
        m_pendingOutput.erase(m_pendingOutput.begin());
    }
    if (m_pendingBytes > kMaxPendingOutputBytes) {
        // One stream printing on its own: keep its newest bytes.
        QByteArray &only = m_pendingOutput.front().bytes;
        const qsizetype excess = m_pendingBytes - kMaxPendingOutputBytes;
        only.remove(0, excess);
        m_pendingBytes -= excess;
        m_droppedBytes += excess;
    }
}

void WatchController::drainOutput()
{
    std::vector<Chunk> chunks;
    qsizetype dropped = 0;
    {
        std::lock_guard lock(m_outputMutex);
        std::swap(chunks, m_pendingOutput);
        dropped = m_droppedBytes;
        m_pendingBytes = m_droppedBytes = 0;
    }
    if (dropped > 0)
        Q_EMIT output(tr("\n[… %1 bytes of output not shown: the command printed faster than it could be displayed; the log file has them …]\n").arg(dropped), false);
    for (const Chunk &c : chunks) {
        const QString text = c.isStderr ? m_stderrDecoder.decode(c.bytes) : m_stdoutDecoder.decode(c.bytes);
        if (!text.isEmpty())
            Q_EMIT output(text, c.isStderr);
    }
}

void WatchController::notePeak(int64_t bytes)
{
    int64_t seen = m_peakMemoryBytes.load(std::memory_order_relaxed);
    while (bytes > seen && !m_peakMemoryBytes.compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) {
    }
}

} // namespace pb::ui
