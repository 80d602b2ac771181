#pragma once
// The staged pilot as a checklist: memory budget, one scaling step, restoration proof, term
// decision. Each stage shows its newest evidence from the history for the current config (the
// rules are core/workflow/Checklist), turns green only when that evidence passes, and offers what
// runs it.
#include "catalog/Catalog.h"
#include "estimate/MemoryEstimate.h"
#include "workflow/Checklist.h"

#include <optional>

#include <QString>
#include <QWidget>

#include <string>
#include <vector>

class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;

namespace pb {
class HistoryStore;
struct RunRecord;
}

namespace pb::ui {

using pb::StageState;
using pb::StageStatus;

class StagedPilotView final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(StagedPilotView)
public:
    static constexpr int kStageCount = kChecklistStages;
    explicit StagedPilotView(QWidget *parent = nullptr);
    void setStore(HistoryStore *store);
    // The model name runs are recorded under (preset or family); "" shows every model's evidence.
    void setModel(const QString &model);
    // configHash() of the config in the form: stages 1-3 count only runs of exactly this config.
    // "" counts every run of the model.
    void setConfigHash(const std::string &hash);
    // The window's current run (0: none): named above the stages, with whether it is evidence for
    // the form's config; when it ran another config, "Load its config" offers to make that current.
    void setCurrentRun(qint64 runId);
    qint64 currentRun() const { return m_currentRun; }
    // The catalog in force: a recorded decision made on another one is shown out of date.
    void setCatalog(const Catalog &catalog);
    const StageStatus &stage(int index) const { return m_status[static_cast<size_t>(index)]; }
    // While the restoration proof runs its button is disabled and the stage says so.
    void setRestoreCheckRunning(bool running);
    // While the scaling step runs its button cancels it.
    void setScaleStepRunning(bool running);
    void setScaleProgress(int done, int total, const QString &text);

public Q_SLOTS:
    void refresh();
    // Refresh now when visible, else when next shown.
    void markStale();

Q_SIGNALS:
    void showBudgetRequested();
    void runPilotRequested();
    void restoreCheckRequested();
    void scaleStepRequested(int gpus, pb::ParallelStrategy strategy);
    void scaleCancelRequested();
    void compareRequested();
    void loadRunConfigRequested(qint64 runId);

protected:
    void showEvent(QShowEvent *event) override;

private:
    bool m_stale = false;
    HistoryStore *m_store = nullptr;
    std::optional<Catalog> m_catalog;
    QString m_model;
    std::string m_configHash;
    void updateCurrentRunLine();
    QLabel *m_modelLabel = nullptr;
    qint64 m_currentRun = 0;
    QLabel *m_currentRunLabel = nullptr;
    QPushButton *m_loadRunConfig = nullptr;
    std::vector<QLabel *> m_badges, m_evidence;
    std::vector<StageStatus> m_status;
    QPushButton *m_restoreButton = nullptr;
    QPushButton *m_scaleButton = nullptr;
    QSpinBox *m_scaleGpus = nullptr;
    QComboBox *m_scaleStrategy = nullptr;
    QLabel *m_scaleProgress = nullptr;
    bool m_scaleRunning = false;
    bool m_restoreRunning = false;
};

} // namespace pb::ui
