// The history view over a database written by hand: the table lists and filters the runs, tags
// and notes edit through to the store, a run opens with its own samples, two runs overlay, the
// config diff shows only what differs, and the staged checklist turns green only on passing
// evidence.
#include "charts/RunCharts.h"
#include "config/Presets.h"
#include "config/RunConfigJson.h"
#include "history/HistoryStore.h"
#include "history/HistoryView.h"
#include "history/PeakMemoryView.h"
#include "history/HistoryWriter.h"
#include "history/OverlayCharts.h"
#include "history/RunTableModel.h"
#include "stages/StagedPilotView.h"

#include <QChart>
#include <QChartView>
#include <QLineEdit>
#include <QLineSeries>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTableWidget>
#include <QLabel>
#include <QTabWidget>
#include <QtTest>

using namespace pb;
using namespace pb::ui;

namespace {

int64_t writeRun(HistoryWriter &writer, const QString &kind, const RunConfig &config, int steps, double baseMs, Verdict verdict,
                 std::optional<MemoryAttribution> attribution = std::nullopt)
{
    RunStart start;
    start.kind = kind;
    start.name = QString::fromStdString(config.name);
    start.model = QString::fromStdString(config.model.preset);
    start.device = QStringLiteral("cpu");
    start.configJson = toJson(config);
    start.configHash = configHash(config);
    const int64_t id = writer.beginRun(start);
    PilotSummary summary;
    summary.verdict = verdict;
    summary.measuredSteps = steps;
    for (int i = 1; i <= steps; ++i) {
        StepSample s;
        s.step = i;
        s.phase = i == 1 ? Phase::Warmup : Phase::Train;
        s.stepTimeMs = baseMs + i;
        s.allocatedBytes = int64_t(i) * 1024 * 1024;
        s.reservedBytes = s.allocatedBytes;
        s.peakAllocatedBytes = 3 * s.allocatedBytes;
        s.deviceUsedBytes = 2 * s.allocatedBytes;
        s.tokens = 256;
        s.loss = 5.0 - 0.1 * i;
        writer.appendSample(id, s);
    }
    summary.stepTimeP50Ms = baseMs + steps / 2.0;
    summary.memoryAttribution = attribution;
    writer.finishRun(id, summary);
    writer.flush();
    return id;
}

std::vector<double> stepTimes(QLineSeries *series)
{
    std::vector<double> out;
    for (const QPointF &p : series->points())
        out.push_back(p.y());
    return out;
}

} // namespace

