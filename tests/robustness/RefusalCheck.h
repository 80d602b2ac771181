#pragma once
// The one check every robustness row makes: pilotbench-cli given bad input exits with 2, names the
// field or the file on stderr, and leaves every byte it was given as it was (the input files, the
// history database named by --db and the default one) and writes nothing new.
//
// Each row runs in a sandbox of its own, a fresh folder that is also the row's application data
// and configuration folder, so the default database, the edited catalog and the log are the row's
// too. That keeps rows independent, so they run side by side and a surface of a hundred command
// lines stays well under a minute; the Qt test then reports each row from its recorded outcome.
#include "e2e/CliProcess.h"
#include "robustness/CorpusManifest.h"

#include <QCryptographicHash>
#include <QDir>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>

namespace pbtest {

// Long enough for a slow machine to start LibTorch; a FIFO or /dev/zero that makes the CLI wait
// shows as a hang instead of stopping the suite.
inline constexpr int kRowTimeoutMs = 20000;

// Rlimits are inherited, so this caps every CLI the test starts: reading /dev/zero into memory
// then fails inside the CLI instead of exhausting the machine.
inline void capChildMemory(rlim_t bytes = rlim_t(4) << 30)
{
    rlimit limit {};
    if (::getrlimit(RLIMIT_DATA, &limit) == 0 && (limit.rlim_max == RLIM_INFINITY || limit.rlim_max > bytes)) {
        limit.rlim_cur = bytes;
        ::setrlimit(RLIMIT_DATA, &limit);
    }
}

inline QByteArray sha256Of(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return QByteArrayLiteral("unreadable");
    QCryptographicHash hash(QCryptographicHash::Sha256);
    hash.addData(&file);
    return hash.result().toHex();
}

// Only regular files are read: a FIFO or a device named as input is recorded by its kind.
inline QByteArray fingerprint(const QString &path)
{
    const QFileInfo info(path);
    if (info.isSymLink())
        return QByteArrayLiteral("link to ") + info.symLinkTarget().toUtf8();
    if (info.isDir())
        return QByteArrayLiteral("folder");
    struct stat st {};
    if (::lstat(QFile::encodeName(path).constData(), &st) != 0)
        return QByteArrayLiteral("absent");
    if (!S_ISREG(st.st_mode))
        return QByteArrayLiteral("special file");
    return sha256Of(path);
}

inline bool copyRecursively(const QString &from, const QString &to)
{
    if (!QFileInfo(from).isDir())
        return QFile::copy(from, to);
    if (!QDir().mkpath(to))
        return false;
    const QDir source(from);
    for (const QString &name : source.entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden))
        if (!copyRecursively(source.filePath(name), QDir(to).filePath(name)))
            return false;
    return true;
}

class Sandbox {
public:
    explicit Sandbox(const QString &seedDatabase)
    {
        m_ok = m_dir.isValid() && QDir().mkpath(inputs()) && QDir().mkpath(outputs()) && QDir().mkpath(home() + QStringLiteral("/config"))
            && QDir().mkpath(QFileInfo(defaultDatabase()).absolutePath()) && QFile::copy(seedDatabase, database())
            && QFile::copy(seedDatabase, defaultDatabase());
    }
    bool isValid() const { return m_ok; }
    QString root() const { return m_dir.path(); }
    QString database() const { return root() + QStringLiteral("/db.sqlite"); }
    // Where the CLI looks without --db: XDG_DATA_HOME/pilotbench/history.sqlite.
    QString defaultDatabase() const { return home() + QStringLiteral("/data/pilotbench/history.sqlite"); }
    QString inputs() const { return root() + QStringLiteral("/in"); }
    QString outputs() const { return root() + QStringLiteral("/out"); }
    QString home() const { return root() + QStringLiteral("/home"); }

