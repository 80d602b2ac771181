#include "app/cli/CliSupport.h"

#include "config/RunConfigJson.h"
#include "util/Errors.h"

#include <QCoreApplication>
#include <QJsonDocument>
#include <QRegularExpression>

#include <cmath>

namespace pb::cli {

namespace {

// QCommandLineParser's usage line starts with the program's argv[0] and knows nothing of commands:
// "Usage: /path/to/pilotbench-cli [options]". Ours names the program and the command.
QString helpFor(const QCommandLineParser &parser, const QString &command)
{
    QString text = parser.helpText();
    const QString program = QCoreApplication::instance() ? QCoreApplication::arguments().constFirst() : QStringLiteral("<executable_name>");
    const QString prefix = QStringLiteral("Usage: ") + program;
    if (text.startsWith(prefix))
        text.replace(0, prefix.size(), QStringLiteral("Usage: pilotbench-cli") + (command.isEmpty() ? QString() : QLatin1Char(' ') + command));
    return text;
}

} // namespace

bool parseArgs(QCommandLineParser &parser, CliContext &ctx, const QString &usage)
{
    parser.setSingleDashWordOptionMode(QCommandLineParser::ParseAsLongOptions);
    // Not addHelpOption(): it also lists --help-all (Qt's own options), which only process() acts
    // on. --help-all is kept as another name of --help, so every command's isSet("help") sees it.
    parser.addOption(QCommandLineOption({QStringLiteral("h"), QStringLiteral("help"), QStringLiteral("help-all")}, QStringLiteral("Display this help.")));
    if (!usage.isEmpty())
        parser.setApplicationDescription(usage);
    // parse() skips the first element as the program name.
    if (!parser.parse(QStringList {QStringLiteral("pilotbench-cli")} + ctx.args)) {
        ctx.err << "error: " << parser.errorText() << '\n';
        return false;
    }
    if (parser.isSet(QStringLiteral("help"))) {
        ctx.out << helpFor(parser, ctx.command);
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

int64_t int64OptionAtLeast(const QCommandLineParser &parser, const QString &name, int64_t minimum, int64_t maximum)
{
    bool ok = false;
    const qlonglong value = parser.value(name).toLongLong(&ok);
    if (!ok || value < minimum || value > maximum)
        throw InvalidInputError("--" + name.toStdString(), "'" + parser.value(name).toStdString() + "' must be an integer >= " + std::to_string(minimum));
    return value;
}

int intOptionAtLeast(const QCommandLineParser &parser, const QString &name, int minimum)
{
    return static_cast<int>(int64OptionAtLeast(parser, name, minimum, std::numeric_limits<int>::max()));
}

int64_t parseByteSize(const QString &text, const QString &option)
{
    // coreutils' reading (df, du, sort -S): a bare or "iB" suffix is binary, "B" alone decimal.
    static const QRegularExpression re(QStringLiteral("^\\s*([0-9]+(?:\\.[0-9]+)?)\\s*(?:([kmgt])(ib|b)?|(b))?\\s*$"),
                                       QRegularExpression::CaseInsensitiveOption);
    const auto match = re.match(text);
    if (!match.hasMatch())
        throw InvalidInputError(option.toStdString(), "'" + text.toStdString() + "' is not a size: a number of bytes, or one with K, M, G, T (or KiB, MiB, GiB, TiB: "
                                                      "powers of 1024) or KB, MB, GB, TB (powers of 1000), e.g. 512M, 2GiB, 1.5GB, 1000000");
    const QString prefix = match.captured(2).toLower();
    const bool decimal = match.captured(3).compare(QLatin1String("b"), Qt::CaseInsensitive) == 0;
    const int power = prefix.isEmpty() ? 0 : static_cast<int>(QStringLiteral("kmgt").indexOf(prefix)) + 1;
    const double value = match.captured(1).toDouble() * std::pow(decimal ? 1000.0 : 1024.0, power);
    if (!std::isfinite(value) || value < 1 || value > 9.0e18)
        throw InvalidInputError(option.toStdString(), "size '" + text.toStdString() + "' must be at least 1 byte and below 8 EiB");
    return static_cast<int64_t>(value);
}

} // namespace pb::cli
