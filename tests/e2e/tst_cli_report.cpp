// `pilotbench-cli report` as a user runs it, without a display: a PDF with numbered pages and the
// run's config hash, and bad input refused with exit 2 naming the option.
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace {

struct Result {
    int code = -1;
    QString out;
    QString err;
};

Result run(const QString &program, const QStringList &args, bool headless = true)
{
    QProcess p;
    if (headless) {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove(QStringLiteral("DISPLAY"));
        env.remove(QStringLiteral("WAYLAND_DISPLAY"));
        env.remove(QStringLiteral("QT_QPA_PLATFORM")); // the CLI must pick offscreen itself
        p.setProcessEnvironment(env);
    }
    p.start(program, args);
    Result r;
    if (!p.waitForFinished(120000)) {
        p.kill();
        p.waitForFinished();
        return r;
    }
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

Result cli(const QStringList &args) { return run(QStringLiteral(PB_CLI_PATH), QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + args); }

} // namespace

class TestCliReport : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    QString db() const { return m_dir.filePath(QStringLiteral("history.sqlite")); }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        const Result r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("5"),
                              QStringLiteral("--warmup"), QStringLiteral("1"), QStringLiteral("--db"), db()});
        QVERIFY2(r.code == 0, qPrintable(r.err));
    }

    void writesPdf()
    {
        const QString pdf = m_dir.filePath(QStringLiteral("run1.pdf"));
        const Result r = cli({QStringLiteral("report"), QStringLiteral("--run"), QStringLiteral("1"), QStringLiteral("--db"), db(), QStringLiteral("--out"), pdf});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY(r.out.contains(QStringLiteral("written to")));
        const Result text = run(QStringLiteral("pdftotext"), {pdf, QStringLiteral("-")}, false);
        QCOMPARE(text.code, 0);
        QVERIFY(text.out.contains(QStringLiteral("page 1 of ")));
        QVERIFY(text.out.contains(QStringLiteral("1. Verdict summary")));
        const Result show = cli({QStringLiteral("history"), QStringLiteral("show"), QStringLiteral("1"), QStringLiteral("--db"), db(), QStringLiteral("--json")});
        const QString hash = QJsonDocument::fromJson(show.out.toUtf8()).object().value(QStringLiteral("config_hash")).toString();
        QCOMPARE(hash.size(), 64);
        QVERIFY(text.out.contains(hash));
    }

    // The definition section describes the model: a hybrid's Gated DeltaNet layers of all its layers
    // (Architecture), its experts (Shape) and its active parameters per token (Parameters). The run
    // is the decision `compare --record` keeps; Qwen3-Next-80B-A3B cut to 8 layers and 16 experts
    // (the full one's comparison at every card count takes minutes).
    void definesAHybridModel()
    {
        const QString database = m_dir.filePath(QStringLiteral("hybrid.sqlite"));
        const Result decided = cli({QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:qwen3-next-80b-a3b"), QStringLiteral("--set"),
                                    QStringLiteral("model.layers=8"), QStringLiteral("--set"), QStringLiteral("model.moe.experts=16"), QStringLiteral("--gpus"),
                                    QStringLiteral("8"), QStringLiteral("--db"), database, QStringLiteral("--record"), QStringLiteral("--json")});
        QVERIFY2(decided.code == 0, qPrintable(decided.err));
        const int runId = QJsonDocument::fromJson(decided.out.toUtf8()).object().value(QStringLiteral("decision_run_id")).toInt();
        QVERIFY(runId > 0);
        const QString pdf = m_dir.filePath(QStringLiteral("hybrid.pdf"));
        const Result r = cli({QStringLiteral("report"), QStringLiteral("--run"), QString::number(runId), QStringLiteral("--db"), database, QStringLiteral("--out"), pdf});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const Result text = run(QStringLiteral("pdftotext"), {pdf, QStringLiteral("-")}, false);
        QCOMPARE(text.code, 0);
        const QString flat = text.out.simplified();
        for (const char *expected : {"6 Gated DeltaNet (linear_attn) layers of 8", "full attention on every 4th layer", "16 experts, 10 per token, and a shared expert",
                                     "1307299968 exact total", "1156305024 exact", "output gated by sigmoid(gate)"})
            QVERIFY2(flat.contains(QLatin1String(expected)), qPrintable(QLatin1String(expected) + QStringLiteral(" missing from: ") + flat.left(3000)));
    }

    void badInput_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("field");
        QTest::newRow("unknown run") << QStringList {QStringLiteral("--run"), QStringLiteral("99"), QStringLiteral("--out"), QStringLiteral("x.pdf")} << QStringLiteral("--run");
        QTest::newRow("run word") << QStringList {QStringLiteral("--run"), QStringLiteral("one"), QStringLiteral("--out"), QStringLiteral("x.pdf")} << QStringLiteral("--run");
        QTest::newRow("no out") << QStringList {QStringLiteral("--run"), QStringLiteral("1")} << QStringLiteral("--out");
    }

    void badInput()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, field);
        const Result r = cli(QStringList {QStringLiteral("report"), QStringLiteral("--db"), db()} + args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(field), qPrintable(r.err));
    }

    void otherCommandsStayHeadless()
    {
        // No display and no platform plugin asked for: a command other than report never needs one.
        const Result r = cli({QStringLiteral("presets"), QStringLiteral("--json")});
        QCOMPARE(r.code, 0);
    }
};

QTEST_GUILESS_MAIN(TestCliReport)
#include "tst_cli_report.moc"
