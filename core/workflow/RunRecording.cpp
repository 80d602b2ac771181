#include "workflow/RunRecording.h"

#include "config/RunConfigJson.h"
#include "result/ResultJson.h"
#include "util/Errors.h"

#include <spdlog/spdlog.h>

namespace pb {

RunStart runStartFor(const RunConfig &config, const QString &kind, const std::string &device)
{
    RunStart start;
    start.kind = kind;
    start.name = QString::fromStdString(config.name);
    if (start.name.isNull())
        start.name = QLatin1String("");
    start.model = QString::fromStdString(config.model.preset.empty() ? config.model.family : config.model.preset);
    start.device = QString::fromStdString(device);
    start.card = QLatin1String("");
    start.notes = QLatin1String("");
    start.configJson = toJson(config);
    start.configHash = configHash(config);
    return start;
}

void recordRunError(HistoryWriter &writer, int64_t runId, const std::exception &error)
{
    PilotSummary summary;
    const auto *pb = dynamic_cast<const PilotBenchError *>(&error);
    summary.verdict = pb && pb->code() == ExitCode::Cancelled ? Verdict::Cancelled : Verdict::Failed;
    summary.message = error.what();
    try {
        if (!writer.finishRun(runId, summary, toJson(summary)) || !writer.flush())
            spdlog::error("run {} could not be marked {}: {}", runId, toString(summary.verdict), writer.lastError());
    } catch (const std::exception &e) {
        spdlog::error("run {} could not be marked {}: {}", runId, toString(summary.verdict), e.what());
    }
}

} // namespace pb
