#pragma once
// The run configuration view: preset picker, file open/save, Hugging Face import, the form, and the
// live memory budget per card beside it, recomputed on every change (the estimator is arithmetic).
#include "config/RunConfig.h"
#include "estimate/MemoryEstimate.h"

#include <QWidget>

#include <functional>

#include <vector>

class QComboBox;
class QLabel;
class QPushButton;

namespace pb::ui {

class MemoryBudgetWidget;
class RunConfigForm;

class ConfigView final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(ConfigView)
public:
    explicit ConfigView(QWidget *parent = nullptr);
    RunConfig config() const;
    bool isValid() const;
    void setConfig(const RunConfig &config);
    RunConfigForm *form() const { return m_form; }
    MemoryBudgetWidget *budget() const { return m_budget; }
    // Load or save without dialogs; on failure they return false and put the reason in *error.
    bool loadFile(const QString &path, QString *error);
    bool saveFile(const QString &path, QString *error);
    bool importHf(const QString &folder, QString *error);
    void loadPreset(const QString &name);
    // Loads the config a recorded run ran with (named `source`, e.g. "run 7"), asking first when
    // the form has edits; false when the user keeps them.
    bool loadConfigOfRun(const RunConfig &config, const QString &source);
    // Whether the form differs from the preset or file it was loaded from (the preset box and the
    // source label then say "(edited)", and picking another preset asks first).
    bool edited() const { return m_edited; }
    // Replaces the question asked before a preset discards edits (tests answer it); true: discard.
    void setDiscardConfirmation(std::function<bool(const QString &question)> confirm) { m_confirmDiscard = std::move(confirm); }
    const QString &currentFile() const { return m_file; }
    // The history whose measured pilots calibrate the budget (each card by the pilots that ran on
    // it); read again by reloadCalibration() after a pilot. An unreadable file means no calibration.
    void setHistoryDatabase(const QString &path);
    void reloadCalibration();

public Q_SLOTS:
    void openDialog();
    void saveDialog();
    void importHfDialog();

Q_SIGNALS:
    void configChanged();
    void runPilotRequested();
    void statusMessage(const QString &message);

private:
    void recompute();
    void updateEdited();
    // The config as loaded, to tell edits from it; the source label's text without "(edited)".
    QByteArray m_loadedJson;
    QString m_sourceText;
    bool m_edited = false;
    int m_presetIndex = 0;
    std::function<bool(const QString &)> m_confirmDiscard;
    RunConfigForm *m_form = nullptr;
    MemoryBudgetWidget *m_budget = nullptr;
    QComboBox *m_presets = nullptr;
    QLabel *m_summary = nullptr;
    QLabel *m_source = nullptr;
    QPushButton *m_run = nullptr;
    QString m_file;
    QString m_database;
    std::vector<std::vector<CalibrationResidual>> m_cardResiduals; // per cardCapacities() entry
};

} // namespace pb::ui
