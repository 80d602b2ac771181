// `pilotbench-cli checklist`: the four stages of the staged pilot for one config, from the evidence
// recorded in the history (the same rules as the GUI's checklist, core/workflow/Checklist).
#include "app/cli/CliSupport.h"
#include "app/cli/PilotCommon.h"
#include "config/RunConfigJson.h"
#include "history/HistoryStore.h"
#include "util/Errors.h"
#include "workflow/CatalogSource.h"
#include "workflow/Checklist.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QJsonArray>

namespace pb::cli {
namespace {

const QString kUsage = QStringLiteral(
    "The staged pilot's checklist for a run config: memory budget (a fitting pilot), one scaling step,\n"
    "the restoration proof and the recorded term decision, each from its best evidence in the history\n"
    "(the newest passing run of exactly this config; later runs that did not pass are listed). The\n"
    "decision is stale when the catalog in force or the pilot evidence changed since it was recorded.\n\n"
    "Exit codes: 0 all four stages passed, 1 a stage is missing, failed or stale, 2 invalid input.\n");

int runChecklist(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOptions({
        {QStringLiteral("config"), QStringLiteral("Run config: a JSON file or preset:NAME."), QStringLiteral("FILE")},
        {QStringLiteral("set"), QStringLiteral("Override a field: PATH=VALUE (repeatable)."), QStringLiteral("PATH=VALUE")},
        {QStringLiteral("db"), QStringLiteral("History database (default: the application data folder's)."), QStringLiteral("FILE")},
        {QStringLiteral("catalog"), QStringLiteral("Catalog file a decision is checked against (default: the catalog in force)."), QStringLiteral("FILE")},
        {QStringLiteral("json"), QStringLiteral("Print JSON: {\"stages\": [...], \"passed\": bool}.")},
    });
    if (!parseArgs(parser, ctx, kUsage))
        return parser.isSet(QStringLiteral("help")) ? 0 : static_cast<int>(ExitCode::InvalidInput);
    if (!parser.positionalArguments().isEmpty())
        throw InvalidInputError("checklist", "unexpected argument '" + parser.positionalArguments().first().toStdString() + "' (see --help)");
    if (!parser.isSet(QStringLiteral("config")))
        throw InvalidInputError("--config", "is required (a JSON file or preset:NAME)");
    const RunConfig config = loadConfigArg(parser, parser.value(QStringLiteral("config")));
    const QString database = databaseFrom(parser);
    if (!QFileInfo::exists(database))
        throw InvalidInputError("--db", "no history database at '" + database.toStdString() + "': run a pilot first");
    const HistoryStore store(database, HistoryStore::Access::ReadOnlyWhereNeeded);
    const QString model = QString::fromStdString(config.model.preset.empty() ? config.model.family : config.model.preset);
    const Catalog catalog = activeCatalog(parser.value(QStringLiteral("catalog")));
    const std::vector<StageStatus> stages = evaluateChecklist(store, model, configHash(config), &catalog);
    bool all = true;
    QJsonArray list;
    for (int i = 0; i < kChecklistStages; ++i) {
        const StageStatus &s = stages[static_cast<size_t>(i)];
        all = all && s.state == StageState::Passed;
        const QString title = QCoreApplication::translate("Checklist", checklistStages()[static_cast<size_t>(i)].title);
        list.append(QJsonObject {{QStringLiteral("stage"), title}, {QStringLiteral("state"), QString::fromLatin1(toString(s.state))},
                                 {QStringLiteral("run_id"), s.runId > 0 ? QJsonValue(static_cast<double>(s.runId)) : QJsonValue()},
                                 {QStringLiteral("evidence"), s.evidence}});
        if (!parser.isSet(QStringLiteral("json")))
            ctx.out << QStringLiteral("%1 %2  %3\n").arg(title, -22).arg(QString::fromLatin1(toString(s.state)), -8).arg(s.evidence);
    }
    if (parser.isSet(QStringLiteral("json")))
        printJson(ctx, QJsonObject {{QStringLiteral("stages"), list}, {QStringLiteral("passed"), all},
                                    {QStringLiteral("config_hash"), QString::fromStdString(configHash(config))}});
    return static_cast<int>(all ? ExitCode::Ok : ExitCode::Failure);
}

const CliRegistration registration({QStringLiteral("checklist"), QStringLiteral("The staged pilot's four stages for a config, from the history"), &runChecklist});

} // namespace
} // namespace pb::cli
