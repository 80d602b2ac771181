// The PDF report of a real tiny CPU pilot: every section is there, the figures are the database's,
// pages are numbered "N of M", user text comes out as typed (no markup interpreted, nothing lost).
#include "config/Presets.h"
#include "engine/PilotEngine.h"
#include "workflow/PilotRecorder.h"
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "report/ReportSections.h"
#include "report/ReportWriter.h"
#include "util/Errors.h"
#include "util/Units.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>

namespace {

// Runs a tiny pilot on the CPU into `db` and returns its run id.
int64_t runTinyPilot(const QString &db, const std::string &name)
{
    pb::RunConfig config = pb::presetConfig(QStringLiteral("tiny"));
    config.name = name;
    pb::PilotOptions options;
    options.device = "cpu";
    options.steps = 5;
    options.warmupSteps = 1;
    std::atomic<bool> stop {false};
    pb::HistoryWriter writer(db);
    pb::PilotRecorder recorder(writer, nullptr, &stop);
    const int64_t id = recorder.begin(config, options);
    pb::PilotEngine engine;
    pb::PilotRun run = engine.run(config, options, &recorder);
    recorder.finish(run);
    return id;
}

QString pdfText(const QString &pdf)
{
    QProcess p;
    p.start(QStringLiteral("pdftotext"), {QStringLiteral("-layout"), pdf, QStringLiteral("-")});
    if (!p.waitForFinished(60000))
        return {};
    return QString::fromUtf8(p.readAllStandardOutput());
}

} // namespace

