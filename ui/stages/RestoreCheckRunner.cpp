#include "stages/RestoreCheckRunner.h"

#include "workflow/RestoreCheckRun.h"

#include <QCoreApplication>
#include <QPointer>
#include <QThread>
#include <spdlog/spdlog.h>

#include <exception>

namespace pb::ui {

RestoreCheckRunner::RestoreCheckRunner(QObject *parent)
    : QObject(parent), m_cliPath(QCoreApplication::applicationDirPath() + QStringLiteral("/pilotbench-cli"))
{
    m_thread = new QThread(this);
    m_thread->setObjectName(QStringLiteral("restore-check"));
    m_context = new QObject;
    m_context->moveToThread(m_thread);
    connect(m_thread, &QThread::finished, m_context, &QObject::deleteLater);
    m_thread->start();
}

RestoreCheckRunner::~RestoreCheckRunner()
{
    m_cancel.store(true);
    m_thread->quit();
    m_thread->wait();
}

void RestoreCheckRunner::setSteps(int64_t before, int64_t after)
{
    m_before = before;
    m_after = after;
}

bool RestoreCheckRunner::start(const RunConfig &config, const QString &databasePath, const QString &checkpointDir)
{
    if (m_running)
        return false;
    m_running = true;
    m_cancel.store(false);
    RestoreCheckOptions options;
    options.stepsBefore = m_before;
    options.stepsAfter = m_after;
    options.checkpointDir = checkpointDir;
    options.cliPath = m_cliPath;
    options.cancel = &m_cancel;
    QPointer<RestoreCheckRunner> self(this);
    QMetaObject::invokeMethod(m_context, [this, self, config, options, databasePath] {
        int64_t runId = 0;
        bool pass = false;
        QString message;
        try {
            const RecordedRestoreCheck recorded = runRecordedRestoreCheck(config, options, databasePath);
            runId = recorded.runId;
            pass = recorded.result.pass;
            message = QString::fromStdString(recorded.result.message);
        } catch (const std::exception &e) {
            // Recorded as failed by the workflow when the run had begun.
            message = QString::fromUtf8(e.what());
        }
        spdlog::info("GUI restore check (run {}): {} {}", runId, pass ? "pass" : "fail", message.toStdString());
        QMetaObject::invokeMethod(this, [self, runId, pass, message] {
            if (!self)
                return;
            self->m_running = false;
            Q_EMIT self->finished(runId, pass, message);
        }, Qt::QueuedConnection);
    }, Qt::QueuedConnection);
    return true;
}

} // namespace pb::ui
