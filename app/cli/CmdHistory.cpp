// `pilotbench-cli history`: list, show, export, import and annotate the runs in the local history.
#include "app/cli/CliSupport.h"
#include "history/HistoryExport.h"
#include "history/HistoryJson.h"
#include "history/HistoryStore.h"
#include "util/AppPaths.h"
#include "util/Errors.h"
#include "util/FileRules.h"
#include "workflow/CheckpointThroughput.h"

#include <QJsonArray>
#include <QJsonDocument>

namespace pb::cli {
namespace {

const char *kUsage =
    "Runs recorded in the local history database.\n\n"
    "  history [filters]                       list runs, newest first\n"
    "  history show ID [--samples]             one run: config, summary, phases, validation, checkpoints\n"
    "  history export [ID...] --format csv|json --out FILE   (no ID: every run the filters select)\n"
    "  history import FILE                     runs exported on another machine (duplicates skipped)\n"
    "  history tag ID TAG | untag ID TAG | note ID TEXT | pin ID | unpin ID\n"
    "  history diff ID1 ID2                    config paths that differ between two runs";

int64_t runId(const QString &text)
{
    bool ok = false;
    const qlonglong id = text.toLongLong(&ok);
    if (!ok || id <= 0)
        throw InvalidInputError("ID", "'" + text.toStdString() + "' is not a run id (a positive number; see 'pilotbench-cli history')");
    return id;
}

QDateTime dateOption(const QCommandLineParser &p, const QString &name, bool endOfDay)
{
    const QString text = p.value(name);
    if (text.isEmpty())
        return {};
    const QDate day = QDate::fromString(text, Qt::ISODate);
    if (day.isValid())
        return endOfDay ? QDateTime(day, QTime(23, 59, 59, 999), Qt::UTC) : QDateTime(day, QTime(0, 0), Qt::UTC);
    const QDateTime time = history::parseIsoUtc(text);
    if (!time.isValid())
        throw InvalidInputError(("--" + name).toStdString(), "'" + text.toStdString() + "' is not a date (YYYY-MM-DD or ISO 8601 date and time)");
    return time;
}

RunFilter filterFrom(const QCommandLineParser &p)
{
    RunFilter f;
    f.kind = p.value(QStringLiteral("kind"));
    if (!f.kind.isEmpty() && !historyRunKinds().contains(f.kind))
        throw InvalidInputError("--kind", "'" + f.kind.toStdString() + "' is not a run kind; use one of: " + historyRunKinds().join(QStringLiteral(", ")).toStdString());
    f.verdict = p.value(QStringLiteral("verdict"));
    f.model = p.value(QStringLiteral("model"));
    f.card = p.value(QStringLiteral("card"));
    f.device = p.value(QStringLiteral("device"));
    f.tag = p.value(QStringLiteral("tag"));
    f.startedFrom = dateOption(p, QStringLiteral("since"), false);
    f.startedTo = dateOption(p, QStringLiteral("until"), true);
    if (p.isSet(QStringLiteral("limit"))) {
        bool ok = false;
        f.limit = p.value(QStringLiteral("limit")).toInt(&ok);
        if (!ok || f.limit <= 0)
            throw InvalidInputError("--limit", "must be a positive number");
    }
    return f;
}

QJsonObject listEntry(const RunRecord &run)
{
    QJsonObject o = history::toJson(run);
    o.remove(QStringLiteral("config")); // `history show` has them; a listing stays readable
    o.remove(QStringLiteral("environment"));
    return o;
}

void printTable(CliContext &ctx, const std::vector<RunRecord> &runs, const QString &db)
{
    if (runs.empty()) {
        ctx.out << "No runs in " << db << " match.\n";
        return;
    }
    ctx.out << QStringLiteral("%1  %2  %3  %4  %5  %6  %7  %8\n")
                   .arg(QStringLiteral("ID"), 5).arg(QStringLiteral("KIND"), -13).arg(QStringLiteral("STATUS"), -7)
                   .arg(QStringLiteral("VERDICT"), -12).arg(QStringLiteral("STARTED (UTC)"), -19).arg(QStringLiteral("MODEL"), -18)
                   .arg(QStringLiteral("DEVICE/CARD"), -16).arg(QStringLiteral("STEPS"), 7);
    for (const RunRecord &r : runs) {
        const QString where = r.card.isEmpty() ? r.device : r.device + QLatin1Char('/') + r.card;
        ctx.out << QStringLiteral("%1  %2  %3  %4  %5  %6  %7  %8%9%10\n")
                       .arg(r.id, 5).arg(r.kind, -13).arg(r.status, -7).arg(r.verdict.isEmpty() ? QStringLiteral("-") : r.verdict, -12)
                       .arg(r.startedAt.toString(QStringLiteral("yyyy-MM-dd HH:mm:ss")), -19).arg(r.model, -18).arg(where, -16)
                       .arg(r.sampleCount, 7).arg(r.pinnedBaseline ? QStringLiteral("  [baseline]") : QString())
                       .arg(r.tags.isEmpty() ? QString() : QStringLiteral("  #") + r.tags.join(QStringLiteral(" #")));
    }
}

QJsonObject showJson(const HistoryStore &store, int64_t id, bool withSamples)
{
    return runJson(store, id, withSamples);
}

// GB/s of 1e9 bytes, the unit the decision's upload rate is given in; "-" where not measured.
QString gigabytesPerSecond(double bytesPerSecond)
{
    return bytesPerSecond > 0 ? QString::number(bytesPerSecond / 1e9, 'f', 3) + QStringLiteral(" GB/s") : QStringLiteral("- GB/s");
}

void printShow(CliContext &ctx, const HistoryStore &store, int64_t id)
{
    const RunRecord r = store.run(id);
    ctx.out << "Run " << r.id << " (" << r.kind << ", " << r.status << (r.verdict.isEmpty() ? QString() : QStringLiteral(", ") + r.verdict) << ")\n"
            << "  name:        " << r.name << '\n'
            << "  model:       " << r.model << '\n'
            << "  device:      " << r.device << (r.card.isEmpty() ? QString() : QStringLiteral(" (card ") + r.card + QLatin1Char(')')) << '\n'
            << "  started:     " << history::isoUtc(r.startedAt) << '\n'
            << "  finished:    " << (r.finishedAt.isValid() ? history::isoUtc(r.finishedAt) : QStringLiteral("-")) << '\n'
            << "  config hash: " << QString::fromStdString(r.configHash) << '\n'
            << "  samples:     " << r.sampleCount << '\n'
            << "  uuid:        " << r.uuid << '\n';
    if (!r.originHost.isEmpty())
        ctx.out << "  imported:    from " << r.originHost << ", run " << (r.originRunId ? QString::number(*r.originRunId) : QStringLiteral("?")) << '\n';
    if (r.parentRunId)
        ctx.out << "  parent run:  " << *r.parentRunId << '\n';
    if (!r.tags.isEmpty())
        ctx.out << "  tags:        " << r.tags.join(QStringLiteral(", ")) << '\n';
    if (r.pinnedBaseline)
        ctx.out << "  pinned as the baseline of " << r.model << '\n';
    if (!r.notes.isEmpty())
        ctx.out << "  notes:       " << r.notes << '\n';
    if (!r.summary.isEmpty()) {
        ctx.out << "Summary:\n";
        for (auto it = r.summary.begin(); it != r.summary.end(); ++it)
            if (!it.value().isObject() && !it.value().isArray())
                ctx.out << "  " << it.key().leftJustified(24) << it.value().toVariant().toString() << '\n';
    }
    const auto phases = store.phases(id);
    if (!phases.empty()) {
        ctx.out << "Phases:\n";
        for (const PhaseMark &m : phases)
            ctx.out << QStringLiteral("  %1 from step %2: %3 ms, peak allocated %4 B, peak device %5 B\n")
                           .arg(QLatin1String(toString(m.phase)), -10).arg(m.step).arg(m.durationMs, 0, 'f', 1).arg(m.peakAllocatedBytes).arg(m.peakDeviceUsedBytes);
    }
    for (const ValidationResult &v : store.validations(id))
        ctx.out << QStringLiteral("Validation at step %1: loss %2 over %3 batches in %4 ms\n").arg(v.step).arg(v.loss).arg(v.batches).arg(v.durationMs, 0, 'f', 1);
    for (const CheckpointWrite &w : store.checkpoints(id))
        ctx.out << QStringLiteral("Checkpoint at step %1: %2 (%3 B in %4 ms, %5)\n")
                       .arg(w.step)
                       .arg(QString::fromStdString(w.path))
                       .arg(w.bytes)
                       .arg(w.writeMs, 0, 'f', 1)
                       .arg(gigabytesPerSecond(bytesPerSecond(static_cast<double>(w.bytes), w.writeMs)));
    // The decision scales these rates to the planned job's checkpoint, so show them as rates.
    if (r.kind == QLatin1String("restore-check")) {
        const RestoreCheckThroughput t = restoreCheckThroughput(r);
        ctx.out << "Checkpoint rates: write " << gigabytesPerSecond(t.writeBytesPerSecond) << ", verify " << gigabytesPerSecond(t.verifyBytesPerSecond)
                << ", restore " << gigabytesPerSecond(t.restoreBytesPerSecond) << '\n';
    }
}

QJsonValue jsonOrMissing(const QJsonValue &v) { return v.isUndefined() ? QJsonValue(QStringLiteral("(missing)")) : v; }

void requireArgs(const QStringList &args, int count, const char *usage)
{
    if (args.size() != count + 1)
        throw InvalidInputError("history " + args.first().toStdString(), std::string("usage: pilotbench-cli history ") + usage);
}

int runHistory(CliContext &ctx)
{
    QCommandLineParser p;
    p.addOptions({
        {QStringLiteral("db"), QStringLiteral("History database (default: the application data folder's)."), QStringLiteral("FILE")},
        {QStringLiteral("json"), QStringLiteral("Print JSON.")},
        {QStringLiteral("kind"), QStringLiteral("Only runs of this kind (pilot, estimate, restore-check, scale, compare, decision)."), QStringLiteral("K")},
        {QStringLiteral("verdict"), QStringLiteral("Only runs with this verdict (fits, does-not-fit, failed, cancelled)."), QStringLiteral("V")},
        {QStringLiteral("model"), QStringLiteral("Only runs of this model."), QStringLiteral("M")},
        {QStringLiteral("card"), QStringLiteral("Only runs on this catalog card."), QStringLiteral("C")},
        {QStringLiteral("device"), QStringLiteral("Only runs on this device (cpu, cuda:0)."), QStringLiteral("D")},
        {QStringLiteral("tag"), QStringLiteral("Only runs with this tag."), QStringLiteral("T")},
        {QStringLiteral("since"), QStringLiteral("Only runs started on or after this date."), QStringLiteral("DATE")},
        {QStringLiteral("until"), QStringLiteral("Only runs started on or before this date."), QStringLiteral("DATE")},
        {QStringLiteral("limit"), QStringLiteral("At most N runs."), QStringLiteral("N")},
        {QStringLiteral("format"), QStringLiteral("Export format: csv (samples) or json (everything)."), QStringLiteral("FORMAT")},
        {QStringLiteral("out"), QStringLiteral("Export file."), QStringLiteral("FILE")},
        {QStringLiteral("samples"), QStringLiteral("show: include the samples (JSON).")},
    });
    p.addPositionalArgument(QStringLiteral("action"), QStringLiteral("show, export, import, tag, untag, note, pin, unpin, diff (none: list)"));
    if (!parseArgs(p, ctx, QString::fromLatin1(kUsage)))
        return p.isSet(QStringLiteral("help")) ? 0 : static_cast<int>(ExitCode::InvalidInput);
    const QStringList args = p.positionalArguments();
    const bool json = p.isSet(QStringLiteral("json"));
    const QString action = args.value(0, QStringLiteral("list"));
    static const QStringList actions {QStringLiteral("list"), QStringLiteral("show"), QStringLiteral("export"), QStringLiteral("import"), QStringLiteral("tag"),
                                      QStringLiteral("untag"), QStringLiteral("note"), QStringLiteral("pin"), QStringLiteral("unpin"), QStringLiteral("diff")};
    if (!actions.contains(action))
        throw InvalidInputError("history", "unknown action '" + action.toStdString() + "'; use one of: " + actions.join(QStringLiteral(", ")).toStdString());
    const RunFilter filter = filterFrom(p);
    // Listing, showing, exporting and diffing only read: they work on a history this user cannot write.
    static const QStringList readingActions {QStringLiteral("list"), QStringLiteral("show"), QStringLiteral("export"), QStringLiteral("diff")};
    HistoryStore store(p.isSet(QStringLiteral("db")) ? p.value(QStringLiteral("db")) : defaultDatabasePath(),
                       readingActions.contains(action) ? HistoryStore::Access::ReadOnlyWhereNeeded : HistoryStore::Access::ReadWrite);

    if (action == QLatin1String("list")) {
        if (args.size() > 1)
            throw InvalidInputError("history", "unexpected argument '" + args[1].toStdString() + "'");
        const auto runs = store.listRuns(filter);
        if (json) {
            QJsonArray list;
            for (const RunRecord &r : runs)
                list.append(listEntry(r));
            printJson(ctx, {{QStringLiteral("database"), store.path()}, {QStringLiteral("runs"), list}});
        } else {
            printTable(ctx, runs, store.path());
        }
    } else if (action == QLatin1String("show")) {
        requireArgs(args, 1, "show ID [--json] [--samples]");
        const int64_t id = runId(args[1]);
        if (json)
            printJson(ctx, showJson(store, id, p.isSet(QStringLiteral("samples"))));
        else
            printShow(ctx, store, id);
    } else if (action == QLatin1String("export")) {
        const QString format = p.value(QStringLiteral("format"));
        const QString out = p.value(QStringLiteral("out"));
        if (format != QLatin1String("csv") && format != QLatin1String("json"))
            throw InvalidInputError("--format", "must be csv or json");
        if (out.isEmpty())
            throw InvalidInputError("--out", "an export needs an output file");
        checkOutputPath(out, databasePaths(store.path()), "--out");
        std::vector<int64_t> ids;
        for (qsizetype i = 1; i < args.size(); ++i)
            ids.push_back(store.run(runId(args[i])).id);
        if (ids.empty()) {
            const auto runs = store.listRuns(filter);
            for (auto it = runs.rbegin(); it != runs.rend(); ++it) // oldest first: imports keep the order
                ids.push_back(it->id);
        }
        if (ids.empty())
            throw InvalidInputError("history export", "no run matches; nothing was written");
        if (format == QLatin1String("csv"))
            writeSamplesCsv(store, ids, out);
        else
            writeRunsJson(store, ids, out);
        if (json)
            printJson(ctx, {{QStringLiteral("exported"), QJsonArray::fromVariantList([&] { QVariantList l; for (auto id : ids) l << qlonglong(id); return l; }())},
                            {QStringLiteral("format"), format}, {QStringLiteral("out"), out}});
        else
            ctx.out << "Exported " << ids.size() << (ids.size() == 1 ? " run" : " runs") << " to " << out << " (" << format << ")\n";
    } else if (action == QLatin1String("import")) {
        requireArgs(args, 1, "import FILE");
        const ImportResult result = importRunsJson(store, args[1]);
        if (json) {
            QJsonArray imported;
            for (int64_t id : result.importedRunIds)
                imported.append(qint64(id));
            printJson(ctx, {{QStringLiteral("imported"), imported}, {QStringLiteral("skipped"), QJsonArray::fromStringList(result.skipped)}});
        } else {
            for (const QString &message : result.skipped)
                ctx.out << message << '\n';
            ctx.out << "Imported " << result.importedRunIds.size() << (result.importedRunIds.size() == 1 ? " run" : " runs");
            if (!result.importedRunIds.empty())
                ctx.out << " as " << QString::number(result.importedRunIds.front())
                        << (result.importedRunIds.size() > 1 ? QStringLiteral("..%1").arg(result.importedRunIds.back()) : QString());
            ctx.out << " into " << store.path() << '\n';
        }
    } else if (action == QLatin1String("tag") || action == QLatin1String("untag")) {
        requireArgs(args, 2, "tag|untag ID TAG");
        const int64_t id = runId(args[1]);
        QStringList tags = store.run(id).tags;
        if (action == QLatin1String("tag"))
            tags << args[2];
        else if (!tags.removeAll(args[2]))
            throw InvalidInputError("TAG", "run " + std::to_string(id) + " has no tag '" + args[2].toStdString() + "'");
        store.setTags(id, tags);
        ctx.out << "Run " << id << " tags: " << store.run(id).tags.join(QStringLiteral(", ")) << '\n';
    } else if (action == QLatin1String("note")) {
        requireArgs(args, 2, "note ID TEXT");
        store.setNotes(runId(args[1]), args[2]);
        ctx.out << "Noted on run " << args[1] << '\n';
    } else if (action == QLatin1String("pin") || action == QLatin1String("unpin")) {
        requireArgs(args, 1, "pin|unpin ID");
        const int64_t id = runId(args[1]);
        if (action == QLatin1String("pin"))
            store.pinBaseline(id);
        else
            store.unpinBaseline(id);
        ctx.out << "Run " << id << (action == QLatin1String("pin") ? " is now the baseline of " + store.run(id).model : QStringLiteral(" is no longer a baseline")) << '\n';
    } else if (action == QLatin1String("diff")) {
        requireArgs(args, 2, "diff ID1 ID2");
        const int64_t a = runId(args[1]);
        const int64_t b = runId(args[2]);
        const auto diffs = store.diffConfigs(a, b);
        if (json) {
            QJsonArray list;
            for (const ConfigDifference &d : diffs)
                list.append(QJsonObject {{QStringLiteral("path"), d.path}, {QStringLiteral("left"), jsonOrMissing(d.left)}, {QStringLiteral("right"), jsonOrMissing(d.right)}});
            printJson(ctx, {{QStringLiteral("left"), qint64(a)}, {QStringLiteral("right"), qint64(b)}, {QStringLiteral("differences"), list}});
        } else if (diffs.empty()) {
            ctx.out << "Runs " << a << " and " << b << " have the same config.\n";
        } else {
            auto text = [](const QJsonValue &v) { return v.isUndefined() ? QStringLiteral("(missing)") : v.isString() ? v.toString() : QString::fromUtf8(QJsonDocument(QJsonArray {v}).toJson(QJsonDocument::Compact)).mid(1).chopped(1); };
            for (const ConfigDifference &d : diffs)
                ctx.out << d.path << ": " << text(d.left) << " -> " << text(d.right) << '\n';
        }
    }
    return static_cast<int>(ExitCode::Ok);
}

CliRegistration registration({QStringLiteral("history"), QStringLiteral("List, show, export, import and annotate recorded runs"), &runHistory});

} // namespace
} // namespace pb::cli
