#include "engine/PilotJson.h"
#include "result/ResultJson.h"

#include <QJsonArray>

namespace pb {
namespace {

QString str(const std::string &s) { return QString::fromStdString(s); }
double num(int64_t v) { return static_cast<double>(v); }

} // namespace

QJsonObject summaryJson(const PilotRun &run)
{
    QJsonObject json = toJson(run.summary);
    json.insert(QStringLiteral("environment"), toJson(run.environment));
    json.insert(QStringLiteral("config_hash"), str(run.configHash));
    json.insert(QStringLiteral("model_revision"), str(run.modelRevision));
    json.insert(QStringLiteral("data_revision"), str(run.dataRevision));
    json.insert(QStringLiteral("data"), str(run.dataDescription));
    json.insert(QStringLiteral("optimizer_path"), str(run.optimizerPath));
    json.insert(QStringLiteral("attention_path"), str(run.attentionPath));
    json.insert(QStringLiteral("kernels_path"), str(run.kernelsPath));
    if (!run.stepGraph.empty())
        json.insert(QStringLiteral("step_graph"), str(run.stepGraph));
    json.insert(QStringLiteral("numerical_format"), str(run.numericalFormat));
    json.insert(QStringLiteral("first_step"), num(run.firstStep));
    if (!run.parameterChecksum.empty())
        json.insert(QStringLiteral("parameter_checksum"), str(run.parameterChecksum));
    auto digest = [](const std::map<std::string, std::string> &d) {
        QJsonObject o;
        for (const auto &[k, v] : d)
            o.insert(QString::fromStdString(k), QString::fromStdString(v));
        return o;
    };
    if (!run.resumeDigest.empty()) {
        json.insert(QStringLiteral("resume_digest"), digest(run.resumeDigest));
        json.insert(QStringLiteral("restore_ms"), run.restoreMs);
    }
    if (!run.checkpointDigest.empty())
        json.insert(QStringLiteral("checkpoint_digest"), digest(run.checkpointDigest));
    QJsonArray losses;
    for (double l : run.losses)
        losses.append(l);
    json.insert(QStringLiteral("losses"), losses);
    return json;
}

} // namespace pb
