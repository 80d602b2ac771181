#include "history/HistoryView.h"

#include "catalog/Catalog.h"
#include "charts/RunCharts.h"
#include "history/HistoryStore.h"
#include "history/OverlayCharts.h"
#include "history/PeakMemoryView.h"
#include "history/RunTableModel.h"
#include "report/ReportWriter.h"
#include "util/Units.h"
#include "workflow/CatalogSource.h"

#include <QComboBox>
#include <QFileDialog>
#include <QGuiApplication>
#include <QMessageBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTextBrowser>
#include <QVBoxLayout>

#include <exception>
#include <set>
#include <utility>

namespace pb::ui {
namespace {

QString jsonText(const QJsonValue &v)
{
    switch (v.type()) {
    case QJsonValue::Undefined: return QStringLiteral("(absent)");
    case QJsonValue::Null: return QStringLiteral("null");
    case QJsonValue::Bool: return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
    case QJsonValue::Double: return QString::number(v.toDouble(), 'g', 10);
    case QJsonValue::String: return v.toString();
    case QJsonValue::Array: return QString::fromUtf8(QJsonDocument(v.toArray()).toJson(QJsonDocument::Compact));
    case QJsonValue::Object: return QString::fromUtf8(QJsonDocument(v.toObject()).toJson(QJsonDocument::Compact));
    }
    return {};
}

} // namespace

HistoryView::HistoryView(const QString &databasePath, QWidget *parent) : QWidget(parent), m_path(databasePath)
{
    setObjectName(QStringLiteral("historyView"));
    auto *outer = new QVBoxLayout(this);

    auto *bar = new QHBoxLayout;
    m_filter = new QLineEdit(this);
    m_filter->setObjectName(QStringLiteral("historyFilter"));
    m_filter->setPlaceholderText(tr("Filter runs (any column: model, verdict, tag, note…)"));
    m_filter->setClearButtonEnabled(true);
    bar->addWidget(m_filter, 2);
    m_kind = new QComboBox(this);
    m_kind->setObjectName(QStringLiteral("historyKind"));
    m_kind->addItem(tr("all kinds"));
    m_kind->addItems(historyRunKinds());
    bar->addWidget(m_kind);
    auto *open = new QPushButton(tr("Open"), this);
    auto *overlay = new QPushButton(tr("Overlay selected"), this);
    auto *diff = new QPushButton(tr("Diff configs"), this);
    auto *pin = new QPushButton(tr("Pin / unpin baseline"), this);
    auto *reload = new QPushButton(tr("Refresh"), this);
    auto *report = new QPushButton(tr("Export PDF…"), this);
    report->setObjectName(QStringLiteral("exportReportButton"));
    report->setToolTip(tr("The PDF report of the opened run (else the selected one)"));
    open->setToolTip(tr("Show the run's charts and summary (double-click a row)"));
    overlay->setToolTip(tr("Overlay the step-time and memory curves of the selected runs"));
    diff->setToolTip(tr("Show only the config fields that differ between two selected runs"));
    pin->setToolTip(tr("The pinned run is the model's baseline: one per model"));
    for (auto *b : {open, overlay, diff, pin, report, reload})
        bar->addWidget(b);
    outer->addLayout(bar);
    m_error = new QLabel(this);
    m_error->setStyleSheet(QStringLiteral("color: #b02020;"));
    m_error->setWordWrap(true);
    m_error->hide();
    outer->addWidget(m_error);

    auto *split = new QSplitter(Qt::Vertical, this);
    m_model = new RunTableModel(nullptr, this);
    m_proxy = new QSortFilterProxyModel(this);
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(RunTableModel::SortRole);
    m_proxy->setFilterKeyColumn(-1);
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_table = new QTableView(split);
    m_table->setObjectName(QStringLiteral("historyTable"));
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(RunTableModel::Id, Qt::DescendingOrder);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_table->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
    m_table->setAlternatingRowColors(true);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
    m_table->horizontalHeader()->setStretchLastSection(true);
    split->addWidget(m_table);

    m_details = new QTabWidget(split);
    m_charts = new RunCharts(m_details);
    m_summary = new QTextBrowser(m_details);
    m_summary->setObjectName(QStringLiteral("runSummary"));
    m_overlay = new OverlayCharts(m_details);
    auto *diffPage = new QWidget(m_details);
    auto *dl = new QVBoxLayout(diffPage);
    m_diffTitle = new QLabel(tr("Select two runs and press Diff configs."), diffPage);
    m_diff = new QTableWidget(0, 3, diffPage);
    m_diff->setObjectName(QStringLiteral("configDiff"));
    m_diff->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_diff->horizontalHeader()->setStretchLastSection(true);
    m_diff->verticalHeader()->hide();
    dl->addWidget(m_diffTitle);
    dl->addWidget(m_diff);
    m_details->addTab(m_charts, tr("Run charts"));
    m_details->addTab(m_summary, tr("Summary"));
    m_peakMemory = new PeakMemoryView(m_details);
    m_details->addTab(m_peakMemory, tr("Peak memory"));
    m_details->addTab(m_overlay, tr("Overlay"));
    m_details->addTab(diffPage, tr("Config diff"));
    split->addWidget(m_details);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 4);
    split->setSizes({190, 510});
    outer->addWidget(split, 1);