class TestHistoryView final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        m_db = m_dir.filePath(QStringLiteral("history.db"));
        HistoryWriter writer(m_db);
        RunConfig a = presetConfig(QStringLiteral("tiny"));
        a.name = "tiny-a";
        RunConfig b = a;
        b.name = "tiny-b";
        b.train.seqLen = 32;
        m_a = writeRun(writer, QStringLiteral("pilot"), a, 10, 100.0, Verdict::Fits);
        m_b = writeRun(writer, QStringLiteral("pilot"), b, 20, 200.0, Verdict::Fits);
        m_scale = writeRun(writer, QStringLiteral("scale"), a, 3, 50.0, Verdict::DoesNotFit);
        MemoryAttribution peak;
        peak.step = 2;
        peak.device = "cpu";
        peak.peakAllocatedBytes = 3000;
        peak.peakPhase = "backward";
        peak.peakSite = "head / aten::mm";
        peak.parts[static_cast<size_t>(MemoryPart::TrainableWeights)] = 1000;
        peak.parts[static_cast<size_t>(MemoryPart::Logits)] = 2000;
        peak.sites = {{"forward", "head", "aten::mm", MemoryPart::Logits, 2000, 1}, {"before", "trainable parameters", "", MemoryPart::TrainableWeights, 1000, 7}};
        RunConfig c = a; // a config of its own, so the staged checklist below still sees m_a and m_b
        c.name = "tiny-c";
        c.train.seqLen = 16;
        m_attributed = writeRun(writer, QStringLiteral("pilot"), c, 4, 100.0, Verdict::Fits, peak);
    }

    void peakMemoryTabShowsTheAttribution()
    {
        HistoryView view(m_db);
        view.openRun(m_attributed);
        auto *peak = view.findChild<PeakMemoryView *>(QStringLiteral("peakMemory"));
        QVERIFY(peak);
        auto *sites = peak->findChild<QTableWidget *>(QStringLiteral("peakSites"));
        QCOMPARE(sites->rowCount(), 2);
        QCOMPARE(sites->item(0, 2)->text(), QStringLiteral("head"));
        QCOMPARE(sites->item(0, 0)->text(), QStringLiteral("logits"));
        bool named = false;
        for (auto *label : peak->findChildren<QLabel *>())
            named = named || label->text().contains(QStringLiteral("reached by head / aten::mm"));
        QVERIFY(named);
        // A run without one says so and lists nothing.
        view.openRun(m_b);
        QCOMPARE(sites->rowCount(), 0);
        bool missing = false;
        for (auto *label : peak->findChildren<QLabel *>())
            missing = missing || label->text().contains(QStringLiteral("no attribution"));
        QVERIFY(missing);
    }

    void tableListsAndFilters()
    {
        HistoryView view(m_db);
        QCOMPARE(view.model()->rowCount(), 4);
        // Newest first in the model; sorted by id descending in the view.
        QCOMPARE(view.proxy()->index(0, RunTableModel::Id).data(RunTableModel::RunIdRole).toLongLong(), m_attributed);
        view.table()->sortByColumn(RunTableModel::P50, Qt::AscendingOrder);
        QCOMPARE(view.proxy()->index(0, 0).data(RunTableModel::RunIdRole).toLongLong(), m_scale); // p50 51.5 ms
        QCOMPARE(view.proxy()->index(3, 0).data(RunTableModel::RunIdRole).toLongLong(), m_b);     // p50 210 ms
        QTest::keyClicks(view.findChild<QLineEdit *>(QStringLiteral("historyFilter")), QStringLiteral("scale"));
        QCOMPARE(view.proxy()->rowCount(), 1);
    }

    void tagsAndNotesEditThrough()
    {
        HistoryView view(m_db);
        const int row = view.model()->rowOfRun(m_a);
        QVERIFY(view.model()->setData(view.model()->index(row, RunTableModel::Tags), QStringLiteral("cpu, baseline-candidate ,"), Qt::EditRole));
        QVERIFY(view.model()->setData(view.model()->index(row, RunTableModel::Notes), QStringLiteral("first try"), Qt::EditRole));
        HistoryStore store(m_db);
        const RunRecord r = store.run(m_a);
        QCOMPARE(r.tags, QStringList({QStringLiteral("cpu"), QStringLiteral("baseline-candidate")}));
        QCOMPARE(r.notes, QStringLiteral("first try"));
    }

    void openRunShowsItsSamples()
    {
        HistoryView view(m_db);
        view.openRun(m_a);
        QCOMPARE(view.openedRunId(), m_a);
        QCOMPARE(view.runCharts()->sampleCount(), size_t(10));
        QVERIFY(!view.runCharts()->deviceOnOwnAxis()); // device used is twice the allocated: one axis reads
        QCOMPARE(view.runCharts()->measuredStepTimesMs().size(), size_t(9)); // step 1 is warm-up
        const auto times = stepTimes(view.runCharts()->stepTimeSeries());
        QCOMPARE(times.size(), size_t(10));
        QCOMPARE(times.front(), 101.0);
        QCOMPARE(times.back(), 110.0);
        // Measured steps 2..10 take 102..110 ms. Nearest rank over 9 values: p50 -> rank
        // ceil(4.5) = 5 -> 106; p90 -> ceil(8.1) = 9 -> 110; p99 -> ceil(8.91) = 9 -> 110.
        QCOMPARE(view.runCharts()->percentilesMs()[0], 106.0);
        QCOMPARE(view.runCharts()->percentilesMs()[1], 110.0);
        QCOMPARE(view.runCharts()->percentilesMs()[2], 110.0);
        QVERIFY(view.runCharts()->histogramView()->chart()->title().contains(QStringLiteral("p50 106.0")));
    }

    void overlayTwoRuns()
    {
        HistoryView view(m_db);
        view.table()->selectAll();
        QCOMPARE(view.selectedRunIds().size(), size_t(4));
        view.overlayRuns({m_a, m_b});
        QCOMPARE(view.overlay()->seriesCount(), 2);
        const auto series = view.overlay()->stepTimeView()->chart()->series();
        auto *first = qobject_cast<QLineSeries *>(series.at(0));
        auto *second = qobject_cast<QLineSeries *>(series.at(1));
        QCOMPARE(first->count(), 10);
        QCOMPARE(second->count(), 20);
        QCOMPARE(second->at(19).y(), 220.0);
        QVERIFY(first->name().contains(QString::number(m_a)));
        auto *memory = qobject_cast<QLineSeries *>(view.overlay()->memoryView()->chart()->series().at(1));
        QCOMPARE(memory->at(19).y(), 60.0); // peak 3 x 20 MiB at step 20
    }

    void diffShowsOnlyDifferences()
    {
        HistoryView view(m_db);
        view.diffRuns(m_a, m_b);
        QTableWidget *diff = view.diffTable();
        QStringList paths;
        for (int r = 0; r < diff->rowCount(); ++r)
            paths << diff->item(r, 0)->text();
        QCOMPARE(paths, QStringList({QStringLiteral("name"), QStringLiteral("train.seq_len")}));
        const int seqRow = paths.indexOf(QStringLiteral("train.seq_len"));
        QCOMPARE(diff->item(seqRow, 1)->text(), QStringLiteral("64"));
        QCOMPARE(diff->item(seqRow, 2)->text(), QStringLiteral("32"));
    }

    // One subject: the run opened at start is the one highlighted; highlighting another makes it
    // the current run (details and export follow), keeping the page in front; a diff shows its page.
    void selectionMakesTheRunCurrent()
    {
        HistoryView view(m_db);
        view.refresh(); // as showing the tab does
        QVERIFY(view.openedRunId() != 0);
        QCOMPARE(view.selectedRunIds(), std::vector<int64_t> {view.openedRunId()});
        auto *details = view.diffTable()->parentWidget()->parentWidget()->parentWidget(); // page -> stack -> tab widget
        auto *tabs = qobject_cast<QTabWidget *>(details);
        QVERIFY(tabs);
        const int64_t other = view.openedRunId() == m_a ? m_b : m_a;
        tabs->setCurrentIndex(2); // Peak memory
        QWidget *peak = tabs->currentWidget();
        const QModelIndex index = view.proxy()->mapFromSource(view.model()->index(view.model()->rowOfRun(other), 0));
        view.table()->selectionModel()->select(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
        QCOMPARE(view.openedRunId(), other);
        QCOMPARE(tabs->currentWidget(), peak);
        // Two selected: the current run stays what it was until one is picked.
        view.table()->selectAll();
        QCOMPARE(view.openedRunId(), other);
        view.table()->clearSelection();
        view.table()->selectionModel()->select(view.proxy()->mapFromSource(view.model()->index(view.model()->rowOfRun(m_a), 0)), QItemSelectionModel::Select | QItemSelectionModel::Rows);
        view.table()->selectionModel()->select(view.proxy()->mapFromSource(view.model()->index(view.model()->rowOfRun(m_b), 0)), QItemSelectionModel::Select | QItemSelectionModel::Rows);
        view.diffSelected();
        QCOMPARE(tabs->currentWidget(), view.diffTable()->parentWidget());
    }

    void exportReport()
    {
        HistoryView view(m_db);
        const QString pdf = m_dir.filePath(QStringLiteral("run.pdf"));
        QString error;
        QVERIFY2(view.exportReport(m_a, pdf, &error), qPrintable(error));
        QFile file(pdf);
        QVERIFY(file.open(QIODevice::ReadOnly));
        QCOMPARE(file.read(5), QByteArray("%PDF-"));
        QVERIFY(!view.exportReport(999999, pdf, &error)); // an unknown run is refused, by name
        QVERIFY(error.contains(QStringLiteral("999999")));
    }

    void pinBaseline()
    {
        HistoryView view(m_db);
        view.togglePinBaseline(m_b);
        QCOMPARE(view.store()->pinnedBaseline(QStringLiteral("tiny")), std::optional<int64_t>(m_b));
        const int row = view.model()->rowOfRun(m_b);
        QVERIFY(view.model()->index(row, RunTableModel::Baseline).data().toString().contains(QStringLiteral("baseline")));
        view.togglePinBaseline(m_b);
        QCOMPARE(view.store()->pinnedBaseline(QStringLiteral("tiny")), std::nullopt);
    }

    void stagedChecklistFollowsEvidence()
    {
        HistoryStore store(m_db);
        RunConfig a = presetConfig(QStringLiteral("tiny"));
        a.name = "tiny-a";
        RunConfig b = a;
        b.name = "tiny-b";
        b.train.seqLen = 32;
        StagedPilotView stages;
        stages.setStore(&store);
        stages.setModel(QStringLiteral("tiny"));
        stages.setConfigHash(configHash(a));
        stages.refresh(); // hidden views refresh lazily, when shown
        QCOMPARE(stages.stage(0).state, StageState::Passed);   // pilot of config a: fits
        QCOMPARE(stages.stage(0).runId, m_a);                   // the newer pilot m_b is another config
        QCOMPARE(stages.stage(1).state, StageState::Failed);   // scale of config a: does-not-fit
        QCOMPARE(stages.stage(1).runId, m_scale);
        QCOMPARE(stages.stage(2).state, StageState::Missing);  // no restore-check
        QCOMPARE(stages.stage(3).state, StageState::Missing);

        stages.setConfigHash(configHash(b));
        stages.refresh();
        QCOMPARE(stages.stage(0).runId, m_b);
        QCOMPARE(stages.stage(1).state, StageState::Missing);  // the scale run was of config a
        QVERIFY(stages.stage(1).evidence.contains(QString::number(m_scale)));

        stages.setModel(QStringLiteral("llama-3.1-8b"));
        stages.show();   // shown: the stale evidence is re-read
        QCOMPARE(stages.stage(0).state, StageState::Missing);  // evidence is per model
    }

private:
    QTemporaryDir m_dir;
    int64_t m_attributed = 0;
    QString m_db;
    int64_t m_a = 0, m_b = 0, m_scale = 0;
};

QTEST_MAIN(TestHistoryView)
#include "tst_history_view.moc"