    QProcessEnvironment environment() const
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("XDG_DATA_HOME"), home() + QStringLiteral("/data"));
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), home() + QStringLiteral("/config"));
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        return env;
    }

    // Fills in the placeholders of `args`:
    //   {db} a copy of the seed database, {defaultdb} the default database (also a copy), {tmp} an
    //   empty folder for outputs, {copy:PATH} a copy of the surface's data file or folder PATH,
    //   {missing} an input that does not exist, {fifo} a FIFO, {folder} a folder where a file is
    //   expected, {big} a 50 MB file (made once per test).
    QStringList expand(const QStringList &args, const QString &surfaceFolder, const QString &bigFile, QString &error) const
    {
        static const QRegularExpression copyPattern(QStringLiteral("\\{copy:([^}]+)\\}"));
        QStringList out;
        for (QString arg : args) {
            for (auto match = copyPattern.match(arg); match.hasMatch(); match = copyPattern.match(arg)) {
                const QString name = match.captured(1);
                const QString target = QDir(inputs()).filePath(QFileInfo(name).fileName());
                if (!QFileInfo::exists(target) && !copyRecursively(QDir(surfaceFolder).filePath(name), target))
                    error += QStringLiteral("no data file %1/%2\n").arg(surfaceFolder, name);
                arg.replace(match.capturedStart(), match.capturedLength(), target);
            }
            if (arg.contains(QLatin1String("{fifo}"))) {
                const QString fifo = QDir(inputs()).filePath(QStringLiteral("fifo.json"));
                if (!QFileInfo::exists(fifo) && ::mkfifo(QFile::encodeName(fifo).constData(), 0600) != 0)
                    error += QStringLiteral("mkfifo %1 failed\n").arg(fifo);
                arg.replace(QLatin1String("{fifo}"), fifo);
            }
            if (arg.contains(QLatin1String("{folder}"))) {
                const QString folder = QDir(inputs()).filePath(QStringLiteral("folder.json"));
                QDir().mkpath(folder);
                arg.replace(QLatin1String("{folder}"), folder);
            }
            arg.replace(QLatin1String("{missing}"), QDir(inputs()).filePath(QStringLiteral("missing.json")));
            arg.replace(QLatin1String("{big}"), bigFile);
            arg.replace(QLatin1String("{defaultdb}"), defaultDatabase());
            arg.replace(QLatin1String("{db}"), database());
            arg.replace(QLatin1String("{tmp}"), outputs());
            if (arg.contains(QLatin1Char('{')) && arg.contains(QLatin1Char('}')))
                error += QStringLiteral("unknown placeholder in '%1'\n").arg(arg);
            out << arg;
        }
        return out;
    }

    // Every file, link and folder below the root, plus `outside` (files the command was given that
    // live elsewhere). The data and configuration folders are the CLI's own to create and log into:
    // only their files count there, logs and SQLite's shared-memory index aside.
    std::map<QString, QByteArray> snapshot(const QStringList &outside) const
    {
        std::map<QString, QByteArray> state;
        QDirIterator it(root(), QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden | QDir::System, QDirIterator::Subdirectories);
        while (it.hasNext()) {
            const QString path = it.next();
            const QString relative = QDir(root()).relativeFilePath(path);
            const QFileInfo info(path);
            const QString name = info.fileName();
            if (relative.startsWith(QLatin1String("home/")) && ((info.isDir() && !info.isSymLink()) || name.contains(QLatin1String(".log"))))
                continue;
            if (name.endsWith(QLatin1String("-shm")))
                continue;
            if ((name.endsWith(QLatin1String("-wal")) || name.endsWith(QLatin1String("-journal"))) && info.size() == 0)
                continue;
            state[relative] = fingerprint(path);
        }
        for (const QString &path : outside)
            state[path] = fingerprint(path);
        return state;
    }

private:
    QTemporaryDir m_dir;
    bool m_ok = false;
};

// Arguments naming existing things outside the sandbox (the big file, /dev/zero): their bytes
// count as the command's input too. A link's outside target counts as well.
inline QStringList outsidePaths(const QStringList &args, const Sandbox &box)
{
    QStringList paths;
    for (const QString &arg : args)
        if (QDir::isAbsolutePath(arg) && !arg.startsWith(box.root()) && QFileInfo::exists(arg))
            paths << arg;
    QDirIterator it(box.inputs(), QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden | QDir::System, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QFileInfo link(it.next());
        if (link.isSymLink() && !link.symLinkTarget().startsWith(box.root()) && QFileInfo(link.symLinkTarget()).isFile())
            paths << link.symLinkTarget();
    }
    return paths;
}