class TestReport : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    QString m_db;
    int64_t m_runId = 0;
    const std::string m_name = "tiny <b>bold?</b> & \"quoted\" "
                               "averyveryverylongunbrokenrunnamethatcannotwrapatawordboundaryanywhereatallxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        m_db = m_dir.filePath(QStringLiteral("history.sqlite"));
        m_runId = runTinyPilot(m_db, m_name);
        QVERIFY(m_runId > 0);
    }

    void reportOfTinyPilot()
    {
        const QString pdf = m_dir.filePath(QStringLiteral("report.pdf"));
        const int pages = pb::report::writeRunReport(m_db, m_runId, pdf, pb::builtInCatalog());
        QVERIFY(pages >= 2);
        QFile file(pdf);
        QVERIFY(file.open(QIODevice::ReadOnly));
        QCOMPARE(file.read(5), QByteArray("%PDF-"));
        file.close();

        const QString text = pdfText(pdf);
        QVERIFY2(!text.isEmpty(), "pdftotext produced no text (is poppler-utils installed?)");
        // Every section, in order.
        qsizetype at = 0;
        const QStringList titles = pb::report::reportSectionTitles();
        QCOMPARE(titles.size(), 11);
        for (int i = 0; i < titles.size(); ++i) {
            const QString heading = QStringLiteral("%1. %2").arg(i + 1).arg(titles[i]);
            const qsizetype found = text.indexOf(heading, at);
            QVERIFY2(found >= 0, qPrintable(QStringLiteral("section missing or out of order: ") + heading));
            at = found;
        }

        const pb::HistoryStore store(m_db);
        const pb::RunRecord run = store.run(m_runId);
        const QJsonObject s = run.summary;
        QCOMPARE(run.verdict, QStringLiteral("fits"));
        QVERIFY(text.contains(QStringLiteral("Verdict: FITS")));
        QVERIFY(text.contains(QString::fromStdString(run.configHash))); // whole, on one line
        QCOMPARE(s.value(QStringLiteral("measured_steps")).toInt(), 5);
        QVERIFY(text.contains(QRegularExpression(QStringLiteral("Measured steps\\s+5\\n"))));
        const double peak = s.value(QStringLiteral("peak_allocated_bytes")).toDouble();
        QVERIFY2(peak > 1024 * 1024 && peak < 1024.0 * 1024 * 1024, "the tiny pilot's peak should be in the MiB range");
        QVERIFY(text.contains(QRegularExpression(QStringLiteral("Peak allocated\\s+") + QRegularExpression::escape(pb::formatBytes(static_cast<int64_t>(peak))))));
        QVERIFY(text.contains(QString::number(s.value(QStringLiteral("step_time_mean_ms")).toDouble(), 'f', 2) + QStringLiteral(" ms")));
        QVERIFY(text.contains(s.value(QStringLiteral("data_revision")).toString()));
        QVERIFY(text.contains(s.value(QStringLiteral("model_revision")).toString()));
        QVERIFY(text.contains(QStringLiteral("LibTorch")));
        QVERIFY(text.contains(run.environment.value(QStringLiteral("torch_version")).toString()));
        // Nothing restored or scaled for this config yet.
        QCOMPARE(text.count(QStringLiteral("not run yet")), 2);
        // The comparison takes its step times from this pilot; the catalog's date and notice.
        QVERIFY(text.contains(QStringLiteral("step times from this pilot")));
        QVERIFY(text.contains(QStringLiteral("h200-sxm-141gb")));
        QVERIFY(text.contains(QStringLiteral("Term decision")));
        QVERIFY(text.contains(QStringLiteral("modelled on 2026-12-02")));
        QVERIFY(text.contains(QStringLiteral("not a quote")));
        // Each price with its date; the same assumption for many rows is one item naming them.
        QVERIFY(text.contains(QStringLiteral("price as of 2026-09-25")));
        const QString oneLine = text.simplified();
        QVERIFY2(oneLine.contains(QStringLiteral("every card x1: the measured device's peak is unknown")), qPrintable(oneLine.right(3000)));
        QVERIFY(oneLine.contains(QStringLiteral("h100-sxm-80gb, h200-sxm-141gb x2, x4, x8: scaling efficiency 0.90 at 2, 4, 8 GPUs")));
        QCOMPARE(oneLine.count(QStringLiteral("the measured device's peak is unknown")), 1);
        QVERIFY(oneLine.contains(QStringLiteral("Numerical format:")));
        // Charts are drawn, with titled axes.
        QVERIFY(text.contains(QStringLiteral("Memory over steps")));
        QVERIFY(text.contains(QStringLiteral("time (ms)")));
        QVERIFY(text.contains(QStringLiteral("memory (MiB)")));
        // Numbered pages.
        for (int p = 1; p <= pages; ++p)
            QVERIFY2(text.contains(QStringLiteral("page %1 of %2").arg(p).arg(pages)), qPrintable(QStringLiteral("no 'page %1 of %2'").arg(p).arg(pages)));
        QVERIFY(!text.contains(QStringLiteral("page %1 of").arg(pages + 1)));
        // User text: markup is painted as typed; the long token is wrapped, not cut.
        QVERIFY(text.contains(QStringLiteral("tiny <b>bold?</b> & \"quoted\"")));
        QString flat = text;
        flat.remove(QRegularExpression(QStringLiteral("\\s")));
        QVERIFY(flat.contains(QStringLiteral("averyveryverylongunbrokenrunname")));
        QVERIFY(flat.contains(QStringLiteral("wordboundaryanywhereatallxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")));
    }

    void unknownRunIsRefused()
    {
        const QString pdf = m_dir.filePath(QStringLiteral("none.pdf"));
        try {
            pb::report::writeRunReport(m_db, m_runId + 100, pdf, pb::builtInCatalog());
            QFAIL("expected InvalidInputError");
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), QStringLiteral("--run"));
        }
        QVERIFY(!QFile::exists(pdf));
    }

    void unwritableOutputIsRefused()
    {
        try {
            pb::report::writeRunReport(m_db, m_runId, m_dir.filePath(QStringLiteral("missing-folder/report.pdf")), pb::builtInCatalog());
            QFAIL("expected InvalidInputError");
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), QStringLiteral("--out"));
        }
    }
};

QTEST_MAIN(TestReport)
#include "tst_report.moc"