    connect(m_filter, &QLineEdit::textChanged, m_proxy, &QSortFilterProxyModel::setFilterFixedString);
    connect(m_kind, &QComboBox::currentIndexChanged, this, &HistoryView::refresh);
    connect(open, &QPushButton::clicked, this, &HistoryView::openSelected);
    connect(overlay, &QPushButton::clicked, this, &HistoryView::overlaySelected);
    connect(diff, &QPushButton::clicked, this, &HistoryView::diffSelected);
    connect(pin, &QPushButton::clicked, this, [this] {
        const auto ids = selectedRunIds();
        if (ids.size() == 1)
            togglePinBaseline(ids.front());
        else
            Q_EMIT statusMessage(tr("Select one run to pin as the baseline."));
    });
    connect(reload, &QPushButton::clicked, this, &HistoryView::refresh);
    connect(report, &QPushButton::clicked, this, &HistoryView::exportReportDialog);
    connect(m_table, &QTableView::activated, this, [this](const QModelIndex &index) {
        if (index.column() != RunTableModel::Tags && index.column() != RunTableModel::Notes)
            openRun(index.data(RunTableModel::RunIdRole).toLongLong());
    });
    connect(m_model, &RunTableModel::storeError, this, &HistoryView::showError);
    // Selecting one run makes it the current one: the details, peak memory and Export PDF act on
    // what is highlighted, never on a run opened earlier. The page in front stays in front.
    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        const auto ids = selectedRunIds();
        if (ids.size() != 1 || ids.front() == m_openedRunId)
            return;
        QWidget *page = m_details->currentWidget();
        openRun(ids.front());
        if (page == m_summary || page == m_peakMemory)
            m_details->setCurrentWidget(page);
    });

    try {
        // A history this user cannot write is still shown; tags, notes and pins then say it is read-only.
        m_store = std::make_unique<HistoryStore>(m_path, HistoryStore::Access::ReadOnlyWhereNeeded);
        m_model->setStore(m_store.get());
        m_stale = true; // the first show opens the newest run
    } catch (const std::exception &e) {
        showError(tr("The history %1 cannot be used: %2").arg(m_path, QString::fromUtf8(e.what())));
    }
    m_table->resizeColumnsToContents();
}

HistoryView::~HistoryView() = default;

void HistoryView::showError(const QString &message)
{
    m_error->setText(message);
    m_error->setVisible(!message.isEmpty());
}

void HistoryView::markStale()
{
    m_stale = true;
    if (isVisible())
        refresh();
}

void HistoryView::showEvent(QShowEvent *event)
{
    QWidget::showEvent(event);
    if (m_stale)
        refresh();
}