inline QStringList snapshotDifferences(const std::map<QString, QByteArray> &before, const std::map<QString, QByteArray> &after)
{
    QStringList differences;
    for (const auto &[path, print] : before) {
        const auto now = after.find(path);
        if (now == after.end())
            differences << QStringLiteral("removed %1").arg(path);
        else if (now->second != print)
            differences << QStringLiteral("changed %1 (%2 -> %3)").arg(path, QString::fromUtf8(print.left(12)), QString::fromUtf8(now->second.left(12)));
    }
    for (const auto &[path, print] : after)
        if (!before.count(path))
            differences << QStringLiteral("created %1").arg(path);
    return differences;
}

// How a row's input becomes the path that stands for {input}: the default copies the surface's data
// file into the sandbox (placeholders and absolute paths stay as written); the checkpoint surface
// damages a fresh checkpoint instead. Returns the path or sets `error`.
using InputMaker = std::function<QString(const Sandbox &, const CorpusRow &, QString &error)>;

inline QString defaultInput(const Sandbox &, const CorpusRow &row, QString &)
{
    if (row.input.startsWith(QLatin1Char('{')) || QDir::isAbsolutePath(row.input))
        return row.input;
    return QStringLiteral("{copy:%1}").arg(row.input);
}

struct RowSetup {
    QString surfaceFolder;
    QString seedDatabase;
    QString bigFile;
    InputMaker makeInput = defaultInput;
};

// Runs one row and lists what is wrong with its outcome (empty: the refusal the issue asks for).
inline QStringList checkRefusal(const CorpusRow &row, const RowSetup &setup)
{
    const Sandbox box(setup.seedDatabase);
    if (!box.isValid())
        return {QStringLiteral("setup: cannot make the sandbox")};
    QString error;
    const QString input = row.input.isEmpty() ? QString() : setup.makeInput(box, row, error);
    QStringList args;
    for (const QString &arg : row.args) // {input} first: it may itself be a placeholder
        args << QString(arg).replace(QLatin1String("{input}"), input);
    args = box.expand(args, setup.surfaceFolder, setup.bigFile, error);
    if (!error.isEmpty())
        return {QStringLiteral("setup: ") + error.trimmed()};

    const QStringList outside = outsidePaths(args, box);
    const auto before = box.snapshot(outside);
    QElapsedTimer timer;
    timer.start();
    const CliBytes result = runCliBytes(QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + args, kRowTimeoutMs, box.environment());
    const QString err = QString::fromUtf8(result.err);

    QStringList problems;
    if (result.exitCode == -1 && err == QLatin1String("<timed out>"))
        problems << QStringLiteral("hung: killed after %1 s").arg(timer.elapsed() / 1000.0, 0, 'f', 1);
    else if (result.exitCode == -1)
        problems << QStringLiteral("crashed");
    else if (result.exitCode != 2)
        problems << QStringLiteral("exit %1, expected 2").arg(result.exitCode);
    if (std::none_of(row.expected.begin(), row.expected.end(), [&](const QString &text) { return err.contains(text); }))
        problems << QStringLiteral("stderr names none of: ") + row.expected.join(QStringLiteral(" | "));
    QStringList changes = snapshotDifferences(before, box.snapshot(outside));
    if (row.recordsFailedRun) {
        const QString db = QStringLiteral("changed ") + QDir(box.root()).relativeFilePath(box.database());
        changes.erase(std::remove_if(changes.begin(), changes.end(), [&](const QString &c) { return c.startsWith(db + QLatin1Char(' ')); }), changes.end());
        const CliBytes history = runCliBytes({QStringLiteral("history"), QStringLiteral("--json"), QStringLiteral("--db"), box.database()}, kRowTimeoutMs, box.environment());
        const QJsonArray runs = QJsonDocument::fromJson(history.out).object().value(QStringLiteral("runs")).toArray();
        const QJsonObject newest = runs.isEmpty() ? QJsonObject() : runs.first().toObject();
        if (runs.size() != 2 || newest.value(QStringLiteral("status")).toString() != QLatin1String("done")
            || newest.value(QStringLiteral("verdict")).toString() != QLatin1String("failed"))
            problems << QStringLiteral("the database should hold the seed run and one failed run: ") + QString::fromUtf8(history.out.left(300));
    }
    problems << changes;
    if (!problems.isEmpty()) {
        QString shown = err.trimmed().left(400);
        shown.replace(box.root(), QStringLiteral("$SANDBOX"));
        problems << QStringLiteral("stderr: ") + (shown.isEmpty() ? QStringLiteral("(empty)") : shown);
    }
    return problems;
}

