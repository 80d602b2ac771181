// Inputs and limits a user (or a job) can push past: durations that would overflow, a MoE section
// with nothing in it, Hugging Face files that are FIFOs or links to /dev/zero, and a SIGTERM that
// arrives while a pilot is still starting. Each is refused by name or ends as cancelled, within a
// time bound, never a hang or a raw error.
#include "CliProcess.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include <csignal>
#include <sys/stat.h>

namespace {

// Whether `pid` catches SIGTERM (its SigCgt mask in /proc/PID/status).
bool catchesSigterm(qint64 pid)
{
    QFile status(QStringLiteral("/proc/%1/status").arg(pid));
    if (!status.open(QIODevice::ReadOnly))
        return false;
    for (const QByteArray &line : status.readAll().split('\n'))
        if (line.startsWith("SigCgt:"))
            return (line.mid(7).trimmed().toULongLong(nullptr, 16) >> (SIGTERM - 1)) & 1;
    return false;
}

} // namespace

class TestCliLimits : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;

private Q_SLOTS:
    void durationsAreBounded_data()
    {
        QTest::addColumn<QString>("option");
        QTest::addColumn<QString>("value");
        for (const char *v : {"3000000", "inf", "1e12", "nan", "-1", "0"})
            QTest::newRow(qPrintable(QStringLiteral("grace %1").arg(QLatin1String(v)))) << QStringLiteral("--grace") << QString::fromLatin1(v);
        QTest::newRow("max-seconds inf") << QStringLiteral("--max-seconds") << QStringLiteral("inf");
        QTest::newRow("max-seconds 1e300") << QStringLiteral("--max-seconds") << QStringLiteral("1e300");
    }

    void durationsAreBounded()
    {
        QFETCH(QString, option);
        QFETCH(QString, value);
        QElapsedTimer t;
        t.start();
        const pbtest::CliResult r = pbtest::runCli({QStringLiteral("watch"), QStringLiteral("--no-devices"), QStringLiteral("--db"), m_dir.filePath(QStringLiteral("d.sqlite")),
                                                    option, value, QStringLiteral("--"), QStringLiteral("/bin/sh"), QStringLiteral("-c"), QStringLiteral("sleep 5")},
                                                   30000);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(option), qPrintable(r.err));
        QVERIFY(t.elapsed() < 4000); // refused before the command ran
        QVERIFY(!QFile::exists(m_dir.filePath(QStringLiteral("d.sqlite"))));
    }

    void emptyMoeSectionsAreRefused_data()
    {
        QTest::addColumn<QStringList>("sets");
        QTest::addColumn<QString>("config");
        QTest::newRow("moe {} in the file") << QStringList() << QStringLiteral("{}");
        QTest::newRow("experts 0 in the file") << QStringList() << QStringLiteral("{\"experts\": 0, \"experts_per_token\": 0}");
        QTest::newRow("--set experts=0 on a mixture") << QStringList {QStringLiteral("model.moe.experts=0")} << QString();
    }

    void emptyMoeSectionsAreRefused()
    {
        QFETCH(QStringList, sets);
        QFETCH(QString, config);
        QString configArg = QStringLiteral("preset:tiny-moe");
        if (!config.isEmpty()) {
            const pbtest::CliBytes made = pbtest::runCliBytes({QStringLiteral("config"), QStringLiteral("new"), QStringLiteral("--preset"), QStringLiteral("tiny")});
            QCOMPARE(made.exitCode, 0);
            QJsonObject json = QJsonDocument::fromJson(made.out).object();
            QJsonObject model = json.value(QStringLiteral("model")).toObject();
            model.insert(QStringLiteral("moe"), QJsonDocument::fromJson(config.toUtf8()).object());
            json.insert(QStringLiteral("model"), model);
            configArg = m_dir.filePath(QStringLiteral("moe-%1.json").arg(QString::number(qHash(config))));
            QFile f(configArg);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QJsonDocument(json).toJson());
        }
        QStringList args {QStringLiteral("estimate"), QStringLiteral("--config"), configArg};
        for (const QString &s : sets)
            args << QStringLiteral("--set") << s;
        const pbtest::CliResult r = pbtest::runCli(args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QStringLiteral("model.moe.experts")), qPrintable(r.err));
    }

    // A Hugging Face folder whose `revision` file, or a hub cache whose ref, is a FIFO or a link to
    // /dev/zero: refused by name at once.
    void hubFilesGoThroughTheFileRule_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::newRow("revision fifo") << QStringLiteral("revision-fifo");
        QTest::newRow("revision /dev/zero") << QStringLiteral("revision-zero");
        QTest::newRow("ref fifo") << QStringLiteral("ref-fifo");
        QTest::newRow("ref /dev/zero") << QStringLiteral("ref-zero");
    }

    void hubFilesGoThroughTheFileRule()
    {
        QFETCH(QString, kind);
        const QString root = m_dir.filePath(kind);
        QString folder = root;
        QString special;
        QStringList args {QStringLiteral("config"), QStringLiteral("import-hf")};
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        if (kind.startsWith(QLatin1String("revision"))) {
            QVERIFY(QDir().mkpath(folder));
            special = QDir(folder).filePath(QStringLiteral("revision"));
            args << folder;
        } else {
            const QString repo = QDir(root).filePath(QStringLiteral("hub/models--acme--tiny"));
            QVERIFY(QDir().mkpath(repo + QStringLiteral("/refs")));
            folder = repo + QStringLiteral("/snapshots/0123456789abcdef0123456789abcdef01234567");
            QVERIFY(QDir().mkpath(folder));
            special = repo + QStringLiteral("/refs/main");
            env.insert(QStringLiteral("HF_HUB_CACHE"), QDir(root).filePath(QStringLiteral("hub")));
            args << QStringLiteral("acme/tiny");
        }
        QFile::copy(QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/qwen2.5-7b/config.json"), QDir(folder).filePath(QStringLiteral("config.json")));
        QVERIFY(QFile::exists(QDir(folder).filePath(QStringLiteral("config.json"))));
        if (kind.endsWith(QLatin1String("fifo")))
            QCOMPARE(::mkfifo(QFile::encodeName(special).constData(), 0600), 0);
        else
            QVERIFY(QFile::link(QStringLiteral("/dev/zero"), special));
        QElapsedTimer t;
        t.start();
        const pbtest::CliBytes r = pbtest::runCliBytes(args, 20000, env);
        QVERIFY2(r.exitCode == 2, r.err.constData());
        QVERIFY2(r.err.contains(QFile::encodeName(special)), r.err.constData());
        QVERIFY(t.elapsed() < 15000);
    }

    // "CUDA out of memory" inside a 10 MB line, wherever it falls (the middle, across the 1 MiB
    // cut): does not fit (3), not failed.
    void outOfMemoryInALongLine_data()
    {
        QTest::addColumn<int>("at");
        QTest::newRow("middle of 10 MB") << 5000000;
        QTest::newRow("across the 1 MiB cut") << (1 << 20) - 20;
        QTest::newRow("across the second cut") << 2 * (1 << 20) - 512 - 30;
        QTest::newRow("just past the first cut") << (1 << 20) + 10000;
    }

    void outOfMemoryInALongLine()
    {
        QFETCH(int, at);
        const QString script = QStringLiteral("import sys\nsys.stdout.write('x' * %1 + 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' + 'y' * (10000000 - %1) + '\\n')\nsys.exit(1)\n").arg(at);
        const pbtest::CliResult r = pbtest::runCli({QStringLiteral("watch"), QStringLiteral("--no-devices"), QStringLiteral("--db"), m_dir.filePath(QStringLiteral("oom.sqlite")),
                                                    QStringLiteral("--"), QStringLiteral("/usr/bin/python3"), QStringLiteral("-c"), script},
                                                   60000);
        QVERIFY2(r.code == 3, qPrintable(QStringLiteral("exit %1: %2").arg(r.code).arg(r.err.right(300))));
        // What is said and kept is the message, not the megabyte around it.
        const qsizetype notice = r.err.indexOf(QStringLiteral("out of memory reported"));
        QVERIFY(notice >= 0);
        const QString line = r.err.mid(notice, r.err.indexOf(QLatin1Char('\n'), notice) - notice);
        QVERIFY2(line.contains(QStringLiteral("CUDA out of memory. Tried to allocate 2.00 GiB")) && line.size() < 500, qPrintable(line.left(600)));
    }

    // The handler is in before anything else: a SIGTERM the moment the pilot catches it ends the
    // pilot as cancelled (exit 4), not killed (143), and leaves no run marked running.
    void sigtermWhileStartingIsCancelled()
    {
        const QString db = m_dir.filePath(QStringLiteral("early.sqlite"));
        QProcess pilot;
        pilot.start(QStringLiteral(PB_CLI_PATH), {QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("pilot"), QStringLiteral("--config"),
                                                  QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("200"), QStringLiteral("--db"), db});
        QVERIFY(pilot.waitForStarted());
        QTRY_VERIFY_WITH_TIMEOUT(catchesSigterm(pilot.processId()), 20000);
        ::kill(static_cast<pid_t>(pilot.processId()), SIGTERM);
        QVERIFY(pilot.waitForFinished(60000));
        QCOMPARE(pilot.exitStatus(), QProcess::NormalExit);
        QCOMPARE(pilot.exitCode(), 4);
        if (QFile::exists(db)) {
            const pbtest::CliBytes h = pbtest::runCliBytes({QStringLiteral("history"), QStringLiteral("--db"), db, QStringLiteral("--json")});
            for (const QJsonValue &run : QJsonDocument::fromJson(h.out).object().value(QStringLiteral("runs")).toArray())
                QVERIFY(run.toObject().value(QStringLiteral("status")).toString() != QLatin1String("running"));
        }
    }
};

QTEST_GUILESS_MAIN(TestCliLimits)
#include "tst_cli_limits.moc"
