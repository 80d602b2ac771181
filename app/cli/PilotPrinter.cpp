#include "app/cli/PilotPrinter.h"

#include "engine/PilotJson.h"
#include "util/Errors.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>

#include <csignal>
#include <signal.h>
#include <cstring>

namespace pb::cli {

std::atomic<bool> &interruptFlag()
{
    static std::atomic<bool> flag {false};
    return flag;
}

std::atomic<bool> &secondInterruptFlag()
{
    static std::atomic<bool> flag {false};
    return flag;
}

namespace {
std::atomic<int> g_interrupts {0};
std::atomic<int> g_exitAfter {2};

void onInterrupt(int)
{
    const int n = ++g_interrupts;
    interruptFlag().store(true);
    if (n >= 2)
        secondInterruptFlag().store(true);
    if (n >= g_exitAfter.load())
        std::_Exit(130);
}
} // namespace

void installInterruptHandler(int exitAfter)
{
    g_exitAfter.store(exitAfter);
    // A closed terminal stops a run like Ctrl-C: recorded as cancelled, a watched job's tree stopped.
    // A signal the caller ignores stays ignored (nohup's SIGHUP, a background job's SIGINT).
    for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
        struct sigaction old {};
        if (::sigaction(signal, nullptr, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        std::signal(signal, onInterrupt);
    }
}

void installEarlyInterruptHandler(const char *command)
{
    // scale and restore-check stop their processes on the first interrupt; their children die
    // with them (PR_SET_PDEATHSIG, the job tree's guardian) if a second one ends them at once.
    for (const char *c : {"pilot", "scale", "scale-worker", "restore-check"})
        if (std::strcmp(command, c) == 0)
            installInterruptHandler(2);
    if (std::strcmp(command, "watch") == 0)
        installInterruptHandler(3);
}

int exitCodeFor(Verdict verdict)
{
    switch (verdict) {
    case Verdict::Fits: return static_cast<int>(ExitCode::Ok);
    case Verdict::DoesNotFit: return static_cast<int>(ExitCode::DoesNotFit);
    case Verdict::Cancelled: return static_cast<int>(ExitCode::Cancelled);
    case Verdict::Failed: return static_cast<int>(ExitCode::Failure);
    }
    return 1;
}

PilotPrinter::PilotPrinter(QTextStream &out, QTextStream &err, bool jsonl, int64_t totalSteps)
    : m_out(out), m_err(err), m_jsonl(jsonl), m_total(totalSteps)
{
}

void printEvent(QTextStream &out, const QString &name, QJsonObject fields, int64_t runId)
{
    fields.insert(QStringLiteral("event"), name);
    // When it happened, for lines read later or merged with other logs.
    fields.insert(QStringLiteral("time"), QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs));
    if (runId > 0 && !fields.contains(QStringLiteral("run_id")))
        fields.insert(QStringLiteral("run_id"), static_cast<double>(runId));
    out << QJsonDocument(fields).toJson(QJsonDocument::Compact) << '\n';
    out.flush();
}

void PilotPrinter::event(const QString &name, QJsonObject fields)
{
    if (m_jsonl)
        printEvent(m_out, name, std::move(fields), m_runId);
}

void PilotPrinter::phaseStarted(Phase phase, int64_t step)
{
    event(QStringLiteral("phase"), QJsonObject {{QStringLiteral("phase"), QString::fromLatin1(toString(phase))}, {QStringLiteral("step"), static_cast<double>(step)}});
}

void PilotPrinter::stepFinished(const StepSample &sample)
{
    ++m_done;
    if (m_jsonl) {
        event(QStringLiteral("step"), toJson(sample));
        return;
    }
    const int width = 30;
    const int filled = m_total > 0 ? static_cast<int>(width * m_done / m_total) : width;
    m_err << '\r' << '[' << QString(filled, QLatin1Char('#')) << QString(width - filled, QLatin1Char('.')) << "] " << m_done << '/' << m_total << ' '
          << toString(sample.phase) << "  " << QString::number(sample.stepTimeMs, 'f', 1) << " ms  loss " << QString::number(sample.loss, 'f', 4)
          << "  peak " << formatBytes(sample.peakAllocatedBytes) << "   ";
    m_err.flush();
}

void PilotPrinter::validationFinished(const ValidationResult &result)
{
    event(QStringLiteral("validation"), toJson(result));
}

void PilotPrinter::checkpointWritten(const CheckpointWrite &write)
{
    event(QStringLiteral("checkpoint"), toJson(write));
}

void PilotPrinter::printSummary(const PilotRun &run, int64_t runId, const QString &database, const QString &unrecorded)
{
    if (m_jsonl) {
        QJsonObject summary = summaryJson(run);
        summary.insert(QStringLiteral("run_id"), static_cast<double>(runId));
        summary.insert(QStringLiteral("database"), database);
        summary.insert(QStringLiteral("recorded"), unrecorded.isEmpty());
        if (!unrecorded.isEmpty())
            summary.insert(QStringLiteral("history_error"), unrecorded);
        event(QStringLiteral("summary"), summary);
        return;
    }
    if (m_done > 0)
        m_err << '\n';
    const auto &s = run.summary;
    m_out << "verdict: " << toString(s.verdict);
    if (!s.message.empty())
        m_out << " (" << QString::fromStdString(s.message) << ')';
    m_out << "\nmeasured steps: " << s.measuredSteps << " on " << QString::fromStdString(run.environment.device) << " ("
          << QString::fromStdString(run.environment.deviceName) << ")\n"
          << "step time: mean " << QString::number(s.stepTimeMeanMs, 'f', 2) << " ms, p50 " << QString::number(s.stepTimeP50Ms, 'f', 2) << ", p90 "
          << QString::number(s.stepTimeP90Ms, 'f', 2) << ", p99 " << QString::number(s.stepTimeP99Ms, 'f', 2) << ", CV "
          << QString::number(s.stepTimeCv * 100, 'f', 1) << "%\n"
          << "throughput: " << QString::number(s.tokensPerSecond, 'f', 0) << " tokens/s";
    if (s.mfu)
        m_out << ", MFU " << QString::number(*s.mfu * 100, 'f', 1) << '%';
    if (!run.stepGraph.empty())
        m_out << "\nCUDA graph of the step: " << QString::fromStdString(run.stepGraph);
    m_out << "\npeak allocated: " << formatBytes(s.peakAllocatedBytes) << ", peak reserved "
          << formatBytes(s.peakReservedBytes) << ", peak device use " << formatBytes(s.peakDeviceUsedBytes) << '\n'
          << "data stalls: " << QString::number(s.dataStallFraction * 100, 'f', 2) << "% of step time; validation " << QString::number(s.validationMs, 'f', 1)
          << " ms; checkpoint writes " << QString::number(s.checkpointWriteMs, 'f', 1) << " ms\n"
          << "final loss: " << QString::number(s.finalLoss, 'f', 4) << '\n'
          << (unrecorded.isEmpty() ? QStringLiteral("recorded as run %1 in %2").arg(runId).arg(database) : unrecorded) << '\n';
    m_out.flush();
}

void PilotPrinter::printMemorySnapshot(const QJsonObject &snapshot, const QString &path)
{
    const QJsonObject measured = snapshot.value(QStringLiteral("measured")).toObject();
    m_out << "memory at the peak (step " << measured.value(QStringLiteral("step")).toInteger() << ", " << measured.value(QStringLiteral("peak_phase")).toString()
          << ", reached by " << measured.value(QStringLiteral("peak_site")).toString() << "), written to " << path << '\n';
    if (snapshot.contains(QStringLiteral("estimate_error"))) {
        m_out << "  no estimate to compare: " << snapshot.value(QStringLiteral("estimate_error")).toString() << '\n';
        m_out.flush();
        return;
    }
    m_out << QStringLiteral("  %1 %2 %3 %4\n").arg(QStringLiteral("part"), -18).arg(QStringLiteral("estimated"), 12).arg(QStringLiteral("measured"), 12).arg(QStringLiteral("estimate - measured"), 20);
    for (const auto &value : snapshot.value(QStringLiteral("comparison")).toArray()) {
        const QJsonObject row = value.toObject();
        const auto bytes = [&](const char *key) { return static_cast<int64_t>(row.value(QLatin1String(key)).toDouble()); };
        const int64_t difference = bytes("difference_bytes");
        m_out << QStringLiteral("  %1 %2 %3 %4\n")
                     .arg(row.value(QStringLiteral("part")).toString().replace(QLatin1Char('_'), QLatin1Char(' ')), -18)
                     .arg(formatBytes(bytes("estimated_bytes")), 12)
                     .arg(formatBytes(bytes("measured_bytes")), 12)
                     .arg((difference < 0 ? QStringLiteral("-") : QStringLiteral("+")) + formatBytes(std::abs(difference)), 20);
    }
    const QJsonArray phases = snapshot.value(QStringLiteral("phases")).toArray();
    if (!phases.isEmpty()) {
        m_out << "the run's phases (peak allocated):\n"
              << QStringLiteral("  %1 %2 %3 %4\n").arg(QStringLiteral("phase"), -18).arg(QStringLiteral("estimated"), 12).arg(QStringLiteral("measured"), 12).arg(QStringLiteral("difference"), 20);
        for (const auto &value : phases) {
            const QJsonObject row = value.toObject();
            auto cell = [&](const char *key) {
                return row.contains(QLatin1String(key)) ? formatBytes(static_cast<int64_t>(row.value(QLatin1String(key)).toDouble())) : QStringLiteral("-");
            };
            m_out << QStringLiteral("  %1 %2 %3 %4\n")
                         .arg(row.value(QStringLiteral("phase")).toString(), -18)
                         .arg(cell("estimated_bytes"), 12)
                         .arg(cell("measured_bytes"), 12)
                         .arg(row.contains(QStringLiteral("difference_percent")) ? QStringLiteral("%1%").arg(row.value(QStringLiteral("difference_percent")).toDouble(), 0, 'f', 2)
                                                                                 : QStringLiteral("-"),
                              20);
        }
    }
    m_out.flush();
}

} // namespace pb::cli