// A surface's rows: made and run side by side in initTestCase, reported one Qt test row each.
class RefusalSuite {
public:
    // Records one pilot of preset:tiny into the seed database every row starts from (unless a
    // test gives its own), loads the rows and makes the 50 MB input when a row names it.
    bool start(const QString &surface, QString &error, const QString &seedDatabase = QString())
    {
        capChildMemory();
        m_setup.surfaceFolder = corpusFolder(surface);
        m_rows = loadCorpus(surface, error);
        for (const CorpusRow &row : m_rows) {
            if (std::count_if(m_rows.begin(), m_rows.end(), [&](const CorpusRow &r) { return r.name == row.name; }) > 1)
                error += QStringLiteral("row '%1' appears twice\n").arg(row.name);
        }
        m_setup.seedDatabase = seedDatabase.isEmpty() ? work(QStringLiteral("seed.sqlite")) : seedDatabase;
        if (seedDatabase.isEmpty()) {
            const CliBytes seed = runHere(QStringList {QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"),
                                                      QStringLiteral("1"), QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--db"), m_setup.seedDatabase});
            if (seed.exitCode != 0)
                error += QStringLiteral("the seed pilot failed: ") + QString::fromUtf8(seed.err);
        }
        const bool wantsBig = std::any_of(m_rows.begin(), m_rows.end(), [](const CorpusRow &r) {
            return r.input.contains(QLatin1String("{big}")) || r.args.join(QLatin1Char(' ')).contains(QLatin1String("{big}"));
        });
        m_setup.bigFile = work(QStringLiteral("big.json"));
        if (wantsBig && !writeBigFile(m_setup.bigFile))
            error += QStringLiteral("cannot write ") + m_setup.bigFile;
        return error.isEmpty();
    }

    void setInputMaker(InputMaker maker) { m_setup.makeInput = std::move(maker); }
    const RowSetup &setup() const { return m_setup; }
    // A file in this test's own working folder (seed database, big file, reference checkpoints).
    QString work(const QString &name) const { return QDir(m_work.path()).filePath(name); }

    // Runs in this process's environment but with this test's own data and configuration folders.
    CliBytes runHere(const QStringList &args, int timeoutMs = 120000) const
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("XDG_DATA_HOME"), work(QStringLiteral("home/data")));
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), work(QStringLiteral("home/config")));
        return runCliBytes(QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + args, timeoutMs, env);
    }

    void runAll()
    {
        std::vector<QStringList> problems(m_rows.size());
        std::atomic<size_t> next {0};
        const int workers = std::clamp(QThread::idealThreadCount() / 2, 2, 8);
        std::vector<std::unique_ptr<QThread>> threads;
        for (int i = 0; i < workers; ++i) {
            threads.emplace_back(QThread::create([&] {
                for (size_t k = next++; k < m_rows.size(); k = next++)
                    problems[k] = checkRefusal(m_rows[k], m_setup);
            }));
            threads.back()->start();
        }
        for (auto &t : threads)
            t->wait();
        for (size_t k = 0; k < m_rows.size(); ++k)
            m_outcomes[m_rows[k].name] = problems[k];
    }

    void addRows() const
    {
        QTest::addColumn<QString>("row");
        for (const CorpusRow &row : m_rows)
            QTest::newRow(qPrintable(row.name)) << row.name;
    }

    void verifyRow() const
    {
        QFETCH(QString, row);
        const auto outcome = m_outcomes.find(row);
        QVERIFY2(outcome != m_outcomes.end(), "not run (initTestCase failed?)");
        QVERIFY2(outcome->second.isEmpty(), qPrintable(outcome->second.join(QStringLiteral("\n    "))));
    }

private:
    // Valid JSON in shape, far beyond any limit an input of ours should have.
    static bool writeBigFile(const QString &path)
    {
        QFile f(path);
        if (!f.open(QIODevice::WriteOnly))
            return false;
        const QByteArray block(1 << 20, 'a');
        bool ok = f.write("{\"name\": \"") > 0;
        for (int i = 0; i < 50 && ok; ++i)
            ok = f.write(block) == block.size();
        return ok && f.write("\"}\n") > 0;
    }

    QTemporaryDir m_work;
    RowSetup m_setup;
    std::vector<CorpusRow> m_rows;
    std::map<QString, QStringList> m_outcomes;
};

} // namespace pbtest
