#pragma once
// The robustness corpus's manifests: tab-separated lines in tests/robustness/data/<surface>/, so
// that adding a case is adding a file and a line. Blank lines and lines starting with # are skipped.
//
//   inputs.tsv       CASE <tab> INPUT <tab> EXPECTED [<tab> COMMANDS [<tab> records-failed-run]]
//   commands.tsv     NAME <tab> ARGS
//   invocations.tsv  CASE <tab> ARGS <tab> EXPECTED
//
// Each input goes through every command of commands.tsv (or only those named in COMMANDS, comma
// separated), standing in its ARGS as {input}; an invocation is one command line of its own. ARGS
// are split at spaces and may hold the placeholders RefusalCheck.h fills in. EXPECTED is the text
// stderr must hold to name the field or the file; alternatives are separated by " | ".
// records-failed-run: a defect only the tensor loader can see (a checkpoint archive of another shape,
// or not an archive at all) is found after the run began, so the database may gain exactly one run,
// finished with the verdict failed; nothing else may change.
#include <QFile>
#include <QString>
#include <QStringList>

#include <vector>

namespace pbtest {

struct CorpusRow {
    QString name;          // "CASE [COMMAND]" for an input, CASE for an invocation
    QString input;         // INPUT as written; empty for an invocation
    QStringList args;      // with placeholders
    QStringList expected;  // any one of them
    bool recordsFailedRun = false;
};

inline QString corpusFolder(const QString &surface) { return QStringLiteral(PB_SOURCE_DIR "/tests/robustness/data/") + surface; }

// The lines of a manifest split at tabs; `error` names a line with fewer than `minimumColumns`.
inline std::vector<QStringList> manifestLines(const QString &path, int minimumColumns, QString &error)
{
    std::vector<QStringList> lines;
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return lines;
    int number = 0;
    while (!file.atEnd()) {
        ++number;
        const QString line = QString::fromUtf8(file.readLine()).remove(QLatin1Char('\n')).remove(QLatin1Char('\r'));
        if (line.trimmed().isEmpty() || line.startsWith(QLatin1Char('#')))
            continue;
        QStringList columns = line.split(QLatin1Char('\t'), Qt::SkipEmptyParts);
        for (QString &c : columns)
            c = c.trimmed();
        if (columns.size() < minimumColumns) {
            error += QStringLiteral("%1:%2: expected %3 tab-separated columns\n").arg(path).arg(number).arg(minimumColumns);
            continue;
        }
        lines.push_back(columns);
    }
    return lines;
}

inline QStringList splitArgs(const QString &args) { return args.split(QLatin1Char(' '), Qt::SkipEmptyParts); }

inline QStringList splitExpected(const QString &expected)
{
    QStringList alternatives = expected.split(QStringLiteral(" | "), Qt::SkipEmptyParts);
    for (QString &a : alternatives)
        a = a.trimmed();
    return alternatives;
}

// Every row of a surface: its inputs crossed with its commands, then its invocations.
inline std::vector<CorpusRow> loadCorpus(const QString &surface, QString &error)
{
    const QString folder = corpusFolder(surface);
    std::vector<CorpusRow> rows;
    const auto commands = manifestLines(folder + QStringLiteral("/commands.tsv"), 2, error);
    for (const QStringList &input : manifestLines(folder + QStringLiteral("/inputs.tsv"), 3, error)) {
        const QStringList only = input.size() > 3 ? input[3].split(QLatin1Char(','), Qt::SkipEmptyParts) : QStringList();
        for (const QStringList &command : commands) {
            if (!only.isEmpty() && !only.contains(command[0]))
                continue;
            rows.push_back({input[0] + QStringLiteral(" [") + command[0] + QLatin1Char(']'), input[1], splitArgs(command[1]), splitExpected(input[2]),
                            input.size() > 4 && input[4] == QLatin1String("records-failed-run")});
        }
    }
    for (const QStringList &invocation : manifestLines(folder + QStringLiteral("/invocations.tsv"), 3, error))
        rows.push_back({invocation[0], QString(), splitArgs(invocation[1]), splitExpected(invocation[2])});
    if (rows.empty())
        error += folder + QStringLiteral(": no rows (inputs.tsv with commands.tsv, or invocations.tsv)\n");
    return rows;
}

} // namespace pbtest
