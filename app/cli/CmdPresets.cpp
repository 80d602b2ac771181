// `pilotbench-cli presets [--json]`: the shipped model presets with their parameter counts.
#include "app/cli/CliSupport.h"
#include "config/Presets.h"
#include "util/Errors.h"

#include <QJsonArray>
#include <QLocale>

namespace pb::cli {
namespace {

int runPresets(CliContext &ctx)
{
    QCommandLineParser parser;
    parser.addOption({QStringLiteral("json"), QStringLiteral("Print JSON.")});
    if (!parseArgs(parser, ctx, QStringLiteral("List the model presets (use one as preset:NAME wherever a config is named).")))
        return parser.isSet(QStringLiteral("help")) ? 0 : static_cast<int>(ExitCode::InvalidInput);
    if (!parser.positionalArguments().isEmpty()) {
        ctx.err << "error: presets takes no arguments\n";
        return static_cast<int>(ExitCode::InvalidInput);
    }
    QJsonArray list;
    const QLocale locale(QLocale::English);
    if (!parser.isSet(QStringLiteral("json")))
        ctx.out << QStringLiteral("%1 %2 %3 %4 %5 %6\n").arg(QStringLiteral("name"), -14).arg(QStringLiteral("family"), -8).arg(QStringLiteral("total params"), 16).arg(QStringLiteral("active"), 16).arg(QStringLiteral("layers"), 7).arg(QStringLiteral("hidden"), 7);
    for (const QString &name : presetNames()) {
        const RunConfig c = presetConfig(name);
        const ParamCounts counts = countParameters(c);
        if (parser.isSet(QStringLiteral("json"))) {
            list.append(QJsonObject {
                {QStringLiteral("name"), name},
                {QStringLiteral("family"), QString::fromStdString(c.model.family)},
                {QStringLiteral("total_params"), static_cast<double>(counts.total)},
                {QStringLiteral("trainable_params"), static_cast<double>(counts.trainable)},
                {QStringLiteral("active_params"), static_cast<double>(counts.active)},
                {QStringLiteral("layers"), static_cast<double>(c.model.layers)},
                {QStringLiteral("hidden_size"), static_cast<double>(c.model.hiddenSize)},
            });
        } else {
            ctx.out << QStringLiteral("%1 %2 %3 %4 %5 %6\n").arg(name, -14).arg(QString::fromStdString(c.model.family), -8).arg(locale.toString(static_cast<qint64>(counts.total)), 16).arg(locale.toString(static_cast<qint64>(counts.active)), 16).arg(c.model.layers, 7).arg(c.model.hiddenSize, 7);
        }
    }
    if (parser.isSet(QStringLiteral("json")))
        printJson(ctx, QJsonObject {{QStringLiteral("presets"), list}});
    return 0;
}

CliRegistration registration({QStringLiteral("presets"), QStringLiteral("List the model presets and their parameter counts"), &runPresets});

} // namespace
} // namespace pb::cli
