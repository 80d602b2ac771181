// pilotbench-cli export: a run's checkpoint, report and history copied off the machine and verified.
#include "e2e/CliProcess.h"
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace {

using Result = pbtest::CliBytes;

Result cli(const QStringList &args) { return pbtest::runCliBytes(args); }

} // namespace

class TestCliExport : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private Q_SLOTS:
    void exportsVerifiedArtifacts()
    {
        const QString db = m_dir.filePath(QStringLiteral("h.db"));
        auto r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("2"),
                      QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--checkpoint-dir"), m_dir.filePath(QStringLiteral("ck")),
                      QStringLiteral("--checkpoint-at-end"), QStringLiteral("--db"), db});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QString dest = m_dir.filePath(QStringLiteral("backup"));
        r = cli({QStringLiteral("export"), QStringLiteral("--run"), QStringLiteral("1"), QStringLiteral("--to"), dest, QStringLiteral("--db"), db,
                 QStringLiteral("--command"), QStringLiteral("touch {dir}/uploaded"), QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject json = QJsonDocument::fromJson(r.out).object();
        const QString folder = json.value(QStringLiteral("folder")).toString();
        QCOMPARE(folder, dest + QStringLiteral("/pilotbench-run-1"));
        const QJsonArray checkpoints = json.value(QStringLiteral("checkpoints")).toArray();
        QCOMPARE(checkpoints.size(), 1);
        QCOMPARE(checkpoints[0].toObject().value(QStringLiteral("status")).toString(), QStringLiteral("verified"));
        for (const char *file : {"history.json", "samples.csv", "report.pdf", "uploaded", "checkpoints/step-00000002/manifest.json"})
            QVERIFY2(QFileInfo::exists(folder + QLatin1Char('/') + QLatin1String(file)), file);
        QVERIFY(json.value(QStringLiteral("copy_ms")).toDouble() > 0);
        // The copy itself verifies against its manifest.
        r = cli({QStringLiteral("checkpoint"), QStringLiteral("verify"), folder + QStringLiteral("/checkpoints/step-00000002")});
        QCOMPARE(r.exitCode, 0);
        // And the run remembers where its artifacts went.
        r = cli({QStringLiteral("history"), QStringLiteral("show"), QStringLiteral("1"), QStringLiteral("--db"), db, QStringLiteral("--json")});
        QVERIFY2(r.out.contains("exported to"), r.out.constData());
    }

    // A destination whose name holds shell syntax is a name, never a command.
    void destinationNamesRunNothing_data()
    {
        QTest::addColumn<QString>("name");
        QTest::newRow("command substitution") << QStringLiteral("a$(touch INJECTED)b");
        QTest::newRow("backquotes") << QStringLiteral("a`touch INJECTED`b");
        QTest::newRow("separator and comment") << QStringLiteral("a;touch INJECTED;#b");
        QTest::newRow("quotes and spaces") << QStringLiteral("it's a \"dir\" $HOME");
    }
    void destinationNamesRunNothing()
    {
        QFETCH(QString, name);
        const QString db = m_dir.filePath(QStringLiteral("h.db"));
        QTemporaryDir work;
        const QString dest = work.filePath(name);
        const auto r = cli({QStringLiteral("export"), QStringLiteral("--run"), QStringLiteral("1"), QStringLiteral("--to"), dest, QStringLiteral("--db"), db,
                            QStringLiteral("--command"), QStringLiteral("cd ") + work.path() + QStringLiteral(" && touch {dir}/uploaded")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY(QFileInfo::exists(dest + QStringLiteral("/pilotbench-run-1/uploaded")));
        QVERIFY(!QFileInfo::exists(work.filePath(QStringLiteral("INJECTED"))));
        QVERIFY(!QFileInfo::exists(QStringLiteral("INJECTED")));
    }

    void badInputExitsTwo()
    {
        const QString db = m_dir.filePath(QStringLiteral("h.db"));
        QCOMPARE(cli({QStringLiteral("export"), QStringLiteral("--run"), QStringLiteral("42"), QStringLiteral("--to"), m_dir.path(), QStringLiteral("--db"), db}).exitCode, 2);
        QCOMPARE(cli({QStringLiteral("export"), QStringLiteral("--run"), QStringLiteral("1"), QStringLiteral("--db"), db}).exitCode, 2);
        const auto failed = cli({QStringLiteral("export"), QStringLiteral("--run"), QStringLiteral("1"), QStringLiteral("--to"), m_dir.filePath(QStringLiteral("b2")),
                                 QStringLiteral("--db"), db, QStringLiteral("--command"), QStringLiteral("exit 7")});
        QCOMPARE(failed.exitCode, 1);
        QVERIFY(failed.err.contains("export command failed (exit 7)"));
    }
};

QTEST_GUILESS_MAIN(TestCliExport)
#include "tst_cli_export.moc"
