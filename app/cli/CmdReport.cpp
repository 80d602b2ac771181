// `pilotbench-cli report --run ID --out FILE.pdf`: the PDF report of one run from the history.
// main.cpp runs this command (only) under a QGuiApplication, offscreen when there is no display.
#include "app/cli/CliSupport.h"
#include "app/cli/PilotCommon.h"
#include "report/ReportWriter.h"
#include "workflow/CatalogSource.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QGuiApplication>

namespace pb::cli {
namespace {

int runReport(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOptions({
        {QStringLiteral("run"), QStringLiteral("Run id (see 'history')."), QStringLiteral("ID")},
        {QStringLiteral("db"), QStringLiteral("History database (default: the application data folder's)."), QStringLiteral("FILE")},
        {QStringLiteral("out"), QStringLiteral("PDF file to write (replaced)."), QStringLiteral("FILE")},
        {QStringLiteral("catalog"), QStringLiteral("Catalog file for the comparison (default: the edited catalog in the configuration folder, else the built-in one)."), QStringLiteral("FILE")},
    });
    if (!parseArgs(parser, ctx, QStringLiteral("Write the PDF report of one run: verdict, definition, environment, memory budget, charts, timings,\n"
                                               "restoration proof, scaling step, card comparison and term decision, assumptions.")))
        return parser.isSet(QStringLiteral("help")) ? 0 : static_cast<int>(ExitCode::InvalidInput);
    if (!parser.positionalArguments().isEmpty())
        throw InvalidInputError("report", "unexpected argument '" + parser.positionalArguments().first().toStdString() + "' (see --help)");
    bool ok = false;
    const int64_t runId = parser.value(QStringLiteral("run")).toLongLong(&ok);
    if (!ok || runId < 1)
        throw InvalidInputError("--run", "'" + parser.value(QStringLiteral("run")).toStdString() + "' must be a run id (see 'history')");
    const QString out = parser.value(QStringLiteral("out"));
    if (out.isEmpty())
        throw InvalidInputError("--out", "is required: the PDF file to write");
    if (!qobject_cast<QGuiApplication *>(QCoreApplication::instance()))
        throw PilotBenchError(ExitCode::Failure, "the report needs a QGuiApplication (a build defect in main.cpp)");
    const QString database = databaseFrom(parser);
    // The writer keeps the report off the database; the catalog file is only this command's input.
    if (parser.isSet(QStringLiteral("catalog")))
        checkOutputPath(out, {{parser.value(QStringLiteral("catalog")), QStringLiteral("the catalog file")}}, "--out");
    const int pages = report::writeRunReport(database, runId, out, activeCatalog(parser.value(QStringLiteral("catalog"))));
    ctx.out << "report of run " << runId << " written to " << out << " (" << pages << " pages)\n";
    return static_cast<int>(ExitCode::Ok);
}

const CliRegistration registration({QStringLiteral("report"), QStringLiteral("PDF report of one run (verdict, evidence, comparison, term decision)"), &runReport});

} // namespace
} // namespace pb::cli
