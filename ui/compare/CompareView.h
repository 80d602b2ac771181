#pragma once
// The "Compare" tab: one tile per catalog card side by side (datasheet figures and its cheapest
// fitting count), the full table of cards x card counts with the recommended row highlighted, the
// plain-language recommendation, and selectors for the card count, the multi-GPU strategy and the
// term. The comparison is computed off the GUI thread (it reads the history); a newer request
// supersedes an older one.
//
// Use: CompareView *view = new CompareView(parent);
//      view->setHistoryPath(dbPath);   // where the newest pilot of the config is looked up ("" none)
//      view->setCatalog(catalog);      // default: the built-in catalog
//      view->setConfig(config);        // starts the comparison; comparisonChanged() when shown
// or   view->setComparison(precomputed) to show a result without computing.
#include "catalog/Catalog.h"
#include "workflow/Decision.h"

#include <cstdint>
#include "config/RunConfig.h"

#include <QWidget>

#include <optional>

class QComboBox;
class QGridLayout;
class QHBoxLayout;
class QLabel;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace pb::ui {

class CostHoursChart;

class CompareView final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(CompareView)
public:
    explicit CompareView(QWidget *parent = nullptr);
    ~CompareView() override;

    void setConfig(const RunConfig &config);           // recomputes
    void setCatalog(const Catalog &catalog);           // rebuilds the selectors, recomputes
    void setHistoryPath(const QString &databasePath);  // recomputes; "" : no pilot evidence
    // Shows a comparison computed elsewhere (no history read); the selectors are left as they are.
    void setComparison(const Comparison &comparison);

    const std::optional<Comparison> &comparison() const { return m_comparison; }
    QString errorText() const { return m_error; }
    bool busy() const { return m_running; }
    // Selector values as the comparison reads them: 0 = every count; "" = cheapest term.
    int selectedGpus() const;
    std::string selectedTerm() const;

    // Records row `row` of the shown comparison (-1: the selected row, else the recommended one)
    // as the config's decision in the history; returns its run id, 0 when refused (the reason is
    // shown under the table).
    int64_t recordDecision(int row = -1);

public Q_SLOTS:
    void refresh();

Q_SIGNALS:
    void comparisonChanged();                          // a result (or an error) is shown
    void decisionRecorded(qint64 runId);

private:
    void rebuildSelectors();
    void showComparison(const Comparison &comparison);
    void showError(const QString &message);
    void rebuildTiles(const Comparison &comparison);

    Catalog m_catalog;
    std::optional<RunConfig> m_config;
    std::optional<RunConfig> m_comparedConfig;       // the config of the comparison shown
    QString m_historyPath;
    std::optional<Comparison> m_comparison;
    QString m_error;
    quint64 m_generation = 0;
    bool m_running = false;

    QComboBox *m_gpus = nullptr;
    QComboBox *m_strategy = nullptr;
    QComboBox *m_term = nullptr;
    QComboBox *m_stack = nullptr;
    // ZeRO-1/2's gradient bucket pair, shown where the strategy may be one of them.
    QLabel *m_bucketLabel = nullptr;
    QSpinBox *m_bucket = nullptr;
    QLabel *m_basis = nullptr;
    QWidget *m_tiles = nullptr;
    QGridLayout *m_tilesLayout = nullptr;   // five cards a row: ten do not fit side by side at 1280 px
    QTableWidget *m_table = nullptr;
    CostHoursChart *m_costChart = nullptr;
    QLabel *m_recommendation = nullptr;
    QLabel *m_notice = nullptr;
    QPushButton *m_record = nullptr;
    QLabel *m_decisionLabel = nullptr;
};

} // namespace pb::ui
