#include "report/ReportSections.h"

#include "BuildInfo.h"
#include "config/ModelTraitsText.h"
#include "report/ReportCanvas.h"
#include "report/ReportCharts.h"
#include "report/ReportData.h"
#include "result/MemoryAttribution.h"
#include "util/Units.h"
#include "workflow/CheckpointThroughput.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonObject>

#include <algorithm>
#include <cmath>

namespace pb::report {
namespace {

QString qs(const std::string &s) { return QString::fromStdString(s); }
QString str(const QJsonObject &o, const char *key) { return o.value(QLatin1String(key)).toString(); }
double num(const QJsonObject &o, const char *key) { return o.value(QLatin1String(key)).toDouble(); }
QString sizeText(double bytes) { return formatBytes(static_cast<int64_t>(bytes)); } // a JSON number of bytes
QString orDash(const QString &s) { return s.isEmpty() ? QStringLiteral("-") : s; }
QString percent(double fraction, int decimals = 2) { return QString::number(fraction * 100.0, 'f', decimals) + QStringLiteral(" %"); }
// A tiny pilot's checkpoint takes milliseconds, a real one minutes.
QString secondsOrMs(double ms) { return ms < 1000 ? formatMs(ms) : QString::number(ms / 1000.0, 'f', 1) + QStringLiteral(" s"); }
// GB/s of 1e9 bytes, like the upload rate; a small pilot's fsync-bound rate keeps a digit more.
QString rateText(double bytesPerSecond)
{
    if (bytesPerSecond <= 0)
        return QStringLiteral("-");
    const double gbps = bytesPerSecond / 1e9;
    return QString::number(gbps, 'f', gbps < 0.1 ? 3 : 2) + QStringLiteral(" GB/s");
}

QJsonObject environmentOf(const ReportData &d)
{
    return d.run.summary.value(QStringLiteral("environment")).toObject(d.run.environment);
}

// Bytes for a chart axis: the unit that keeps the largest value between 1 and 1024.
std::pair<double, QString> byteUnit(double maxBytes)
{
    if (maxBytes >= 1024.0 * 1024 * 1024)
        return {1024.0 * 1024 * 1024, QStringLiteral("GiB")};
    if (maxBytes >= 1024.0 * 1024)
        return {1024.0 * 1024, QStringLiteral("MiB")};
    return {1024.0, QStringLiteral("KiB")};
}

void paintVerdict(ReportCanvas &c, const ReportData &d)
{
    const QJsonObject &s = d.run.summary;
    c.section(reportSectionTitles()[0]);
    const QString verdict = d.run.verdict.isEmpty() ? QStringLiteral("running (not finished)") : d.run.verdict;
    c.paragraph(QStringLiteral("Verdict: %1").arg(verdict.toUpper()), 13, true);
    std::vector<std::pair<QString, QString>> kv {
        {QStringLiteral("Run"), QStringLiteral("%1 (%2) \"%3\", model %4").arg(d.run.id).arg(d.run.kind, d.run.name, d.run.model)},
        {QStringLiteral("Started / finished"), QStringLiteral("%1 / %2").arg(d.run.startedAt.toUTC().toString(Qt::ISODate), orDash(d.run.finishedAt.toUTC().toString(Qt::ISODate)))},
        {QStringLiteral("Device"), QStringLiteral("%1 (%2)").arg(d.run.device, str(environmentOf(d), "device_name"))},
        {QStringLiteral("Measured steps"), QString::number(static_cast<qint64>(num(s, "measured_steps")))},
        {QStringLiteral("Mean step time"), formatMs(num(s, "step_time_mean_ms"))},
        {QStringLiteral("Throughput"), QStringLiteral("%1 tokens/s").arg(num(s, "tokens_per_s"), 0, 'f', 0)},
        {QStringLiteral("Peak allocated"), sizeText(num(s, "peak_allocated_bytes"))},
        {QStringLiteral("Peak device use"), sizeText(num(s, "peak_device_used_bytes"))},
        {QStringLiteral("MFU"), s.value(QStringLiteral("mfu")).isDouble() ? percent(num(s, "mfu")) : QStringLiteral("not known (device peak unknown)")},
        {QStringLiteral("Data stalls"), percent(num(s, "data_stall_fraction")) + QStringLiteral(" of step time")},
    };
    if (!str(s, "message").isEmpty())
        kv.push_back({QStringLiteral("Message"), str(s, "message") + (str(s, "failed_phase").isEmpty() ? QString() : QStringLiteral(" (phase %1)").arg(str(s, "failed_phase")))});
    c.keyValues(kv);
    if (d.comparison)
        c.paragraph(QStringLiteral("Recommendation: ") + qs(d.comparison->recommendation));
    else
        c.paragraph(QStringLiteral("No card comparison: ") + qs(d.comparisonError.empty() ? d.configError : d.comparisonError));
}

void paintDefinition(ReportCanvas &c, const ReportData &d)
{
    c.section(reportSectionTitles()[1]);
    if (!d.config) {
        c.paragraph(QStringLiteral("The stored config could not be read: ") + qs(d.configError));
        return;
    }
    const RunConfig &cfg = *d.config;
    const auto &m = cfg.model;
    const auto &t = cfg.train;
    const QString job = cfg.job.unit == JobUnit::Tokens ? QStringLiteral("%1 tokens").arg(formatCount(cfg.job.amount))
                                                        : QStringLiteral("%1 epochs of %2 tokens").arg(cfg.job.amount).arg(formatCount(cfg.job.datasetTokens));
    // The family's traits, each a row where it differs from Llama's (config/ModelTraitsText.h).
    QString traits;
    for (const auto &[label, value] : describeModelTraits(m))
        traits += (traits.isEmpty() ? QString() : QStringLiteral("; ")) + QString::fromStdString(label + ": " + value);
    // A mixture of experts: how many, how many a token passes through (the active count below).
    const QString experts = m.moe.enabled() ? QStringLiteral("; %1 experts, %2 per token%3").arg(m.moe.experts).arg(m.moe.expertsPerToken)
                                                  .arg(m.moe.sharedExpertIntermediateSize > 0 ? QStringLiteral(", and a shared expert") : QString())
                                            : QString();
    c.keyValues({
        {QStringLiteral("Name"), qs(cfg.name)},
        {QStringLiteral("Model"), QStringLiteral("%1 (family %2, preset %3, revision %4)").arg(orDash(d.run.model), qs(m.family), orDash(qs(m.preset)), orDash(qs(m.revision)))},
        {QStringLiteral("Shape"), QStringLiteral("%1 layers, hidden %2, %3 heads / %4 KV heads, head dim %5, intermediate %6, vocabulary %7, max positions %8")
                                      .arg(m.layers).arg(m.hiddenSize).arg(m.attentionHeads).arg(m.kvHeads).arg(m.effectiveHeadDim())
                                      .arg(m.intermediateSize).arg(m.vocabSize).arg(m.maxPositions) + experts},
        {QStringLiteral("Architecture"), traits.isEmpty() ? QStringLiteral("Llama's (pre-norm, full attention and rotary, %1)").arg(QString::fromLatin1(toString(m.activation)))
                                                          : QString::fromLatin1(toString(m.activation)) + QStringLiteral("; ") + traits},
        {QStringLiteral("Parameters"), QStringLiteral("%1 total, %2 trainable (%3 exact total, %4 exact trainable)")
                                           .arg(formatCount(static_cast<double>(d.params.total)), formatCount(static_cast<double>(d.params.trainable)))
                                           .arg(d.params.total).arg(d.params.trainable) +
                                           (m.moe.enabled() ? QStringLiteral("; %1 active per token (%2 exact)").arg(formatCount(static_cast<double>(d.params.active))).arg(d.params.active)
                                                            : QString())},
        {QStringLiteral("Training"), QStringLiteral("mode %1, %2 lr %3, precision %4, attention %5, recompute %6")
                                         .arg(QString::fromLatin1(toString(t.mode)), QString::fromLatin1(toString(t.optimizer.kind))).arg(t.optimizer.lr)
                                         .arg(QString::fromLatin1(toString(t.precision)), QString::fromLatin1(toString(t.attention)), t.recompute ? QStringLiteral("on") : QStringLiteral("off"))},
        {QStringLiteral("Batch"), QStringLiteral("sequence length %1, micro-batch %2, gradient accumulation %3 (%4 tokens per step)")
                                      .arg(t.seqLen).arg(t.microBatch).arg(t.gradAccum).arg(t.seqLen * t.microBatch * t.gradAccum)},
        {QStringLiteral("Data"), orDash(str(d.run.summary, "data"))},
        {QStringLiteral("Validation / checkpoints"),
         (cfg.validation.everySteps > 0 ? QStringLiteral("validation every %1 steps (%2 batches)").arg(cfg.validation.everySteps).arg(cfg.validation.batches)
                                        : QStringLiteral("no validation")) +
             (cfg.checkpoint.everySteps > 0 ? QStringLiteral(", checkpoint every %1 steps").arg(cfg.checkpoint.everySteps) : QStringLiteral(", no periodic checkpoint"))},
        {QStringLiteral("Planned job"), job + (cfg.job.deadlineHours ? QStringLiteral(", deadline %1 h").arg(*cfg.job.deadlineHours) : QStringLiteral(", no deadline"))},
    });
}

void paintEnvironment(ReportCanvas &c, const ReportData &d)
{
    c.section(reportSectionTitles()[2]);
    const QJsonObject env = environmentOf(d);
    const QJsonObject &s = d.run.summary;
    c.keyValues({
        {QStringLiteral("PilotBench (measured)"), QStringLiteral("%1, git %2").arg(str(env, "pilotbench_version"), str(env, "git_revision"))},
        {QStringLiteral("PilotBench (this report)"), QStringLiteral("%1, git %2").arg(QStringLiteral(PILOTBENCH_VERSION), QStringLiteral(PILOTBENCH_GIT_REVISION))},
        {QStringLiteral("LibTorch"), str(env, "torch_version")},
        {QStringLiteral("CUDA runtime / cuDNN / NCCL"), QStringLiteral("%1 / %2 / %3").arg(orDash(str(env, "cuda_runtime")), orDash(str(env, "cudnn_version")), orDash(str(env, "nccl_version")))},
        {QStringLiteral("HIP runtime"), orDash(str(env, "hip_runtime"))},
        {QStringLiteral("Driver"), orDash(str(env, "driver_version"))},
        {QStringLiteral("Device"), QStringLiteral("%1: %2, %3, compute capability %4, %5 device(s)")
                                       .arg(str(env, "device"), str(env, "device_name"), num(env, "device_memory_bytes") > 0 ? sizeText(num(env, "device_memory_bytes")) : QStringLiteral("memory not reported"),
                                            orDash(str(env, "compute_capability")))
                                       .arg(static_cast<int>(num(env, "device_count")))},
        {QStringLiteral("CPU / OS"), QStringLiteral("%1, %2 threads; %3").arg(str(env, "cpu")).arg(static_cast<int>(num(env, "cpu_threads"))).arg(str(env, "os"))},
        {QStringLiteral("Config hash"), qs(d.run.configHash)},
        {QStringLiteral("Model revision"), orDash(str(s, "model_revision"))},
        {QStringLiteral("Data revision"), orDash(str(s, "data_revision"))},
        // What ran, as the run recorded it (runs before kernels_path named only the config's choice).
        {QStringLiteral("Kernels"), QStringLiteral("attention %1, optimizer %2, loss and MLP %3, format %4")
                                        .arg(orDash(str(s, "attention_path")), orDash(str(s, "optimizer_path")),
                                             !str(s, "kernels_path").isEmpty() ? str(s, "kernels_path")
                                             : d.config                        ? QString::fromLatin1(toString(d.config->train.kernels))
                                                                               : QStringLiteral("-"),
                                             !str(s, "numerical_format").isEmpty() ? str(s, "numerical_format")
                                             : d.config                            ? QString::fromLatin1(toString(d.config->train.precision))
                                                                                   : QStringLiteral("-"))
                                        + (str(s, "step_graph").isEmpty() ? QString() : QStringLiteral("; CUDA graph of the step: ") + str(s, "step_graph"))},
    },
                125, 7.5); // a sha256 revision (71 characters) stays on one line

}

void paintMemoryBudget(ReportCanvas &c, const ReportData &d)
{
    c.section(reportSectionTitles()[3], 155); // the bar chart follows
    const double measured = num(d.run.summary, "peak_allocated_bytes");
    if (!d.estimate) {
        c.paragraph(QStringLiteral("No prediction: ") + qs(d.estimateError.empty() ? d.configError : d.estimateError));
        c.keyValues({{QStringLiteral("Measured peak allocated"), sizeText(measured)}});
        return;
    }
    const MemoryEstimate &e = *d.estimate;
    const MemoryBreakdown &b = e.breakdown;
    // The pilot's attribution of its peak (last warm-up step), when the run has one.
    std::optional<MemoryAttribution> attribution;
    QString attributionError;
    if (const QJsonValue stored = d.run.summary.value(QStringLiteral("memory_attribution")); stored.isObject()) {
        try {
            attribution = memoryAttributionFromJson(stored.toObject(), "memory_attribution");
        } catch (const std::exception &error) {
            attributionError = QString::fromUtf8(error.what());
        }
    }
    const auto [unit, unitName] = byteUnit(std::max(measured, static_cast<double>(e.peakAllocatedBytes)));
    auto seg = [&, unit = unit](const char *name, int64_t bytes, QColor color) { return BarSegment {QString::fromLatin1(name), static_cast<double>(bytes) / unit, color}; };
    // One colour per part in both bars.
    auto parts = [&](const MemoryBreakdown &x) {
        return std::vector<BarSegment> {seg("weights", x.weights(), QColor(70, 110, 170)),          seg("gradients", x.gradients, QColor(230, 140, 50)),
                                        seg("optimizer states", x.optimizer, QColor(120, 170, 80)), seg("activations", x.activations, QColor(190, 80, 80)),
                                        seg("logits", x.logits, QColor(140, 100, 180)),             seg("BLAS workspaces, other", x.blasWorkspaces, QColor(150, 150, 150))};
    };
    const std::vector<StackedBar> bars {
        {QStringLiteral("Predicted peak allocated (estimator)"), parts(b)},
        attribution ? StackedBar {QStringLiteral("Measured peak allocated (pilot, by part)"), parts(measuredBreakdown(*attribution))}
                    : StackedBar {QStringLiteral("Measured peak allocated (pilot)"), {BarSegment {QStringLiteral("measured"), measured / unit, QColor(90, 90, 90)}}},
    };
    drawStackedBars(c.painter(), c.reserve(150), QStringLiteral("Peak allocated tensor memory, predicted against measured"),
                    QStringLiteral("memory (%1)").arg(unitName), bars);
    c.space(4);
    std::vector<std::pair<QString, QString>> kv {
        {QStringLiteral("Predicted peak allocated"), QStringLiteral("%1 (phase %2)").arg(formatBytes(e.peakAllocatedBytes), qs(e.peakPhase))},
        {QStringLiteral("Measured peak allocated"), measured > 0 ? sizeText(measured) : QStringLiteral("not measured in this run")},
        {QStringLiteral("Measured / predicted"), e.peakAllocatedBytes > 0 && measured > 0 ? QString::number(measured / static_cast<double>(e.peakAllocatedBytes), 'f', 3)
                                                                                           : QStringLiteral("-")},
        {QStringLiteral("Predicted device total"), QStringLiteral("%1 (adds workspace %2 and framework %3)")
                                                       .arg(formatBytes(e.totalBytes), formatBytes(b.workspace), formatBytes(b.framework))},
        {QStringLiteral("Measured peak device use"), sizeText(num(d.run.summary, "peak_device_used_bytes"))},
    };
    const QJsonObject byPhase = d.run.summary.value(QStringLiteral("peak_allocated_by_phase")).toObject();
    QStringList phases;
    for (auto it = byPhase.begin(); it != byPhase.end(); ++it)
        phases << QStringLiteral("%1 %2").arg(it.key(), sizeText(it.value().toDouble()));
    kv.push_back({QStringLiteral("Measured peak by phase"), phases.join(QStringLiteral(", "))});
    if (attribution) {
        kv.push_back({QStringLiteral("Attributed peak"), QStringLiteral("step %1, %2 pass, reached by %3")
                                                             .arg(attribution->step)
                                                             .arg(qs(attribution->peakPhase), qs(attribution->peakSite))});
        QStringList top;
        for (size_t i = 0; i < std::min<size_t>(attribution->sites.size(), 5); ++i) {
            const auto &site = attribution->sites[i];
            top << QStringLiteral("%1 %2 (%3%4)").arg(qs(site.scope), formatBytes(site.bytes), qs(site.phase), site.op.empty() ? QString() : QStringLiteral(", ") + qs(site.op));
        }
        kv.push_back({QStringLiteral("Largest sites at the peak"), top.join(QStringLiteral("; "))});
    } else if (!attributionError.isEmpty()) {
        kv.push_back({QStringLiteral("Attributed peak"), QStringLiteral("unreadable: ") + attributionError});
    }
    c.keyValues(kv, 160);
}

void paintCharts(ReportCanvas &c, const ReportData &d)
{
    c.section(reportSectionTitles()[4], 195); // the first chart follows
    const SampleSeries &s = d.samples;
    double maxBytes = 0;
    for (double v : s.peakAllocatedBytes)
        maxBytes = std::max(maxBytes, v);
    const auto [unit, unitName] = byteUnit(maxBytes);
    auto scaled = [unit = unit](const std::vector<double> &v) {
        std::vector<double> out;
        for (double x : v)
            out.push_back(x / unit);
        return out;
    };
    drawLineChart(c.painter(), c.reserve(190), QStringLiteral("Memory over steps"), QStringLiteral("step (warm-up included)"),
                  QStringLiteral("memory (%1)").arg(unitName),
                  {{QStringLiteral("peak allocated in step"), s.step, scaled(s.peakAllocatedBytes), QColor(190, 60, 60)},
                   {QStringLiteral("allocated at end of step"), s.step, scaled(s.allocatedBytes), QColor(50, 100, 170)}});
    c.space(8);
    drawLineChart(c.painter(), c.reserve(190), QStringLiteral("Step time over steps"), QStringLiteral("step (warm-up included)"), QStringLiteral("time (ms)"),
                  {{QStringLiteral("step"), s.step, s.stepTimeMs, QColor(30, 30, 30)},
                   {QStringLiteral("forward"), s.step, s.forwardMs, QColor(50, 100, 170)},
                   {QStringLiteral("backward"), s.step, s.backwardMs, QColor(230, 140, 50)},
                   {QStringLiteral("optimizer"), s.step, s.optimizerMs, QColor(120, 170, 80)},
                   {QStringLiteral("data wait"), s.step, s.dataWaitMs, QColor(190, 60, 60)}});
    c.paragraph(QStringLiteral("%1 samples recorded.").arg(s.size()), 8);
}

void paintStatistics(ReportCanvas &c, const ReportData &d)
{
    c.section(reportSectionTitles()[5]);
    const QJsonObject &s = d.run.summary;
    double waitMs = 0;
    for (double w : d.samples.dataWaitMs)
        waitMs += w;
    c.keyValues({
        {QStringLiteral("Step time"), QStringLiteral("mean %1, p50 %2, p90 %3, p99 %4, coefficient of variation %5")
                                          .arg(formatMs(num(s, "step_time_mean_ms")), formatMs(num(s, "step_time_p50_ms")), formatMs(num(s, "step_time_p90_ms")),
                                               formatMs(num(s, "step_time_p99_ms")), percent(num(s, "step_time_cv"), 1))},
        {QStringLiteral("Data stalls"), QStringLiteral("%1 of measured step time waited on the loader (%2 in all recorded steps)")
                                            .arg(percent(num(s, "data_stall_fraction")), formatMs(waitMs))},
        {QStringLiteral("Setup"), formatMs(num(s, "setup_ms"))},
        {QStringLiteral("Whole pilot"), formatMs(num(s, "total_ms"))},
    });
    std::vector<QStringList> rows;
    for (const auto &p : d.phases)
        rows.push_back({QString::fromLatin1(toString(p.phase)), QString::number(p.step), formatMs(p.startMs), formatMs(p.durationMs),
                        formatBytes(p.peakAllocatedBytes), formatBytes(p.peakDeviceUsedBytes)});
    if (!rows.empty())
        c.table({QStringLiteral("Phase"), QStringLiteral("First step"), QStringLiteral("Start"), QStringLiteral("Duration"), QStringLiteral("Peak allocated"),
                 QStringLiteral("Peak device use")},
                rows, {0.16, 0.12, 0.16, 0.16, 0.2, 0.2});
}

void paintTimings(ReportCanvas &c, const ReportData &d)
{
    c.section(reportSectionTitles()[6]);
    if (d.validations.empty()) {
        c.paragraph(QStringLiteral("Validation: no validation pass was measured (validation.every_steps = %1).").arg(d.config ? d.config->validation.everySteps : 0));
    } else {
        std::vector<QStringList> rows;
        for (const auto &v : d.validations)
            rows.push_back({QString::number(v.step), QString::number(v.loss, 'f', 4), QString::number(v.batches), formatMs(v.durationMs)});
        c.table({QStringLiteral("Validation at step"), QStringLiteral("Loss"), QStringLiteral("Batches"), QStringLiteral("Duration")}, rows, {0.25, 0.25, 0.25, 0.25});
    }
    if (d.checkpoints.empty()) {
        c.paragraph(QStringLiteral("Checkpoints: no checkpoint write was measured (checkpoint.every_steps = %1, or no checkpoint folder given).")
                        .arg(d.config ? d.config->checkpoint.everySteps : 0));
    } else {
        std::vector<QStringList> rows;
        for (const auto &w : d.checkpoints)
            rows.push_back({QString::number(w.step), formatBytes(w.bytes), formatMs(w.writeMs), rateText(bytesPerSecond(static_cast<double>(w.bytes), w.writeMs)), qs(w.path)});
        c.table({QStringLiteral("Checkpoint at step"), QStringLiteral("Size"), QStringLiteral("Write"), QStringLiteral("Write rate"), QStringLiteral("Path")}, rows,
                {0.14, 0.14, 0.14, 0.14, 0.44});
    }
    // A restore check of the same config timed the other two things a resume does with the disk.
    std::vector<QStringList> restoreRows;
    for (const auto &r : d.restoreChecks) {
        const RestoreCheckThroughput t = restoreCheckThroughput(r);
        if (t.writeBytesPerSecond > 0 || t.verifyBytesPerSecond > 0 || t.restoreBytesPerSecond > 0)
            restoreRows.push_back({QString::number(r.id), formatBytes(t.checkpointBytes), rateText(t.writeBytesPerSecond), rateText(t.verifyBytesPerSecond),
                                   rateText(t.restoreBytesPerSecond)});
    }
    if (!restoreRows.empty())
        c.table({QStringLiteral("Restore-check run"), QStringLiteral("Checkpoint"), QStringLiteral("Write rate"), QStringLiteral("Verify rate"), QStringLiteral("Restore rate")},
                restoreRows, {0.2, 0.2, 0.2, 0.2, 0.2});
    if (d.comparison && d.comparison->checkpointWriteBytesPerSecond > 0) {
        const Comparison &cmp = *d.comparison;
        c.paragraph(QStringLiteral("The rental window below times each checkpoint of the planned job, %1 of weights and optimizer state on any card count, "
                                   "at the measured %2: %3 per write.")
                        .arg(formatBytes(cmp.checkpointBytes), rateText(cmp.checkpointWriteBytesPerSecond),
                             secondsOrMs(static_cast<double>(cmp.checkpointBytes) / cmp.checkpointWriteBytesPerSecond * 1000.0)));
    }
}

} // namespace

const QStringList &reportSectionTitles()
{
    static const QStringList titles {
        QStringLiteral("Verdict summary"),
        QStringLiteral("Run definition"),
        QStringLiteral("Environment and revisions"),
        QStringLiteral("Memory budget: predicted against measured"),
        QStringLiteral("Memory and step time over steps"),
        QStringLiteral("Step-time statistics and data stalls"),
        QStringLiteral("Validation and checkpoint timings"),
        QStringLiteral("Restoration proof"),
        QStringLiteral("Scaling step"),
        QStringLiteral("Card comparison and term decision"),
        QStringLiteral("Assumptions"),
    };
    return titles;
}

QString formatCount(double count)
{
    if (count >= 1e12)
        return QString::number(count / 1e12, 'f', 2) + QStringLiteral(" T");
    if (count >= 1e9)
        return QString::number(count / 1e9, 'f', 2) + QStringLiteral(" B");
    if (count >= 1e6)
        return QString::number(count / 1e6, 'f', 2) + QStringLiteral(" M");
    if (count >= 1e3)
        return QString::number(count / 1e3, 'f', 1) + QStringLiteral(" k");
    return QString::number(count, 'f', 0);
}

QString formatMs(double ms) { return QString::number(ms, 'f', 2) + QStringLiteral(" ms"); }

QString formatMoney(double value, const std::string &currency) { return QString::number(value, 'f', 2) + QLatin1Char(' ') + QString::fromStdString(currency); }

void paintReport(ReportCanvas &canvas, const ReportData &d)
{
    canvas.title(QStringLiteral("PilotBench report: run %1, %2").arg(d.run.id).arg(d.run.name),
                 QStringLiteral("Generated %1 UTC by PilotBench %2. Every figure below is read from the run history or derived from it as labelled.")
                     .arg(QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyy-MM-dd HH:mm")), QStringLiteral(PILOTBENCH_VERSION)));
    paintVerdict(canvas, d);
    paintDefinition(canvas, d);
    paintEnvironment(canvas, d);
    paintMemoryBudget(canvas, d);
    paintCharts(canvas, d);
    paintStatistics(canvas, d);
    paintTimings(canvas, d);
    paintRestoration(canvas, d);
    paintScaling(canvas, d);
    paintComparison(canvas, d);
    paintAssumptions(canvas, d);
}

} // namespace pb::report
