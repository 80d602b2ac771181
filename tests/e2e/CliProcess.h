#pragma once
// Running pilotbench-cli the way a user does, for the end-to-end tests: one place for the process
// handling (timeout, kill, exit status) that every CLI test shares.
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace pbtest {

// Decoded output, for tests that match text. `code` is -1 when the process crashed or timed out.
struct CliResult {
    int code = -1;
    QString out;
    QString err;
};

// Raw output, for tests that parse JSON lines.
struct CliBytes {
    int exitCode = -1;
    QByteArray out, err;
};

// `program` with `args`; `environment` empty: this process's own.
inline CliBytes runProgramBytes(const QString &program, const QStringList &args, int timeoutMs = 300000, const QProcessEnvironment &environment = {})
{
    QProcess p;
    if (!environment.isEmpty())
        p.setProcessEnvironment(environment);
    p.start(program, args);
    CliBytes r;
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
        r.err = "<timed out>";
        return r;
    }
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

inline CliBytes runCliBytes(const QStringList &args, int timeoutMs = 300000, const QProcessEnvironment &environment = {})
{
    return runProgramBytes(QStringLiteral(PB_CLI_PATH), args, timeoutMs, environment);
}

// With --log-level warn, so stderr holds only what the user must see.
inline CliResult runCli(const QStringList &args, int timeoutMs = 120000)
{
    const CliBytes raw = runCliBytes(QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + args, timeoutMs);
    return {raw.exitCode, QString::fromUtf8(raw.out), QString::fromUtf8(raw.err)};
}

// The first JSON line of `jsonl` whose "event" is `name` (a --jsonl command's output); {} when none.
inline QJsonObject eventOf(const QByteArray &jsonl, const QString &name)
{
    for (const QByteArray &line : jsonl.split('\n')) {
        const QJsonObject o = QJsonDocument::fromJson(line).object();
        if (o.value(QStringLiteral("event")).toString() == name)
            return o;
    }
    return {};
}

// A PDF's text as poppler's pdftotext reads it, runs of whitespace as one space; "" when it cannot.
inline QString pdfText(const QString &pdf)
{
    return QString::fromUtf8(runProgramBytes(QStringLiteral("pdftotext"), {pdf, QStringLiteral("-")}, 60000).out).simplified();
}

} // namespace pbtest
