#pragma once
// The dashboard's "Your command" mode: the user's own training command, its folder, environment
// additions and devices (remembered between sessions), optional limits, Start and Cancel; then
// what it prints (progress bars updating in place), the live figures and the verdict. A view only:
// the dashboard turns request() into a run and feeds back what the run reports.
#include "config/RunConfig.h"
#include "result/PilotTypes.h"
#include "workflow/WatchRun.h"

#include <QString>
#include <QStringList>
#include <QTextCharFormat>
#include <QWidget>

#include <cstdint>
#include <optional>
#include <vector>

class QCheckBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace pb::ui {

class WatchPanel final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(WatchPanel)
public:
    static constexpr int kMaxOutputLines = 5000;

    explicit WatchPanel(QWidget *parent = nullptr);
    ~WatchPanel() override; // remembers the fields

    // The Configuration tab's config, passed along when "use the run config" is ticked.
    void setConfig(const RunConfig &config, bool valid);
    // What Start would run (the database is the caller's), or nullopt with the reason in `why`.
    std::optional<WatchRunRequest> request(QString *why = nullptr) const;
    // Why Start is off ("" when the fields are fine).
    const QString &problem() const { return m_problem; }
    // Another run (ours or this one) holds the dashboard: Start is off.
    void setBusy(bool busy);

    // A run was started: the output, figures and verdict are cleared.
    void runStarting();
    void appendOutput(const QString &text, bool isStderr);
    void showNotice(const QString &text);
    void showProcessStarted(qint64 pid, const QString &deviceSource);
    void showCancelling();
    // The steps the frame timer drained, and the figures only the controller knows.
    void addSamples(const std::vector<StepSample> &samples);
    void setLiveSources(int64_t peakMemoryBytes, const QString &deviceSource, const QString &stepSource);
    void showFinished(qint64 runId, const PilotSummary &summary, const QString &stepSource, const QString &deviceSource, const QString &logPath);
    void showFailed(const QString &message);

    // Fields, for tests and the dashboard.
    QLineEdit *commandEdit() const { return m_command; }
    QLineEdit *folderEdit() const { return m_folder; }
    QPlainTextEdit *environmentEdit() const { return m_environment; }
    QLineEdit *devicesEdit() const { return m_devices; }
    QSpinBox *maxStepsBox() const { return m_maxSteps; }
    QSpinBox *maxSecondsBox() const { return m_maxSeconds; }
    QCheckBox *useConfigBox() const { return m_useConfig; }
    QPushButton *startButton() const { return m_start; }
    QPushButton *cancelButton() const { return m_cancel; }
    QPlainTextEdit *outputView() const { return m_output; }
    QLabel *figuresLabel() const { return m_figures; }
    QLabel *verdictLabel() const { return m_verdict; }

Q_SIGNALS:
    void startRequested();
    void cancelRequested();

private:
    void validate();
    void updateButtons();
    void updateFigures();
    void browseFolder();
    void restoreSettings();
    void saveSettings() const;
    // The environment field's lines as NAME=VALUE (blank and # lines skipped); the 0-based block
    // numbers of the lines that are not, in `badLines`.
    QStringList environmentAdditions(std::vector<int> *badLines = nullptr) const;

    QLineEdit *m_command = nullptr, *m_folder = nullptr, *m_devices = nullptr;
    QPlainTextEdit *m_environment = nullptr, *m_output = nullptr;
    QSpinBox *m_maxSteps = nullptr, *m_maxSeconds = nullptr, *m_logEvery = nullptr;
    QCheckBox *m_useConfig = nullptr;
    QPushButton *m_start = nullptr, *m_cancel = nullptr, *m_browse = nullptr;
    QLabel *m_problemLabel = nullptr, *m_figures = nullptr, *m_verdict = nullptr;

    RunConfig m_config;
    bool m_configValid = false;
    QString m_problem;
    bool m_busy = false, m_running = false;
    // A \r was the last thing printed: the next text replaces the line (a progress bar's update).
    bool m_replaceLine = false, m_replaceFromStderr = false;
    QTextCharFormat m_textFormat, m_noticeFormat;

    // Live figures over the steps drained so far.
    int64_t m_lastStep = 0, m_measured = 0, m_tokensSum = 0, m_peakAllocated = 0, m_peakMemory = -1;
    double m_stepMsSum = 0, m_recentStepMs = 0;
    QString m_deviceSource, m_stepSource;
};

} // namespace pb::ui
