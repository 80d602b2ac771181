// `pilotbench-cli compare`: every catalog card at every card count for one run config: fit,
// largest micro-batch, step time (measured or modelled), job and rental-window hours, term cost
// and cost per million useful tokens, with the cheapest fitting configuration recommended.
#include "app/cli/CliSupport.h"
#include "app/cli/PilotCommon.h"
#include "catalog/Catalog.h"
#include "workflow/CatalogSource.h"
#include "workflow/DecisionRun.h"
#include "config/ModelTraitsText.h"
#include "config/RunConfigJson.h"
#include "util/Errors.h"

#include <QJsonObject>

#include <algorithm>

namespace pb::cli {
namespace {

const QString kUsage = QStringLiteral(
    "Compare the catalog cards and card counts for a run: fit, step time, job hours, rental window,\n"
    "term cost and cost per million useful tokens. Step times come from the newest pilot of the same\n"
    "config in the history (measured on its own card, modelled elsewhere), or from the estimator's\n"
    "FLOPs at an assumed efficiency when there is none. Each card count gets the cheapest multi-GPU\n"
    "strategy that fits (--strategy auto: DDP where it fits, else ZeRO-1/2 or FSDP, with its\n"
    "communication in the step time) unless one is named. Prices: the catalog in force (the one edited\n"
    "in the GUI, in the configuration folder, else the built-in one; --catalog names another), a\n"
    "locally modelled catalog, not a quote. --record keeps the recommended configuration as the\n"
    "decision (stage 4 of the checklist).\n\n"
    "Exit codes: 0 compared and at least one configuration fits, 3 nothing fits on any card and\n"
    "count compared (the table is still printed), 2 invalid input.\n");

double nonNegative(const QCommandLineParser &parser, const QString &name)
{
    bool ok = false;
    const double v = parser.value(name).toDouble(&ok);
    if (!ok || !(v >= 0))
        throw InvalidInputError("--" + name.toStdString(), "'" + parser.value(name).toStdString() + "' must be a number >= 0");
    return v;
}

QString money(double v) { return QString::number(v, 'f', 2); }

// Hours with enough digits that a short job does not read as zero.
QString hours(double h) { return h < 0.01 ? QString::number(h, 'g', 2) : h < 10 ? QString::number(h, 'f', 2) : QString::number(h, 'f', 1); }

void printTable(CliContext &ctx, const Comparison &c)
{
    ctx.out << QStringLiteral("%1 %2 %3 %4 %5 %6 %7 %8 %9 %10 %11 %12\n")
                   .arg(QStringLiteral("card"), -16).arg(QStringLiteral("gpus"), 4).arg(QStringLiteral("strategy"), -8).arg(QStringLiteral("fits"), 5).arg(QStringLiteral("max mb"), 7)
                   .arg(QStringLiteral("step ms"), 10).arg(QStringLiteral("basis"), -9).arg(QStringLiteral("tokens/s"), 11).arg(QStringLiteral("job h"), 8)
                   .arg(QStringLiteral("window h"), 9).arg(QStringLiteral("total ") + QString::fromStdString(c.currency), 12)
                   .arg(QStringLiteral("per M tok"), 10);
    for (const auto &r : c.rows) {
        ctx.out << QStringLiteral("%1 %2 %3 %4 %5 %6 %7 %8 %9 %10 %11 %12  %13%14\n")
                       .arg(QString::fromStdString(r.cardId), -16).arg(r.gpus, 4).arg(QString::fromLatin1(toString(r.strategy)), -8).arg(r.fits ? QStringLiteral("yes") : QStringLiteral("no"), 5)
                       .arg(r.maxMicroBatch, 7).arg(r.stepTimeMs < 1 ? QString::number(r.stepTimeMs, 'g', 3) : QString::number(r.stepTimeMs, 'f', 1), 10).arg(QString::fromLatin1(toString(r.stepTimeBasis)), -9)
                       .arg(r.tokensPerSecond, 11, 'f', 0).arg(hours(r.cost.jobHours), 8).arg(hours(r.cost.windowHours), 9)
                       .arg(money(r.cost.totalCost), 12).arg(money(r.cost.costPerMillionTokens), 10)
                       .arg(QString::fromStdString(r.cost.plan.description))
                       .arg(r.recommended ? QStringLiteral("  <- recommended") : (r.meetsDeadline ? QString() : QStringLiteral("  (misses deadline)")));
    }
    ctx.out << '\n' << QString::fromStdString(c.recommendation) << "\n" << QString::fromStdString(numericFormatText(c)) << "\n\nCatalog (" << QString::fromStdString(c.catalogSource) << ") modelled on " << QString::fromStdString(c.catalogDate) << ": "
            << QString::fromStdString(c.catalogNotice) << "\nAssumptions:\n";
    for (const auto &a : c.assumptions)
        ctx.out << "  - " << QString::fromStdString(a) << '\n';
    ctx.out << "Per-row assumptions: --json.\n";
}

int runCompare(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOptions({
        {QStringLiteral("config"), QStringLiteral("Run config: a JSON file or preset:NAME."), QStringLiteral("FILE")},
        {QStringLiteral("set"), QStringLiteral("Override a field: PATH=VALUE (repeatable)."), QStringLiteral("PATH=VALUE")},
        {QStringLiteral("gpus"), QStringLiteral("Only this card count (default: every count the catalog prices)."), QStringLiteral("N")},
        {QStringLiteral("strategy"), QStringLiteral("Multi-GPU strategy: auto|ddp|fsdp|zero1|zero2|zero3 (default auto; 1 GPU: none)."), QStringLiteral("S"), QStringLiteral("auto")},
        {QStringLiteral("bucket-mb"),
         QStringLiteral("The pair of gradient buckets zero1/zero2 reduce through, in MiB (default 25, DDP's bucket_cap_mb; DeepSpeed's stage 2 defaults to 954)."),
         QStringLiteral("MiB"), QStringLiteral("25")},
        {QStringLiteral("term"), QStringLiteral("on_demand, a catalog term id (1w, 1m, 3m) or cheapest (default)."), QStringLiteral("T"), QStringLiteral("cheapest")},
        {QStringLiteral("stack"), QStringLiteral("Only cards validated with this software stack: cuda, rocm or any (default)."), QStringLiteral("S"), QStringLiteral("any")},
        {QStringLiteral("run"), QStringLiteral("Take step times from this pilot run (default: newest pilot of the same config)."), QStringLiteral("ID")},
        {QStringLiteral("db"), QStringLiteral("History database (default: the application data folder's)."), QStringLiteral("FILE")},
        {QStringLiteral("catalog"), QStringLiteral("Catalog file (default: the edited catalog in the configuration folder, else the built-in one)."), QStringLiteral("FILE")},
        {QStringLiteral("record"), QStringLiteral("Record the recommended configuration as the decision in the history.")},
        {QStringLiteral("storage-tb"), QStringLiteral("Persistent storage kept for the billed period, TB (default 0)."), QStringLiteral("TB"), QStringLiteral("0")},
        {QStringLiteral("egress-tb"), QStringLiteral("Data moved out, TB (default 0)."), QStringLiteral("TB"), QStringLiteral("0")},
        {QStringLiteral("support"), QStringLiteral("Add paid support for the billed months.")},
        {QStringLiteral("json"), QStringLiteral("Print JSON: {\"rows\": [...], \"recommendation\": ...}.")},
    });
    if (!parseArgs(parser, ctx, kUsage))
        return parser.isSet(QStringLiteral("help")) ? 0 : static_cast<int>(ExitCode::InvalidInput);
    if (!parser.positionalArguments().isEmpty())
        throw InvalidInputError("compare", "unexpected argument '" + parser.positionalArguments().first().toStdString() + "' (see --help)");
    if (!parser.isSet(QStringLiteral("config")))
        throw InvalidInputError("--config", "is required (a JSON file or preset:NAME)");

    const RunConfig config = loadConfigArg(parser, parser.value(QStringLiteral("config")));
    const Catalog catalog = activeCatalog(parser.value(QStringLiteral("catalog")));

    ComparisonRequest request;
    if (parser.isSet(QStringLiteral("gpus"))) {
        bool ok = false;
        const int gpus = parser.value(QStringLiteral("gpus")).toInt(&ok);
        if (!ok || gpus < 1)
            throw InvalidInputError("--gpus", "'" + parser.value(QStringLiteral("gpus")).toStdString() + "' must be a whole number of at least 1");
        request.gpuCounts = {gpus};
    }
    if (parser.value(QStringLiteral("strategy")) != QLatin1String("auto")) {
        const auto strategy = parseStrategy(parser.value(QStringLiteral("strategy")).toStdString());
        if (!strategy || *strategy == ParallelStrategy::None)
            throw InvalidInputError("--strategy", "must be one of auto, ddp, fsdp, zero1, zero2, zero3");
        request.multiGpuStrategy = *strategy;
    }
    request.bucketBytes = static_cast<int64_t>(intOptionAtLeast(parser, QStringLiteral("bucket-mb"), 1)) << 20;
    const QString stack = parser.value(QStringLiteral("stack"));
    if (stack == QLatin1String("cuda"))
        request.stack = SoftwareStack::Cuda;
    else if (stack == QLatin1String("rocm"))
        request.stack = SoftwareStack::Rocm;
    else if (stack != QLatin1String("any"))
        throw InvalidInputError("--stack", "'" + stack.toStdString() + "' must be cuda, rocm or any");
    const QString term = parser.value(QStringLiteral("term"));
    request.termId = term == QLatin1String("cheapest") ? std::string() : term.toStdString();
    request.options.storageTb = nonNegative(parser, QStringLiteral("storage-tb"));
    request.options.egressTb = nonNegative(parser, QStringLiteral("egress-tb"));
    request.options.support = parser.isSet(QStringLiteral("support"));

    const QString database = databaseFrom(parser);
    std::optional<int64_t> runId;
    if (parser.isSet(QStringLiteral("run"))) {
        bool ok = false;
        runId = parser.value(QStringLiteral("run")).toLongLong(&ok);
        if (!ok || *runId < 1)
            throw InvalidInputError("--run", "'" + parser.value(QStringLiteral("run")).toStdString() + "' must be a run id (see 'history')");
    }
    const Comparison comparison = decide(config, catalog, request, database, runId);
    std::optional<int64_t> decisionRun;
    if (parser.isSet(QStringLiteral("record")))
        decisionRun = recordDecision(database, config, comparison);
    if (parser.isSet(QStringLiteral("json"))) {
        QJsonObject json = toJson(comparison);
        if (decisionRun)
            json.insert(QStringLiteral("decision_run_id"), static_cast<double>(*decisionRun));
        printJson(ctx, json);
    } else {
        // What is compared: the layers by attention kind, the experts, the parameters (active per token).
        ctx.out << "Model: " << QString::fromStdString(describeModelSummary(config)) << "\n\n";
        printTable(ctx, comparison);
        if (decisionRun)
            ctx.out << "Decision recorded as run " << *decisionRun << " in " << database << '\n';
    }
    const bool anyFits = std::any_of(comparison.rows.begin(), comparison.rows.end(), [](const ComparisonRow &r) { return r.fits; });
    return static_cast<int>(anyFits ? ExitCode::Ok : ExitCode::DoesNotFit);
}

const CliRegistration registration({QStringLiteral("compare"), QStringLiteral("Cards x card counts: fit, step time, window, term cost per million tokens"), &runCompare});

} // namespace
} // namespace pb::cli
