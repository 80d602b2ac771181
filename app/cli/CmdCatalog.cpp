// `pilotbench-cli catalog [list]|show|validate|match|export|use|reset`: the card catalog in force, a
// card's price table, the check of a replacement catalog file, the check of a detected accelerator
// against it, and the edited catalog in the configuration folder that every pricing command uses.
#include "app/cli/CliSupport.h"
#include "catalog/CatalogJson.h"
#include "catalog/DeviceMatch.h"
#include "util/Errors.h"
#include "workflow/CatalogSource.h"

#include <QFile>
#include <QJsonArray>

namespace pb::cli {
namespace {

constexpr int kInvalid = static_cast<int>(ExitCode::InvalidInput);

const QString kUsage = QStringLiteral(
    "Usage: pilotbench-cli catalog [SUBCOMMAND] ...\n\n"
    "  [list] [--file FILE] [--json]        the cards: memory, bandwidth, TFLOP/s, on-demand price\n"
    "  show ID [--file FILE] [--json]       one card with its full price table\n"
    "  validate FILE [--json]               'valid', or the first broken field (exit 2)\n"
    "  match --name NAME [--memory-mib N] [--cc CC] [--driver V] [--runtime V] [--backend cuda|rocm]\n"
    "        [--file FILE] [--json]         a detected device against the catalog (exit 1 on a mismatch)\n"
    "  export [--file FILE]                the catalog in force as a file to edit (JSON)\n"
    "  use FILE                            validate FILE and make it the catalog every command prices with\n"
    "  reset                               remove the edited catalog: the built-in one is used again\n\n"
    "Without --file the catalog in force is used: the edited one in the configuration folder (the GUI's\n"
    "Catalog menu, or 'catalog use'), else the built-in one. Prices are a locally modelled catalog, not a quote.\n");

QCommandLineOption jsonOption() { return {QStringLiteral("json"), QStringLiteral("Print JSON.")}; }
QCommandLineOption fileOption() { return {QStringLiteral("file"), QStringLiteral("Catalog file to use instead of the one in force."), QStringLiteral("FILE")}; }

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

Catalog catalogFrom(const QCommandLineParser &parser)
{
    return activeCatalog(parser.value(QStringLiteral("file")));
}

QString num(double value, int digits) { return QString::number(value, 'f', digits); }

QJsonObject withSource(const Catalog &catalog)
{
    QJsonObject json = catalogToJson(catalog);
    json.insert(QStringLiteral("source"), QString::fromStdString(catalog.source));
    return json;
}

void printHeader(CliContext &ctx, const Catalog &catalog)
{
    ctx.out << "Catalog " << QString::fromStdString(catalog.source) << ", modelled on " << QString::fromStdString(catalog.modelledOn) << " ("
            << QString::fromStdString(catalog.currency) << ")\n"
            << QString::fromStdString(catalog.notice) << "\n\n";
}

int runList(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOption(jsonOption());
    parser.addOption(fileOption());
    if (const auto code = parse(parser, ctx, QStringLiteral("List the catalog's cards."), 0))
        return *code;
    const Catalog catalog = catalogFrom(parser);
    if (parser.isSet(QStringLiteral("json"))) {
        printJson(ctx, withSource(catalog));
        return 0;
    }
    printHeader(ctx, catalog);
    ctx.out << QStringLiteral("%1 %2 %3 %4 %5 %6 %7 %8  %9\n")
                   .arg(QStringLiteral("id"), -18)
                   .arg(QStringLiteral("stack"), -6)
                   .arg(QStringLiteral("memory"), 10)
                   .arg(QStringLiteral("TB/s"), 6)
                   .arg(QStringLiteral("BF16 TF"), 8)
                   .arg(QStringLiteral("FP8 TF"), 7)
                   .arg(QStringLiteral("link GB/s"), 10)
                   .arg(QStringLiteral("$/GPU-h"), 8)
                   .arg(QStringLiteral("price as of"));
    for (const auto &c : catalog.cards) {
        ctx.out << QStringLiteral("%1 %2 %3 %4 %5 %6 %7 %8  %9\n")
                       .arg(QString::fromStdString(c.id), -18)
                       .arg(QString::fromLatin1(toString(c.stack)), -6)
                       .arg(num(c.memoryGb, 0) + QStringLiteral(" GB"), 10)
                       .arg(num(c.memoryBandwidthTbps, 2), 6)
                       .arg(num(c.bf16DenseTflops, 0), 8)
                       .arg(c.fp8DenseTflops ? num(*c.fp8DenseTflops, 0) : QStringLiteral("-"), 7)
                       .arg(num(c.interconnectGBps, 0), 10)
                       .arg(num(c.onDemandPerGpuHour(catalog.gpuCounts.front()), 2), 8)
                       .arg(c.priceSource ? QString::fromStdString(c.priceSource->asOf) : QStringLiteral("not stated"));
    }
    ctx.out << "\n$/GPU-h: on demand, " << catalog.gpuCounts.front() << " GPU. 'pilotbench-cli catalog show ID' for terms and card counts.\n";
    return 0;
}

int runShow(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOption(jsonOption());
    parser.addOption(fileOption());
    if (const auto code = parse(parser, ctx, QStringLiteral("Show one card with its price table."), 1))
        return *code;
    const Catalog catalog = catalogFrom(parser);
    const CardSpec &c = catalog.card(parser.positionalArguments().first().toStdString());
    if (parser.isSet(QStringLiteral("json"))) {
        const QJsonObject all = catalogToJson(catalog);
        for (const auto &card : all.value(QStringLiteral("cards")).toArray()) {
            if (card.toObject().value(QStringLiteral("id")).toString().toStdString() == c.id)
                printJson(ctx, card.toObject());
        }
        return 0;
    }
    printHeader(ctx, catalog);
    ctx.out << QString::fromStdString(c.name) << " (" << QString::fromStdString(c.id) << ")\n"
            << "  vendor            " << QString::fromStdString(c.vendor) << ", " << QString::fromStdString(c.formFactor) << ", " << num(c.powerW, 0) << " W\n"
            << "  memory            " << num(c.memoryGb, 0) << " GB (" << c.memoryBytes << " bytes visible), " << num(c.memoryBandwidthTbps, 3) << " TB/s\n"
            << "  dense TFLOP/s     BF16 " << num(c.bf16DenseTflops, 1) << ", FP8 " << (c.fp8DenseTflops ? num(*c.fp8DenseTflops, 1) : QStringLiteral("none"))
            << ", FP4 " << (c.fp4DenseTflops ? num(*c.fp4DenseTflops, 1) : QStringLiteral("none")) << '\n'
            << "  specifications    " << (c.specSource.empty() ? QStringLiteral("source not stated") : QString::fromStdString(c.specSource)) << '\n'
            << "  prices            " << (c.priceSource ? QStringLiteral("as of %1: %2%3").arg(QString::fromStdString(c.priceSource->asOf), QString::fromStdString(c.priceSource->text),
                                                                                          c.priceSource->url.empty() ? QString() : QStringLiteral(" ") + QString::fromStdString(c.priceSource->url))
                                                    : QStringLiteral("source not stated"))
            << '\n'
            << "  interconnect      " << QString::fromStdString(c.interconnect) << ", " << num(c.interconnectGBps, 0) << " GB/s\n"
            << "  software          " << QString::fromLatin1(toString(c.stack)) << " >= " << QString::fromStdString(c.minRuntimeVersion) << ", driver >= "
            << QString::fromStdString(c.minDriverVersion) << ", " << QString::fromStdString(c.computeCapability) << "\n\n"
            << "  " << QStringLiteral("%1").arg(QString::fromStdString(catalog.currency) + QStringLiteral(" per GPU-hour"), -20);
    for (int gpus : catalog.gpuCounts)
        ctx.out << QStringLiteral("%1").arg(QStringLiteral("x%1").arg(gpus), 8);
    ctx.out << '\n';
    auto line = [&](const QString &label, const std::string &termId) {
        ctx.out << "  " << QStringLiteral("%1").arg(label, -20);
        for (int gpus : catalog.gpuCounts)
            ctx.out << QStringLiteral("%1").arg(num(c.termPerGpuHour(termId, gpus), 2), 8);
        ctx.out << '\n';
    };
    line(QStringLiteral("on demand"), "on_demand");
    for (const auto &t : catalog.terms)
        line(QString::fromStdString(t.label) + QStringLiteral(" (") + num(t.hours, 0) + QStringLiteral(" h)"), t.id);
    ctx.out << "\n  " << QString::fromStdString(catalog.priceBasis) << '\n';
    return 0;
}

int runValidate(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOption(jsonOption());
    if (const auto code = parse(parser, ctx, QStringLiteral("Validate a catalog file."), 1))
        return *code;
    const QString path = parser.positionalArguments().first();
    const bool json = parser.isSet(QStringLiteral("json"));
    try {
        const Catalog catalog = loadCatalog(path);
        if (json)
            printJson(ctx, QJsonObject {{QStringLiteral("valid"), true}, {QStringLiteral("cards"), static_cast<int>(catalog.cards.size())},
                                        {QStringLiteral("modelled_on"), QString::fromStdString(catalog.modelledOn)}});
        else
            ctx.out << "valid: " << catalog.cards.size() << " cards, modelled on " << QString::fromStdString(catalog.modelledOn) << '\n';
        return 0;
    } catch (const InvalidInputError &e) {
        if (json)
            printJson(ctx, QJsonObject {{QStringLiteral("valid"), false}, {QStringLiteral("field"), QString::fromStdString(e.where())}, {QStringLiteral("error"), QString::fromUtf8(e.what())}});
        ctx.err << "error: " << e.what() << '\n';
        return kInvalid;
    }
}

int runMatch(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOption(jsonOption());
    parser.addOption(fileOption());
    parser.addOption({QStringLiteral("name"), QStringLiteral("Device name as the driver reports it."), QStringLiteral("NAME")});
    parser.addOption({QStringLiteral("memory-mib"), QStringLiteral("Total device memory in MiB."), QStringLiteral("N")});
    parser.addOption({QStringLiteral("cc"), QStringLiteral("Compute capability (9.0) or ROCm arch (gfx942)."), QStringLiteral("CC")});
    parser.addOption({QStringLiteral("driver"), QStringLiteral("Kernel driver version."), QStringLiteral("V")});
    parser.addOption({QStringLiteral("runtime"), QStringLiteral("CUDA or ROCm runtime version."), QStringLiteral("V")});
    parser.addOption({QStringLiteral("backend"), QStringLiteral("cuda (default) or rocm."), QStringLiteral("B"), QStringLiteral("cuda")});
    if (const auto code = parse(parser, ctx, QStringLiteral("Match a detected device against the catalog."), 0))
        return *code;
    const Catalog catalog = catalogFrom(parser);
    DetectedDevice device;
    device.name = parser.value(QStringLiteral("name")).toStdString();
    if (device.name.empty())
        throw InvalidInputError("--name", "the device name is required");
    if (parser.isSet(QStringLiteral("memory-mib"))) {
        bool ok = false;
        const qlonglong mib = parser.value(QStringLiteral("memory-mib")).toLongLong(&ok);
        if (!ok || mib <= 0)
            throw InvalidInputError("--memory-mib", "must be a positive whole number of MiB");
        device.memoryBytes = static_cast<int64_t>(mib) * 1048576;
    }
    device.computeCapability = parser.value(QStringLiteral("cc")).toStdString();
    device.driverVersion = parser.value(QStringLiteral("driver")).toStdString();
    device.runtimeVersion = parser.value(QStringLiteral("runtime")).toStdString();
    const QString backend = parser.value(QStringLiteral("backend"));
    if (backend != QLatin1String("cuda") && backend != QLatin1String("rocm"))
        throw InvalidInputError("--backend", "must be cuda or rocm");
    device.backend = backend == QLatin1String("rocm") ? SoftwareStack::Rocm : SoftwareStack::Cuda;

    const DeviceMatch m = matchDevice(device, catalog);
    if (parser.isSet(QStringLiteral("json"))) {
        QJsonArray mismatches;
        for (const auto &mm : m.mismatches)
            mismatches.append(QJsonObject {{QStringLiteral("kind"), QString::fromLatin1(toString(mm.kind))}, {QStringLiteral("message"), QString::fromStdString(mm.message)}});
        QJsonArray unchecked;
        for (const auto &u : m.unchecked)
            unchecked.append(QString::fromStdString(u));
        printJson(ctx, QJsonObject {{QStringLiteral("matched"), m.matched},
                                    {QStringLiteral("card"), m.matched ? QJsonValue(QString::fromStdString(m.cardId)) : QJsonValue(QJsonValue::Null)},
                                    {QStringLiteral("clean"), m.clean()},
                                    {QStringLiteral("mismatches"), mismatches},
                                    {QStringLiteral("unchecked"), unchecked},
                                    {QStringLiteral("message"), QString::fromStdString(m.message)}});
    } else {
        ctx.out << QString::fromStdString(m.message) << '\n';
        for (const auto &mm : m.mismatches)
            ctx.out << "  mismatch (" << toString(mm.kind) << "): " << QString::fromStdString(mm.message) << '\n';
        for (const auto &u : m.unchecked)
            ctx.out << "  not checked: " << QString::fromStdString(u) << '\n';
    }
    return m.clean() ? 0 : static_cast<int>(ExitCode::Failure);
}

int runExport(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOption(fileOption());
    if (const auto code = parse(parser, ctx, QStringLiteral("Print the catalog in force as a catalog file (edit it, then 'catalog use FILE')."), 0))
        return *code;
    printJson(ctx, catalogToJson(catalogFrom(parser)));
    return 0;
}

int runUse(CliContext &ctx)
{
    QCommandLineParser parser;
    if (const auto code = parse(parser, ctx, QStringLiteral("Validate FILE and make it the catalog every command prices with."), 1))
        return *code;
    const Catalog catalog = loadCatalog(parser.positionalArguments().first()); // refused by field, nothing changed
    saveUserCatalog(catalog);
    ctx.out << "catalog in use: " << userCatalogPath() << " (" << catalog.cards.size() << " cards, modelled on " << QString::fromStdString(catalog.modelledOn) << ")\n";
    return 0;
}

int runReset(CliContext &ctx)
{
    QCommandLineParser parser;
    if (const auto code = parse(parser, ctx, QStringLiteral("Remove the edited catalog; the built-in one is used again."), 0))
        return *code;
    const QString path = userCatalogPath();
    if (QFile::exists(path) && !QFile::remove(path))
        throw PilotBenchError(ExitCode::Failure, "cannot remove " + path.toStdString());
    ctx.out << "catalog in use: built-in\n";
    return 0;
}

int runCatalog(CliContext &ctx)
{
    if (!ctx.args.isEmpty() && (ctx.args.first() == QLatin1String("--help") || ctx.args.first() == QLatin1String("-h") || ctx.args.first() == QLatin1String("help"))) {
        ctx.out << kUsage;
        return 0;
    }
    if (ctx.args.isEmpty() || ctx.args.first().startsWith(QLatin1Char('-')))
        return runList(ctx);
    const QString sub = ctx.args.takeFirst();
    ctx.command += QLatin1Char(' ') + sub;
    if (sub == QLatin1String("list"))
        return runList(ctx);
    if (sub == QLatin1String("show"))
        return runShow(ctx);
    if (sub == QLatin1String("validate"))
        return runValidate(ctx);
    if (sub == QLatin1String("match"))
        return runMatch(ctx);
    if (sub == QLatin1String("export"))
        return runExport(ctx);
    if (sub == QLatin1String("use"))
        return runUse(ctx);
    if (sub == QLatin1String("reset"))
        return runReset(ctx);
    ctx.err << "error: unknown subcommand 'catalog " << sub << "'\n\n" << kUsage;
    return kInvalid;
}

CliRegistration registration({QStringLiteral("catalog"), QStringLiteral("The card catalog in force: list, show prices, validate, match a device, export, use, reset"), &runCatalog});

} // namespace
} // namespace pb::cli
