#include "app/cli/CliSupport.h"

#include "config/RunConfigJson.h"
#include "util/Errors.h"

#include <QJsonDocument>
#include <QRegularExpression>

#include <cmath>

namespace pb::cli {

bool parseArgs(QCommandLineParser &parser, CliContext &ctx, const QString &usage)
{
    parser.setSingleDashWordOptionMode(QCommandLineParser::ParseAsLongOptions);
    parser.addHelpOption();
    if (!usage.isEmpty())
        parser.setApplicationDescription(usage);
    QStringList argv {QStringLiteral("pilotbench-cli")};
    argv += ctx.args;
    if (!parser.parse(argv)) {
        ctx.err << "error: " << parser.errorText() << '\n';
        return false;
    }
    if (parser.isSet(QStringLiteral("help"))) {
        ctx.out << parser.helpText();
        return false;
    }
    return true;
}

RunConfig loadConfigArg(const QCommandLineParser &parser, const QString &spec)
{
    if (spec.isEmpty())
        throw InvalidInputError("--config", "a config is required: a JSON file or preset:NAME (see 'pilotbench-cli presets')");
    return loadRunConfig(spec, parser.values(QStringLiteral("set")));
}

void printJson(CliContext &ctx, const QJsonObject &object, bool compact)
{
    ctx.out << QJsonDocument(object).toJson(compact ? QJsonDocument::Compact : QJsonDocument::Indented);
    if (compact)
        ctx.out << '\n';
    ctx.out.flush();
}

int64_t parseByteSize(const QString &text, const QString &option)
{
    static const QRegularExpression re(QStringLiteral("^\\s*([0-9]+(?:\\.[0-9]+)?)\\s*([kKmMgGtT]?)(i?[bB])?\\s*$"));
    const auto match = re.match(text);
    if (!match.hasMatch())
        throw InvalidInputError(option.toStdString(), "'" + text.toStdString() + "' is not a size (examples: 512M, 2GiB, 1000000)");
    double value = match.captured(1).toDouble();
    const QString unit = match.captured(2).toUpper();
    const double scale = unit == QLatin1String("K") ? 1024.0 : unit == QLatin1String("M") ? 1024.0 * 1024 : unit == QLatin1String("G") ? 1024.0 * 1024 * 1024 : unit == QLatin1String("T") ? 1024.0 * 1024 * 1024 * 1024 : 1.0;
    value *= scale;
    if (!std::isfinite(value) || value <= 0 || value > 9.0e18)
        throw InvalidInputError(option.toStdString(), "size '" + text.toStdString() + "' must be positive and below 8 EiB");
    return static_cast<int64_t>(value);
}

} // namespace pb::cli
