#pragma once
// The history: the runs table (sortable, filterable, tags and notes edited in place), and below it
// the opened run's charts and summary, the overlay of the selected runs, and the config diff of two.
#include <QWidget>

#include <memory>
#include <vector>

class QLabel;
class QLineEdit;
class QComboBox;
class QSortFilterProxyModel;
class QTableView;
class QTabWidget;
class QTextBrowser;
class QTableWidget;

namespace pb {
class HistoryStore;
struct RunFilter;
}

namespace pb::ui {

class OverlayCharts;
class RunCharts;
class RunTableModel;
class PeakMemoryView;

class HistoryView final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(HistoryView)
public:
    explicit HistoryView(const QString &databasePath, QWidget *parent = nullptr);
    ~HistoryView() override;

    HistoryStore *store() const { return m_store.get(); }
    RunTableModel *model() const { return m_model; }
    QSortFilterProxyModel *proxy() const { return m_proxy; }
    QTableView *table() const { return m_table; }
    RunCharts *runCharts() const { return m_charts; }
    OverlayCharts *overlay() const { return m_overlay; }
    QTableWidget *diffTable() const { return m_diff; }
    std::vector<int64_t> selectedRunIds() const;
    // The PDF report of `runId` (ui/report); false with the reason in *error.
    bool exportReport(int64_t runId, const QString &pdfPath, QString *error);
    int64_t openedRunId() const { return m_openedRunId; }

public Q_SLOTS:
    void refresh();
    // Refresh now when visible, else the next time the view is shown (a run finishing while the
    // user watches the dashboard costs the GUI thread nothing then).
    void markStale();
    void openRun(qint64 runId);
    // Highlights and opens `runId` (the window's current run changed elsewhere: a live run ended).
    void selectRun(qint64 runId);
    void overlayRuns(const std::vector<int64_t> &runIds);
    void diffRuns(qint64 leftRunId, qint64 rightRunId);
    void togglePinBaseline(qint64 runId);
    void openSelected();
    // Asks for a file and writes the PDF report of the opened (else the selected) run.
    void exportReportDialog();
    void overlaySelected();
    void diffSelected();

Q_SIGNALS:
    void statusMessage(const QString &message);
    void historyChanged();
    // A run was opened (selected, activated, or the newest shown first): the window's current run.
    void runOpened(qint64 runId);

protected:
    void showEvent(QShowEvent *event) override;

private:
    void showError(const QString &message);
    RunFilter kindFilter() const;
    bool m_stale = false;
    qint64 m_pendingRun = 0; // made current while hidden: selected when next shown
    QString m_path;
    std::unique_ptr<HistoryStore> m_store;
    RunTableModel *m_model = nullptr;
    QSortFilterProxyModel *m_proxy = nullptr;
    QTableView *m_table = nullptr;
    QLineEdit *m_filter = nullptr;
    QComboBox *m_kind = nullptr;
    QTabWidget *m_details = nullptr;
    PeakMemoryView *m_peakMemory = nullptr;
    RunCharts *m_charts = nullptr;
    QTextBrowser *m_summary = nullptr;
    OverlayCharts *m_overlay = nullptr;
    QTableWidget *m_diff = nullptr;
    QLabel *m_diffTitle = nullptr;
    QLabel *m_error = nullptr;
    int64_t m_openedRunId = 0;
};

} // namespace pb::ui
