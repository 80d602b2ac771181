// `pilotbench-cli config new|validate|import-hf|show`: write, check, import and inspect run configs.
#include "app/cli/CliSupport.h"
#include "config/HfImport.h"
#include "config/ModelTraitsText.h"
#include "config/RunConfigJson.h"
#include "config/RunConfigParse.h"
#include "config/RunConfigValidation.h"
#include "util/AppPaths.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QLocale>

namespace pb::cli {
namespace {

constexpr int kInvalid = static_cast<int>(ExitCode::InvalidInput);

const QString kUsage = QStringLiteral(
    "Usage: pilotbench-cli config SUBCOMMAND ...\n\n"
    "  new --preset NAME [--out FILE] [--set PATH=VALUE]...   a complete config for a preset\n"
    "  validate CONFIG [--json] [--set PATH=VALUE]...          'valid', or every broken rule (exit 2)\n"
    "  import-hf PATH [--out FILE] [--set PATH=VALUE]...       RunConfig JSON from a Hugging Face config.json\n"
    "  show CONFIG [--json] [--set PATH=VALUE]...              the config with its parameter counts\n\n"
    "CONFIG is a JSON file or preset:NAME; --set overrides a dotted path, e.g. --set train.lora.rank=16.\n");

QCommandLineOption setOption() { return {QStringLiteral("set"), QStringLiteral("Override a field: PATH=VALUE (repeatable)."), QStringLiteral("PATH=VALUE")}; }
QCommandLineOption jsonOption() { return {QStringLiteral("json"), QStringLiteral("Print JSON.")}; }
QCommandLineOption outOption() { return {QStringLiteral("out"), QStringLiteral("Write the config to FILE (atomically) instead of stdout."), QStringLiteral("FILE")}; }

// parseArgs plus the positional-argument count; the exit code when parsing stopped.
std::optional<int> parse(QCommandLineParser &parser, CliContext &ctx, const QString &usage, int positionals)
{
    if (!parseArgs(parser, ctx, usage))
        return parser.isSet(QStringLiteral("help")) ? 0 : kInvalid;
    if (parser.positionalArguments().size() != positionals) {
        ctx.err << "error: expected " << positionals << " argument(s), got " << parser.positionalArguments().size() << " (see --help)\n";
        return kInvalid;
    }
    return std::nullopt;
}

// Writes to --out when given (never over `inputs` or the default history database), stdout otherwise.
void emit(CliContext &ctx, const QCommandLineParser &parser, const RunConfig &config, QList<ProtectedPath> inputs = {})
{
    if (parser.isSet(QStringLiteral("out"))) {
        const QString out = parser.value(QStringLiteral("out"));
        inputs += databasePaths(defaultDatabasePath());
        checkOutputPath(out, inputs, "--out");
        saveRunConfig(config, out);
        ctx.err << "wrote " << out << " (config hash " << QString::fromStdString(configHash(config)) << ")\n";
        return;
    }
    ctx.out << QString::fromUtf8(formatRunConfig(config));
    ctx.out.flush();
}

int runNew(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOption({QStringLiteral("preset"), QStringLiteral("Preset name (see 'pilotbench-cli presets')."), QStringLiteral("NAME")});
    parser.addOption(outOption());
    parser.addOption(setOption());
    if (const auto code = parse(parser, ctx, QStringLiteral("Write a complete config for a preset."), 0))
        return *code;
    if (!parser.isSet(QStringLiteral("preset")))
        throw InvalidInputError("--preset", "required (see 'pilotbench-cli presets')");
    const RunConfig config = loadConfigArg(parser, QStringLiteral("preset:") + parser.value(QStringLiteral("preset")));
    emit(ctx, parser, config);
    return 0;
}

int runValidate(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOption(jsonOption());
    parser.addOption(setOption());
    parser.addPositionalArgument(QStringLiteral("CONFIG"), QStringLiteral("JSON file or preset:NAME"));
    if (const auto code = parse(parser, ctx, QStringLiteral("Check a config against every rule."), 1))
        return *code;
    const QString spec = parser.positionalArguments().first();
    // Parsing errors (types, unknown keys, malformed JSON) throw; rule violations are all listed.
    const RunConfig config = parseRunConfigSpec(spec, parser.values(QStringLiteral("set")));
    const auto issues = validateRunConfig(config);
    if (parser.isSet(QStringLiteral("json"))) {
        QJsonArray list;
        for (const auto &i : issues)
            list.append(QJsonObject {{QStringLiteral("field"), QString::fromStdString(i.field)}, {QStringLiteral("message"), QString::fromStdString(i.message)}});
        QJsonObject result {{QStringLiteral("valid"), issues.empty()}, {QStringLiteral("issues"), list}};
        if (issues.empty())
            result.insert(QStringLiteral("config_hash"), QString::fromStdString(configHash(config)));
        printJson(ctx, result);
    } else if (issues.empty()) {
        ctx.out << "valid\n";
    } else {
        ctx.out << "invalid: " << issues.size() << " issue(s) in " << spec << '\n';
        for (const auto &i : issues)
            ctx.out << "  " << QString::fromStdString(i.field) << ": " << QString::fromStdString(i.message) << '\n';
    }
    return issues.empty() ? 0 : kInvalid;
}

int runImportHf(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOption(outOption());
    parser.addOption(setOption());
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("Model folder with config.json, or the config.json file"));
    if (const auto code = parse(parser, ctx, QStringLiteral("Import a Hugging Face config.json as a RunConfig."), 1))
        return *code;
    const QString input = parser.positionalArguments().first();
    // Checked before reading: an import must never replace the config.json it reads.
    if (parser.isSet(QStringLiteral("out"))) {
        const QString hfConfig = QFileInfo(input).isDir() ? QDir(input).filePath(QStringLiteral("config.json")) : input;
        checkOutputPath(parser.value(QStringLiteral("out")), {{input, QStringLiteral("the imported file")}, {hfConfig, QStringLiteral("the imported config.json")}}, "--out");
    }
    RunConfig config = importHfConfig(input);
    const QStringList sets = parser.values(QStringLiteral("set"));
    if (!sets.isEmpty()) {
        QJsonObject json = toJson(config);
        for (const QString &s : sets)
            applyOverride(json, s);
        config = runConfigFromJson(json);
    }
    emit(ctx, parser, config, {{input, QStringLiteral("the imported file")}});
    return 0;
}

QString count(int64_t n) { return QLocale(QLocale::English).toString(static_cast<qint64>(n)); }
QString text(const std::string &s) { return s.empty() ? QStringLiteral("-") : QString::fromStdString(s); }

void printHuman(CliContext &ctx, const RunConfig &c, const ParamCounts &p)
{
    const ModelShape &m = c.model;
    const TrainConfig &t = c.train;
    auto line = [&](const char *label, const QString &value) { ctx.out << QString::fromLatin1(label).leftJustified(14) << value << '\n'; };
    line("name", text(c.name));
    line("model", QStringLiteral("%1 (preset %2, revision %3)").arg(text(m.family), text(m.preset), text(m.revision)));
    line("shape", QStringLiteral("%1 layers, hidden %2, %3 heads (%4 kv, head dim %5), intermediate %6, vocab %7, max positions %8, %9 embeddings%10")
                      .arg(m.layers).arg(m.hiddenSize).arg(m.attentionHeads).arg(m.kvHeads).arg(m.effectiveHeadDim()).arg(m.intermediateSize)
                      .arg(m.vocabSize).arg(m.maxPositions).arg(m.tieEmbeddings ? QStringLiteral("tied") : QStringLiteral("untied"))
                      .arg(m.attentionBias ? QStringLiteral(", q/k/v bias") : QString()));
    if (m.activation != ActivationKind::SwiGlu)
        line("activation", QString::fromLatin1(toString(m.activation)));
    if (m.moe.enabled()) {
        const auto &e = m.moe;
        line("experts", QStringLiteral("%1 per sparse layer, %2 per token, width %3%4%5; %6 of %7 layers sparse; aux loss weight %8")
                            .arg(e.experts).arg(e.expertsPerToken).arg(e.expertIntermediateSize)
                            .arg(e.sharedExpertIntermediateSize > 0 ? QStringLiteral(", shared expert width %1").arg(e.sharedExpertIntermediateSize) : QString())
                            .arg(e.normalizeTopK ? QStringLiteral(", top-k renormalised") : QString())
                            .arg([&] { int64_t n = 0; for (int64_t i = 0; i < m.layers; ++i) n += e.sparse(i) ? 1 : 0; return n; }()).arg(m.layers).arg(e.auxLossWeight));
    }
    if (m.qkNorm != QkNorm::None)
        line("q/k norm", m.qkNorm == QkNorm::Head ? QStringLiteral("RMSNorm per head")
                          : m.qkNorm == QkNorm::L2 ? QStringLiteral("L2 norm per head after the rotary, rotary layers only")
                                                    : QStringLiteral("RMSNorm over the projection"));
    for (const auto &[label, value] : describeModelTraits(m))
        line(label.c_str(), QString::fromStdString(value));
    line("weights", m.weightsPath.empty() ? QStringLiteral("random initialisation") : QString::fromStdString(m.weightsPath));
    if (!m.checkpointQuantization.empty())
        line("checkpoint", QStringLiteral("%1 experts in the published files, dequantised as they load; trained and counted here as bf16 tensors")
                               .arg(QString::fromStdString(m.checkpointQuantization)));
    line("parameters", QStringLiteral("%1 total, %2 trainable (%3%)%4").arg(count(p.total), count(p.trainable)).arg(p.total > 0 ? 100.0 * p.trainable / p.total : 0.0, 0, 'f', 2)
                           .arg(p.active != p.total ? QStringLiteral(", %1 active per token").arg(count(p.active)) : QString()));
    QString mode = QString::fromLatin1(toString(t.mode));
    if (usesAdapters(t.mode))
        mode += QStringLiteral(" (rank %1, alpha %2, %3 adapter params%4)").arg(t.lora.rank).arg(t.lora.alpha).arg(count(p.lora))
                    .arg(t.mode == TrainMode::Qlora ? QStringLiteral("; frozen projections in NF4, 4.127 bits a weight") : QString());
    line("training", QStringLiteral("%1, %2 lr %3, %4").arg(mode, QString::fromLatin1(toString(t.optimizer.kind))).arg(t.optimizer.lr).arg(QString::fromLatin1(toString(t.precision))));
    line("batch", QStringLiteral("seq %1 x micro-batch %2 x accumulation %3, recompute %4, attention %5, kernels %6%7")
                      .arg(t.seqLen).arg(t.microBatch).arg(t.gradAccum).arg(t.recompute ? QStringLiteral("on") : QStringLiteral("off"), QString::fromLatin1(toString(t.attention)),
                                                                           QString::fromLatin1(toString(t.kernels)), t.cudaGraph ? QStringLiteral(", CUDA graph") : QString()));
    line("data", QStringLiteral("%1%2, %3 lengths%4").arg(QString::fromLatin1(toString(c.data.kind)), c.data.path.empty() ? QString() : QStringLiteral(" ") + QString::fromStdString(c.data.path),
                                                       QString::fromLatin1(toString(c.data.lengths)), c.data.longestFirst ? QStringLiteral(", longest first") : QString()));
    line("job", QStringLiteral("%1 %2%3").arg(c.job.amount).arg(QString::fromLatin1(toString(c.job.unit)), c.job.deadlineHours ? QStringLiteral(", deadline %1 h").arg(*c.job.deadlineHours) : QString()));
    line("seed", QStringLiteral("%1%2").arg(c.seed).arg(c.deterministic ? QStringLiteral(" (deterministic)") : QString()));
    line("config hash", QString::fromStdString(configHash(c)));
}

int runShow(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOption(jsonOption());
    parser.addOption(setOption());
    parser.addPositionalArgument(QStringLiteral("CONFIG"), QStringLiteral("JSON file or preset:NAME"));
    if (const auto code = parse(parser, ctx, QStringLiteral("Show a config with its parameter counts."), 1))
        return *code;
    const RunConfig config = loadConfigArg(parser, parser.positionalArguments().first());
    const ParamCounts counts = countParameters(config);
    if (parser.isSet(QStringLiteral("json"))) {
        QJsonObject json = toJson(config);
        json.insert(QStringLiteral("total_params"), static_cast<double>(counts.total));
        json.insert(QStringLiteral("trainable_params"), static_cast<double>(counts.trainable));
        json.insert(QStringLiteral("lora_params"), static_cast<double>(counts.lora));
        json.insert(QStringLiteral("config_hash"), QString::fromStdString(configHash(config)));
        printJson(ctx, json);
    } else {
        printHuman(ctx, config, counts);
    }
    return 0;
}

int runConfig(CliContext &ctx)
{
    if (ctx.args.isEmpty() || ctx.args.first() == QLatin1String("--help") || ctx.args.first() == QLatin1String("-h")) {
        (ctx.args.isEmpty() ? ctx.err : ctx.out) << kUsage;
        return ctx.args.isEmpty() ? kInvalid : 0;
    }
    const QString sub = ctx.args.takeFirst();
    ctx.command += QLatin1Char(' ') + sub;
    if (sub == QLatin1String("new"))
        return runNew(ctx);
    if (sub == QLatin1String("validate"))
        return runValidate(ctx);
    if (sub == QLatin1String("import-hf"))
        return runImportHf(ctx);
    if (sub == QLatin1String("show"))
        return runShow(ctx);
    ctx.err << "error: unknown subcommand 'config " << sub << "'\n\n" << kUsage;
    return kInvalid;
}

CliRegistration registration({QStringLiteral("config"), QStringLiteral("Create, validate, import (Hugging Face) and show run configs"), &runConfig});

} // namespace
} // namespace pb::cli