void HistoryView::refresh()
{
    m_stale = false;
    if (!m_store)
        return;
    const auto selected = selectedRunIds();
    m_model->reload(kindFilter());
    m_table->resizeColumnsToContents();
    for (int64_t id : selected) {
        const int row = m_model->rowOfRun(id);
        if (row >= 0)
            m_table->selectionModel()->select(m_proxy->mapFromSource(m_model->index(row, 0)), QItemSelectionModel::Select | QItemSelectionModel::Rows);
    }
    if (const qint64 pending = std::exchange(m_pendingRun, 0); pending > 0) {
        selectRun(pending);
    } else if (m_openedRunId == 0) {
        // Something to look at from the start: the newest run with samples, until the user opens one.
        for (int row = 0; row < m_model->rowCount(); ++row) {
            const RunRecord *r = m_model->record(row);
            if (r && r->sampleCount > 0) {
                openRun(r->id);
                // Shown and highlighted are the same run.
                m_table->selectionModel()->select(m_proxy->mapFromSource(m_model->index(row, 0)), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
                break;
            }
        }
    }
    Q_EMIT historyChanged();
}

RunFilter HistoryView::kindFilter() const
{
    RunFilter filter;
    if (m_kind->currentIndex() > 0)
        filter.kind = m_kind->currentText();
    return filter;
}

std::vector<int64_t> HistoryView::selectedRunIds() const
{
    std::vector<int64_t> ids;
    for (const QModelIndex &index : m_table->selectionModel()->selectedRows())
        ids.push_back(index.data(RunTableModel::RunIdRole).toLongLong());
    return ids;
}

void HistoryView::openRun(qint64 runId)
{
    if (!m_store)
        return;
    try {
        const RunRecord r = m_store->run(runId);
        m_charts->setRun(m_store->samples(runId), m_store->phases(runId));
        m_openedRunId = runId;
        const QJsonObject &s = r.summary;
        auto num = [&](const char *key, int decimals) {
            const QJsonValue v = s.value(QLatin1String(key));
            return v.isDouble() ? QString::number(v.toDouble(), 'f', decimals) : QStringLiteral("–");
        };
        auto size = [&](const char *key) {
            const QJsonValue v = s.value(QLatin1String(key));
            return v.isDouble() ? formatBytes(static_cast<int64_t>(v.toDouble())) : QStringLiteral("–");
        };
        QString html = QStringLiteral("<h3>Run %1 · %2 · %3</h3>").arg(runId).arg(r.kind.toHtmlEscaped(), (r.verdict.isEmpty() ? r.status : r.verdict).toHtmlEscaped());
        html += QStringLiteral("<table cellspacing=4>");
        auto row = [&](const QString &name, const QString &value) { html += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>").arg(name, value.toHtmlEscaped()); };
        row(tr("Model"), r.model);
        row(tr("Device"), r.device + (r.card.isEmpty() ? QString() : QStringLiteral(" (") + r.card + QLatin1Char(')')));
        row(tr("Started"), r.startedAt.toLocalTime().toString(Qt::ISODate));
        row(tr("Message"), s.value(QStringLiteral("message")).toString());
        row(tr("Measured steps"), num("measured_steps", 0));
        row(tr("Step time p50 / p90 / p99"), num("step_time_p50_ms", 2) + QStringLiteral(" / ") + num("step_time_p90_ms", 2) + QStringLiteral(" / ") + num("step_time_p99_ms", 2) + QStringLiteral(" ms"));
        row(tr("Tokens/s"), num("tokens_per_s", 0));
        row(tr("MFU"), s.value(QStringLiteral("mfu")).isDouble() ? QString::number(100.0 * s.value(QStringLiteral("mfu")).toDouble(), 'f', 1) + QStringLiteral(" %") : tr("n/a"));
        row(tr("Peak allocated"), size("peak_allocated_bytes"));
        row(tr("Peak device used"), size("peak_device_used_bytes"));
        row(tr("Data stall"), s.value(QStringLiteral("data_stall_fraction")).isDouble() ? QString::number(100.0 * s.value(QStringLiteral("data_stall_fraction")).toDouble(), 'f', 1) + QStringLiteral(" %") : QStringLiteral("–"));
        row(tr("Final loss"), num("final_loss", 4));
        row(tr("Config hash"), QString::fromStdString(r.configHash));
        row(tr("Torch"), r.environment.value(QStringLiteral("torch_version")).toString());
        row(tr("Tags"), r.tags.join(QStringLiteral(", ")));
        row(tr("Notes"), r.notes);
        html += QStringLiteral("</table>");
        m_summary->setHtml(html);
        m_peakMemory->setRun(r);
        m_details->setCurrentWidget(m_charts);
        Q_EMIT statusMessage(tr("Opened run %1 (%2 samples)").arg(runId).arg(r.sampleCount));
        Q_EMIT runOpened(runId);
    } catch (const std::exception &e) {
        showError(QString::fromUtf8(e.what()));
    }
}

void HistoryView::selectRun(qint64 runId)
{
    if (!m_store || runId <= 0)
        return;
    if (!isVisible()) { // read when next shown: a run ending under the dashboard costs nothing here
        m_pendingRun = runId;
        m_stale = true;
        return;
    }
    int row = m_model->rowOfRun(runId);
    if (row < 0) { // recorded since the table was read
        m_model->reload(kindFilter());
        row = m_model->rowOfRun(runId);
    }
    if (row < 0) { // filtered out by kind: shown, not highlighted
        if (runId != m_openedRunId)
            openRun(runId);
        return;
    }
    const QModelIndex index = m_proxy->mapFromSource(m_model->index(row, 0));
    // A selection of several runs that holds it (Open selected, then Overlay) stays as it is.
    if (!m_table->selectionModel()->isRowSelected(index.row(), index.parent()))
        m_table->selectionModel()->select(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    m_table->scrollTo(index);
    openRun(runId); // again when it was open: a live run's record changed when it ended
}

void HistoryView::overlayRuns(const std::vector<int64_t> &runIds)
{
    if (!m_store || runIds.empty())
        return;
    try {
        QStringList names;
        int64_t baseline = 0;
        for (int64_t id : runIds) {
            const RunRecord r = m_store->run(id);
            names << tr("run %1 %2").arg(id).arg(r.model) + (r.pinnedBaseline ? tr(" (baseline)") : QString());
            if (r.pinnedBaseline)
                baseline = id;
        }
        m_overlay->setCurves(m_store->curves(runIds), names, baseline);
        m_details->setCurrentWidget(m_overlay);
    } catch (const std::exception &e) {
        showError(QString::fromUtf8(e.what()));
    }
}

void HistoryView::diffRuns(qint64 leftRunId, qint64 rightRunId)
{
    if (!m_store)
        return;
    try {
        const auto diffs = m_store->diffConfigs(leftRunId, rightRunId);
        m_diff->clearContents();
        m_diff->setRowCount(static_cast<int>(diffs.size()));
        m_diff->setHorizontalHeaderLabels({tr("Field"), tr("Run %1").arg(leftRunId), tr("Run %1").arg(rightRunId)});
        for (size_t i = 0; i < diffs.size(); ++i) {
            const int row = static_cast<int>(i);
            m_diff->setItem(row, 0, new QTableWidgetItem(diffs[i].path));
            m_diff->setItem(row, 1, new QTableWidgetItem(jsonText(diffs[i].left)));
            m_diff->setItem(row, 2, new QTableWidgetItem(jsonText(diffs[i].right)));
        }
        m_diff->resizeColumnsToContents();
        m_diffTitle->setText(diffs.empty() ? tr("Runs %1 and %2 have identical configs.").arg(leftRunId).arg(rightRunId)
                                           : tr("%1 field(s) differ between runs %2 and %3:").arg(diffs.size()).arg(leftRunId).arg(rightRunId));
        m_details->setCurrentWidget(m_diff->parentWidget()); // the page the result is on
    } catch (const std::exception &e) {
        showError(QString::fromUtf8(e.what()));
    }
}

void HistoryView::togglePinBaseline(qint64 runId)
{
    if (!m_store)
        return;
    try {
        const RunRecord r = m_store->run(runId);
        if (r.pinnedBaseline)
            m_store->unpinBaseline(runId);
        else
            m_store->pinBaseline(runId);
        Q_EMIT statusMessage(r.pinnedBaseline ? tr("Run %1 is no longer the baseline").arg(runId) : tr("Run %1 pinned as the baseline of %2").arg(runId).arg(r.model));
        refresh();
    } catch (const std::exception &e) {
        showError(QString::fromUtf8(e.what()));
    }
}

bool HistoryView::exportReport(int64_t runId, const QString &pdfPath, QString *error)
{
    if (!m_store) {
        if (error)
            *error = tr("No history database open.");
        return false;
    }
    try {
        QGuiApplication::setOverrideCursor(Qt::WaitCursor);
        struct Restore {
            ~Restore() { QGuiApplication::restoreOverrideCursor(); }
        } restore;
        const int pages = report::writeRunReport(*m_store, runId, pdfPath, activeCatalogOrBuiltIn(nullptr));
        Q_EMIT statusMessage(tr("Report of run %1 written: %2 (%3 pages)").arg(runId).arg(pdfPath).arg(pages));
        return true;
    } catch (const std::exception &e) {
        if (error)
            *error = QString::fromUtf8(e.what());
        return false;
    }
}

void HistoryView::exportReportDialog()
{
    int64_t runId = m_openedRunId;
    if (runId == 0) {
        const auto ids = selectedRunIds();
        if (ids.empty()) {
            Q_EMIT statusMessage(tr("Open or select a run to export its report."));
            return;
        }
        runId = ids.front();
    }
    const QString path = QFileDialog::getSaveFileName(this, tr("Export PDF report"), QStringLiteral("pilotbench-run-%1.pdf").arg(runId), tr("PDF (*.pdf)"));
    if (path.isEmpty())
        return;
    QString error;
    if (!exportReport(runId, path, &error))
        QMessageBox::warning(this, tr("Export PDF report"), error);
}

void HistoryView::openSelected()
{
    const auto ids = selectedRunIds();
    if (!ids.empty())
        openRun(ids.front());
}

void HistoryView::overlaySelected()
{
    const auto ids = selectedRunIds();
    if (ids.empty())
        Q_EMIT statusMessage(tr("Select one or more runs to overlay."));
    overlayRuns(ids);
}

void HistoryView::diffSelected()
{
    const auto ids = selectedRunIds();
    if (ids.size() != 2) {
        Q_EMIT statusMessage(tr("Select exactly two runs to diff their configs."));
        return;
    }
    diffRuns(ids[1], ids[0]);
}

} // namespace pb::ui
