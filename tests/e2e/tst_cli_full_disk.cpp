// A disk that fills while the CLI writes, as a user meets it on a rented machine's small root disk:
// the write fails with a message and a non-zero exit, the file that was there before is unchanged,
// no run stays "running", and a healthy history database is never called corrupt. The full disk is
// RLIMIT_FSIZE (`ulimit -f`, SIGXFSZ ignored): every write past the limit fails with EFBIG, exactly
// where ENOSPC would, without needing a small file system mounted as root.
#include "e2e/CliProcess.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

namespace {

// Runs the CLI with files limited to `kib` KiB.
pbtest::CliResult runLimited(int kib, const QStringList &args)
{
    // The shell execs the CLI, so a crash (abort on an uncaught exception) still shows as -1.
    const pbtest::CliBytes raw = pbtest::runProgramBytes(
        QStringLiteral("/bin/sh"), QStringList {QStringLiteral("-c"), QStringLiteral("trap '' XFSZ; ulimit -f %1; exec \"$0\" \"$@\"").arg(kib),
                                                QStringLiteral(PB_CLI_PATH), QStringLiteral("--log-level"), QStringLiteral("warn")} + args);
    return {raw.exitCode, QString::fromUtf8(raw.out), QString::fromUtf8(raw.err)};
}

QByteArray digest(const QString &path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256);
}

QJsonArray runs(const QString &db)
{
    const auto r = pbtest::runCli({QStringLiteral("history"), QStringLiteral("--json"), QStringLiteral("--db"), db});
    return QJsonDocument::fromJson(r.out.toUtf8()).object().value(QStringLiteral("runs")).toArray();
}

} // namespace

class TestCliFullDisk : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void outputsKeepThePreviousFile_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::newRow("config new") << QStringList {QStringLiteral("config"), QStringLiteral("new"), QStringLiteral("--preset"), QStringLiteral("tiny"), QStringLiteral("--out")};
        QTest::newRow("config import-hf") << QStringList {QStringLiteral("config"), QStringLiteral("import-hf"), QStringLiteral(PB_SOURCE_DIR "/tests/data/hf/llama-3.1-8b/config.json"),
                                                         QStringLiteral("--out")};
    }

    void outputsKeepThePreviousFile()
    {
        QFETCH(QStringList, args);
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("previous.json"));
        {
            QFile f(out);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("{\"kept\": true}\n");
        }
        const QByteArray before = digest(out);
        const auto r = runLimited(0, args << out);
        QVERIFY2(r.code == 1, qPrintable(QStringLiteral("exit %1: %2").arg(r.code).arg(r.err)));
        QVERIFY2(r.err.contains(out), qPrintable(r.err));
        QCOMPARE(digest(out), before);
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files), QStringList {QStringLiteral("previous.json")}); // no temporary left behind
    }

    // The checkpoint writer used to throw from a destructor and abort (exit 134) with the run left
    // "running"; now the write fails like any other and the run ends failed.
    void checkpointOnAFullDisk()
    {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("history.sqlite"));
        const QString ckpt = dir.filePath(QStringLiteral("ckpt"));
        const QStringList pilot {QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--set"), QStringLiteral("model.layers=24"),
                                 QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--checkpoint-dir"), ckpt, QStringLiteral("--checkpoint-at-end"),
                                 QStringLiteral("--db"), db};
        // Sizes first, without a limit: the limit must let the history grow and stop model.safetensors.
        QCOMPARE(pbtest::runCli(pilot).code, 0);
        const qint64 model = QFileInfo(QDir(ckpt).filePath(QStringLiteral("step-00000002/model.safetensors"))).size();
        const qint64 history = QFileInfo(db).size() + QFileInfo(db + QStringLiteral("-wal")).size();
        const int limitKib = static_cast<int>(std::max<qint64>(2 * history, 256 * 1024) / 1024);
        QVERIFY2(limitKib * 1024 < model / 2, qPrintable(QStringLiteral("model.safetensors %1 B is too small to test against a %2 KiB limit").arg(model).arg(limitKib)));
        const QByteArray kept = digest(QDir(ckpt).filePath(QStringLiteral("step-00000002/manifest.json")));

        const QString ckpt2 = dir.filePath(QStringLiteral("ckpt2"));
        QStringList second = pilot;
        second[second.indexOf(ckpt)] = ckpt2;
        const auto r = runLimited(limitKib, second);
        QVERIFY2(r.code == 1, qPrintable(QStringLiteral("exit %1: %2").arg(r.code).arg(r.err)));
        QVERIFY2(r.err.contains(QLatin1String("cannot be written")), qPrintable(r.err));
        QVERIFY(!QFile::exists(QDir(ckpt2).filePath(QStringLiteral("step-00000002/manifest.json")))); // never taken for complete
        QCOMPARE(digest(QDir(ckpt).filePath(QStringLiteral("step-00000002/manifest.json"))), kept);
        const QJsonArray recorded = runs(db);
        QCOMPARE(recorded.size(), 2);
        for (const QJsonValue &run : recorded)
            QVERIFY2(run.toObject().value(QStringLiteral("status")).toString() != QLatin1String("running"), "a run stayed running");
        QCOMPARE(recorded.at(0).toObject().value(QStringLiteral("verdict")).toString(), QStringLiteral("failed"));
    }

    // A history database that cannot be opened for writing here is not a damaged one: the message
    // must not invite the user to move good data aside, and the file stays as it was.
    void healthyHistoryIsNeverCalledCorrupt()
    {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("history.sqlite"));
        QCOMPARE(pbtest::runCli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                                 QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--db"), db}).code, 0);
        QVERIFY(!QFile::exists(db + QStringLiteral("-shm"))); // closed cleanly: the next open must create it
        const QByteArray before = digest(db);
        const auto r = runLimited(0, {QStringLiteral("history"), QStringLiteral("--db"), db});
        QVERIFY2(!r.err.contains(QLatin1String("corrupt")), qPrintable(r.err));
        QVERIFY2(r.code == 0 || r.code == 1, qPrintable(QStringLiteral("exit %1: %2").arg(r.code).arg(r.err)));
        QCOMPARE(digest(db), before);
    }
};

QTEST_GUILESS_MAIN(TestCliFullDisk)
#include "tst_cli_full_disk.moc"
