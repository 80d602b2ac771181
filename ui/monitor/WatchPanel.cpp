#include "monitor/WatchPanel.h"

#include "util/Units.h"

#include <QCheckBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollBar>
#include <QSettings>
#include <QSpinBox>
#include <QTextBlock>
#include <QTextCursor>
#include <QVBoxLayout>

#include <algorithm>

namespace pb::ui {
namespace {

const QString kCommandKey = QStringLiteral("watch/command");
const QString kFolderKey = QStringLiteral("watch/folder");
const QString kEnvironmentKey = QStringLiteral("watch/environment");
const QString kDevicesKey = QStringLiteral("watch/devices");

QString expandHome(const QString &path)
{
    if (path == QLatin1String("~"))
        return QDir::homePath();
    if (path.startsWith(QLatin1String("~/")))
        return QDir::homePath() + path.mid(1);
    return path;
}

QString bytesText(int64_t bytes) { return bytes < 0 ? QStringLiteral("–") : formatBytes(bytes); }

// Where the peak memory figure comes from, in words: device used where a vendor library answers.
QString peakSourceText(const QString &deviceSource)
{
    return deviceSource == QLatin1String("proc") ? QObject::tr("process tree RSS") : QObject::tr("device used");
}

} // namespace

WatchPanel::WatchPanel(QWidget *parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("watchPanel"));
    auto *grid = new QGridLayout;
    grid->setContentsMargins(0, 0, 0, 0);

    m_command = new QLineEdit(this);
    m_command->setObjectName(QStringLiteral("watchCommand"));
    m_command->setPlaceholderText(tr("python3 train.py --bf16   or   torchrun --nproc_per_node 8 train.py"));
    m_command->setToolTip(tr("The program and its arguments. Group an argument with spaces in double quotes (\"like this\"); "
                             "single quotes are not special here. Steps come from pilotbench_probe when the job imports it, "
                             "else from the Trainer's log lines and tqdm progress bars it prints."));
    m_start = new QPushButton(tr("Start"), this);
    m_start->setObjectName(QStringLiteral("watchStart"));
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_cancel->setObjectName(QStringLiteral("watchCancel"));
    m_cancel->setToolTip(tr("Esc: stops the command's whole process tree (SIGTERM, then SIGKILL after 10 s); what was measured is kept"));
    auto *commandRow = new QHBoxLayout;
    commandRow->addWidget(m_command, 1);
    commandRow->addWidget(m_start);
    commandRow->addWidget(m_cancel);
    grid->addWidget(new QLabel(tr("Command:"), this), 0, 0);
    grid->addLayout(commandRow, 0, 1, 1, 3);

    m_folder = new QLineEdit(this);
    m_folder->setObjectName(QStringLiteral("watchFolder"));
    m_folder->setPlaceholderText(tr("the application's current folder"));
    m_browse = new QPushButton(tr("Browse…"), this);
    m_browse->setObjectName(QStringLiteral("watchBrowse"));
    m_devices = new QLineEdit(this);
    m_devices->setObjectName(QStringLiteral("watchDevices"));
    m_devices->setPlaceholderText(tr("all"));
    m_devices->setToolTip(tr("CUDA_VISIBLE_DEVICES for the command, e.g. 0,1 (empty: every device)"));
    auto *folderRow = new QHBoxLayout;
    folderRow->addWidget(m_folder, 1);
    folderRow->addWidget(m_browse);
    folderRow->addSpacing(12);
    folderRow->addWidget(new QLabel(tr("Devices:"), this));
    folderRow->addWidget(m_devices);
    m_devices->setMaximumWidth(160);
    grid->addWidget(new QLabel(tr("Folder:"), this), 1, 0);
    grid->addLayout(folderRow, 1, 1, 1, 3);

    m_environment = new QPlainTextEdit(this);
    m_environment->setObjectName(QStringLiteral("watchEnvironment"));
    m_environment->setPlaceholderText(tr("NAME=VALUE, one a line (no quotes needed), e.g. HF_HOME=/data/hf"));
    m_environment->setTabChangesFocus(true);
    m_environment->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_environment->setFixedHeight(m_environment->fontMetrics().lineSpacing() * 4 + 10);
    grid->addWidget(new QLabel(tr("Environment:"), this), 2, 0, Qt::AlignTop);
    grid->addWidget(m_environment, 2, 1);

    auto *limits = new QGridLayout;
    m_maxSteps = new QSpinBox(this);
    m_maxSteps->setObjectName(QStringLiteral("watchMaxSteps"));
    m_maxSteps->setRange(0, 100000000);
    m_maxSteps->setSpecialValueText(tr("none"));
    m_maxSteps->setToolTip(tr("Stop the command on purpose after this many steps (its verdict stays 'fits')"));
    m_maxSeconds = new QSpinBox(this);
    m_maxSeconds->setObjectName(QStringLiteral("watchMaxSeconds"));
    m_maxSeconds->setRange(0, 100000000);
    m_maxSeconds->setSpecialValueText(tr("none"));
    m_maxSeconds->setSuffix(tr(" s"));
    m_maxSeconds->setToolTip(tr("Stop the command on purpose after this long"));
    m_logEvery = new QSpinBox(this);
    m_logEvery->setObjectName(QStringLiteral("watchLogEvery"));
    m_logEvery->setRange(0, 100000000);
    m_logEvery->setSpecialValueText(tr("as printed"));
    m_logEvery->setSuffix(tr(" steps"));
    m_logEvery->setToolTip(tr("How many steps each Trainer log with a loss stands for (its logging_steps): times the steps of a job "
                              "that prints no progress bar. 'as printed': read from the TrainingArguments the job prints, if it does"));
    m_useConfig = new QCheckBox(tr("Use the run config from the Configuration tab"), this);
    m_useConfig->setObjectName(QStringLiteral("watchUseConfig"));
    m_useConfig->setToolTip(tr("The job's definition: tokens per step and FLOPs where the command does not report them, and the estimate beside what was measured"));
    limits->addWidget(new QLabel(tr("Max steps:"), this), 0, 0);
    limits->addWidget(m_maxSteps, 0, 1);
    limits->addWidget(new QLabel(tr("Max time:"), this), 1, 0);
    limits->addWidget(m_maxSeconds, 1, 1);
    limits->addWidget(new QLabel(tr("Trainer logs every:"), this), 2, 0);
    limits->addWidget(m_logEvery, 2, 1);
    limits->addWidget(m_useConfig, 3, 0, 1, 2);
    limits->setRowStretch(4, 1);
    grid->addLayout(limits, 2, 2, 1, 2);
    grid->setColumnStretch(1, 1);

    m_problemLabel = new QLabel(this);
    m_problemLabel->setObjectName(QStringLiteral("watchProblem"));
    m_problemLabel->setStyleSheet(QStringLiteral("color: #b02020;"));
    m_problemLabel->setWordWrap(true);

    m_output = new QPlainTextEdit(this);
    m_output->setObjectName(QStringLiteral("watchOutput"));
    m_output->setReadOnly(true);
    m_output->setUndoRedoEnabled(false);
    m_output->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_output->setMaximumBlockCount(kMaxOutputLines);
    m_output->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_output->setMinimumHeight(m_output->fontMetrics().lineSpacing() * 6);
    m_output->setPlaceholderText(tr("What the command prints appears here."));
    m_noticeFormat.setForeground(QColor(0x20, 0x50, 0xa0));
    m_noticeFormat.setFontItalic(true);

    m_figures = new QLabel(this);
    m_figures->setObjectName(QStringLiteral("watchFigures"));
    m_figures->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_verdict = new QLabel(this);
    m_verdict->setObjectName(QStringLiteral("watchVerdict"));
    m_verdict->setWordWrap(true);
    m_verdict->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto *outer = new QVBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);
    outer->addLayout(grid);
    outer->addWidget(m_problemLabel);
    outer->addWidget(m_output, 1);
    outer->addWidget(m_figures);
    outer->addWidget(m_verdict);

    restoreSettings();
    connect(m_command, &QLineEdit::textChanged, this, &WatchPanel::validate);
    connect(m_command, &QLineEdit::returnPressed, this, [this] {
        if (m_start->isEnabled())
            Q_EMIT startRequested();
    });
    connect(m_folder, &QLineEdit::textChanged, this, &WatchPanel::validate);
    connect(m_devices, &QLineEdit::textChanged, this, &WatchPanel::validate);
    connect(m_environment, &QPlainTextEdit::textChanged, this, &WatchPanel::validate);
    connect(m_useConfig, &QCheckBox::toggled, this, &WatchPanel::validate);
    connect(m_browse, &QPushButton::clicked, this, &WatchPanel::browseFolder);
    connect(m_start, &QPushButton::clicked, this, &WatchPanel::startRequested);
    connect(m_cancel, &QPushButton::clicked, this, &WatchPanel::cancelRequested);
    validate();
    updateFigures();
}

WatchPanel::~WatchPanel()
{
    saveSettings();
}

void WatchPanel::restoreSettings()
{
    QSettings settings;
    m_command->setText(settings.value(kCommandKey).toString());
    m_folder->setText(settings.value(kFolderKey).toString());
    m_environment->setPlainText(settings.value(kEnvironmentKey).toString());
    m_devices->setText(settings.value(kDevicesKey).toString());
}

void WatchPanel::saveSettings() const
{
    QSettings settings;
    settings.setValue(kCommandKey, m_command->text());
    settings.setValue(kFolderKey, m_folder->text());
    settings.setValue(kEnvironmentKey, m_environment->toPlainText());
    settings.setValue(kDevicesKey, m_devices->text());
}

void WatchPanel::setConfig(const RunConfig &config, bool valid)
{
    m_config = config;
    m_configValid = valid;
    validate();
}

QStringList WatchPanel::environmentAdditions(std::vector<int> *badLines) const
{
    static const QRegularExpression assignment(QStringLiteral("^[A-Za-z_][A-Za-z0-9_]*="));
    QStringList out;
    const QStringList lines = m_environment->toPlainText().split(QLatin1Char('\n'));
    for (int i = 0; i < lines.size(); ++i) {
        const QString line = lines[i].trimmed();
        if (line.isEmpty() || line.startsWith(QLatin1Char('#')))
            continue;
        if (assignment.match(line).hasMatch())
            out << line;
        else if (badLines)
            badLines->push_back(i);
    }
    return out;
}

void WatchPanel::validate()
{
    std::vector<int> bad;
    const QStringList environment = environmentAdditions(&bad);
    // The bad lines in red, where the user is typing them.
    QList<QTextEdit::ExtraSelection> marks;
    for (int line : bad) {
        QTextEdit::ExtraSelection mark;
        mark.cursor = QTextCursor(m_environment->document()->findBlockByNumber(line));
        mark.format.setForeground(QColor(0xb0, 0x20, 0x20));
        mark.format.setBackground(QColor(0xfb, 0xe3, 0xe3));
        mark.format.setProperty(QTextFormat::FullWidthSelection, true);
        marks << mark;
    }
    m_environment->setExtraSelections(marks);

    static const QRegularExpression deviceList(QStringLiteral("^[A-Za-z0-9,:_-]*$"));
    const QString folder = expandHome(m_folder->text().trimmed());
    const QString devices = m_devices->text().trimmed();
    QString problem;
    if (QProcess::splitCommand(m_command->text()).isEmpty())
        problem = tr("Enter the command to run.");
    else if (!folder.isEmpty() && !QFileInfo(folder).isDir())
        problem = tr("The folder %1 does not exist.").arg(folder);
    else if (!bad.empty())
        problem = tr("Environment line %1 is not NAME=VALUE: %2").arg(bad.front() + 1).arg(m_environment->document()->findBlockByNumber(bad.front()).text().trimmed());
    else if (!deviceList.match(devices).hasMatch())
        problem = tr("Devices: a comma-separated list of indices or GPU UUIDs, e.g. 0,1.");
    else if (!devices.isEmpty() && std::any_of(environment.begin(), environment.end(), [](const QString &e) { return e.startsWith(QLatin1String("CUDA_VISIBLE_DEVICES=")); }))
        problem = tr("CUDA_VISIBLE_DEVICES is set both in Devices and in the environment: keep one.");
    else if (m_useConfig->isChecked() && !m_configValid)
        problem = tr("The run config has problems: fix them on the Configuration tab, or untick \"Use the run config\".");
    m_problem = problem;
    m_problemLabel->setText(problem);
    m_problemLabel->setVisible(!problem.isEmpty() && !m_command->text().trimmed().isEmpty());
    updateButtons();
}

std::optional<WatchRunRequest> WatchPanel::request(QString *why) const
{
    if (!m_problem.isEmpty()) {
        if (why)
            *why = m_problem;
        return std::nullopt;
    }
    WatchRunRequest r;
    watch::WatchOptions &o = r.options;
    o.command = QProcess::splitCommand(m_command->text());
    o.workingDir = expandHome(m_folder->text().trimmed());
    o.environment = environmentAdditions();
    const QString devices = m_devices->text().trimmed();
    if (!devices.isEmpty())
        o.environment << QStringLiteral("CUDA_VISIBLE_DEVICES=") + devices;
    if (m_maxSteps->value() > 0)
        o.maxSteps = m_maxSteps->value();
    if (m_maxSeconds->value() > 0)
        o.maxSeconds = m_maxSeconds->value();
    if (m_logEvery->value() > 0)
        o.logEvery = m_logEvery->value();
    if (m_useConfig->isChecked())
        r.config = m_config;
    return r;
}

void WatchPanel::setBusy(bool busy)
{
    m_busy = busy;
    updateButtons();
}

void WatchPanel::updateButtons()
{
    m_start->setEnabled(m_problem.isEmpty() && !m_busy && !m_running);
    m_start->setToolTip(m_problem.isEmpty() ? tr("Run the command and measure it like a pilot") : m_problem);
    m_cancel->setEnabled(m_running);
    for (QWidget *w : std::initializer_list<QWidget *> {m_command, m_folder, m_browse, m_environment, m_devices, m_maxSteps, m_maxSeconds, m_logEvery, m_useConfig})
        w->setEnabled(!m_running);
}

void WatchPanel::browseFolder()
{
    const QString start = m_folder->text().trimmed().isEmpty() ? QDir::currentPath() : expandHome(m_folder->text().trimmed());
    const QString chosen = QFileDialog::getExistingDirectory(this, tr("The command's working folder"), start);
    if (!chosen.isEmpty())
        m_folder->setText(chosen);
}

void WatchPanel::runStarting()
{
    saveSettings();
    m_running = true;
    m_replaceLine = false;
    m_output->clear();
    m_lastStep = m_measured = m_tokensSum = m_peakAllocated = 0;
    m_peakMemory = -1;
    m_stepMsSum = m_recentStepMs = 0;
    m_deviceSource.clear();
    m_stepSource.clear();
    m_verdict->setText(tr("Starting %1…").arg(m_command->text().trimmed()));
    m_verdict->setStyleSheet(QString());
    updateFigures();
    updateButtons();
}

void WatchPanel::appendOutput(const QString &raw, bool isStderr)
{
    // Colours and cursor moves (tqdm's nested bars) mean nothing in a plain view.
    static const QRegularExpression escapes(QStringLiteral("\x1b\\[[0-9;?]*[A-Za-z]"));
    QString text = raw;
    if (text.contains(QChar(0x1b)))
        text.remove(escapes);
    QScrollBar *bar = m_output->verticalScrollBar();
    const bool following = bar->value() >= bar->maximum() - 2;
    QTextCursor c(m_output->document());
    c.movePosition(QTextCursor::End);
    c.beginEditBlock();
    qsizetype start = 0;
    auto put = [&](qsizetype end) {
        if (end <= start)
            return;
        if (m_replaceLine && m_replaceFromStderr != isStderr) {
            // The other stream's text does not erase a progress bar: the core reads both pipes
            // once a tick, so a print may arrive before the bar's final newline.
            c.insertBlock(QTextBlockFormat(), m_textFormat);
        } else if (m_replaceLine) {
            c.movePosition(QTextCursor::StartOfBlock, QTextCursor::KeepAnchor);
            c.removeSelectedText();
        }
        m_replaceLine = false;
        c.insertText(text.mid(start, end - start), m_textFormat);
    };
    for (qsizetype i = 0; i < text.size(); ++i) {
        const QChar ch = text.at(i);
        if (ch == QLatin1Char('\n')) {
            put(i);
            m_replaceLine = false; // "\r\n" ends the line rather than erasing it
            c.insertBlock(QTextBlockFormat(), m_textFormat);
            start = i + 1;
        } else if (ch == QLatin1Char('\r')) {
            put(i);
            m_replaceLine = true;
            m_replaceFromStderr = isStderr;
            start = i + 1;
        }
    }
    put(text.size());
    c.endEditBlock();
    if (following)
        bar->setValue(bar->maximum());
}

void WatchPanel::showNotice(const QString &text)
{
    QTextCursor c(m_output->document());
    c.movePosition(QTextCursor::End);
    c.beginEditBlock();
    if (!c.block().text().isEmpty())
        c.insertBlock(QTextBlockFormat(), m_textFormat);
    c.insertText(QStringLiteral("pilotbench: ") + text, m_noticeFormat);
    c.insertBlock(QTextBlockFormat(), m_textFormat);
    c.endEditBlock();
    // The line the progress bar was on is finished; its next update starts the new line.
    m_replaceLine = false;
    m_output->verticalScrollBar()->setValue(m_output->verticalScrollBar()->maximum());
}

void WatchPanel::showProcessStarted(qint64 pid, const QString &deviceSource)
{
    m_deviceSource = deviceSource;
    m_verdict->setText(tr("Running (pid %1); devices from %2…").arg(pid).arg(deviceSource));
    updateFigures();
}

void WatchPanel::showCancelling()
{
    m_verdict->setText(tr("Cancelling: stopping the command's process tree…"));
}

void WatchPanel::addSamples(const std::vector<StepSample> &samples)
{
    for (const StepSample &s : samples) {
        m_lastStep = std::max(m_lastStep, s.step);
        m_peakAllocated = std::max(m_peakAllocated, s.peakAllocatedBytes);
        m_recentStepMs = m_recentStepMs > 0 ? 0.8 * m_recentStepMs + 0.2 * s.stepTimeMs : s.stepTimeMs;
        if (s.phase == Phase::Train) {
            ++m_measured;
            m_stepMsSum += s.stepTimeMs;
            m_tokensSum += s.tokens;
        }
    }
    if (!samples.empty())
        updateFigures();
}

void WatchPanel::setLiveSources(int64_t peakMemoryBytes, const QString &deviceSource, const QString &stepSource)
{
    if (peakMemoryBytes == m_peakMemory && deviceSource == m_deviceSource && stepSource == m_stepSource)
        return;
    m_peakMemory = peakMemoryBytes;
    if (!deviceSource.isEmpty())
        m_deviceSource = deviceSource;
    if (!stepSource.isEmpty())
        m_stepSource = stepSource;
    updateFigures();
}

void WatchPanel::updateFigures()
{
    const QString dash = QStringLiteral("–");
    const QString stepTime = m_measured > 0 ? QStringLiteral("%1 ms").arg(m_stepMsSum / static_cast<double>(m_measured), 0, 'f', 1)
                             : m_recentStepMs > 0 ? QStringLiteral("%1 ms (warm-up)").arg(m_recentStepMs, 0, 'f', 1)
                                                  : dash;
    const QString tokens = m_tokensSum > 0 && m_stepMsSum > 0 ? QString::number(static_cast<double>(m_tokensSum) / (m_stepMsSum / 1000.0), 'f', 0) : dash;
    QString peak = bytesText(m_peakMemory);
    if (m_peakMemory >= 0 && !m_deviceSource.isEmpty())
        peak += QStringLiteral(" (%1)").arg(peakSourceText(m_deviceSource));
    if (m_peakAllocated > 0)
        peak += tr(", allocated %1").arg(bytesText(m_peakAllocated));
    m_figures->setText(tr("Steps %1 · step time %2 · tokens/s %3 · peak memory %4 · devices from %5 · steps from %6")
                           .arg(m_lastStep)
                           .arg(stepTime, tokens, peak, m_deviceSource.isEmpty() ? dash : m_deviceSource, m_stepSource.isEmpty() ? dash : m_stepSource));
}

void WatchPanel::showFinished(qint64 runId, const PilotSummary &s, const QString &stepSource, const QString &deviceSource, const QString &logPath)
{
    m_running = false;
    m_deviceSource = deviceSource;
    m_stepSource = stepSource;
    if (s.peakDeviceUsedBytes > 0)
        m_peakMemory = std::max(m_peakMemory, s.peakDeviceUsedBytes);
    updateFigures();
    updateButtons();
    const QString verdict = QString::fromLatin1(toString(s.verdict));
    QString text = tr("Run %1: %2.").arg(runId).arg(verdict);
    if (s.measuredSteps > 0) {
        text += tr(" Step time mean %1 ms, p50 %2 ms, p90 %3 ms over %4 measured steps (from %5)")
                    .arg(s.stepTimeMeanMs, 0, 'f', 1)
                    .arg(s.stepTimeP50Ms, 0, 'f', 1)
                    .arg(s.stepTimeP90Ms, 0, 'f', 1)
                    .arg(s.measuredSteps)
                    .arg(stepSource);
        text += s.tokensPerSecond > 0 ? tr("; %1 tokens/s.").arg(s.tokensPerSecond, 0, 'f', 0) : tr("; tokens/s unknown (no token counts and no run config).");
    }
    text += tr(" Peak %1 %2 (%3).").arg(peakSourceText(deviceSource), bytesText(s.peakDeviceUsedBytes), deviceSource);
    if (!s.message.empty())
        text += QLatin1Char(' ') + QString::fromStdString(s.message);
    if (!logPath.isEmpty())
        text += tr(" Log: %1").arg(QDir::toNativeSeparators(logPath));
    m_verdict->setText(text);
    m_verdict->setStyleSheet(s.verdict == Verdict::Fits        ? QStringLiteral("color: #207020;")
                             : s.verdict == Verdict::Cancelled ? QStringLiteral("color: #806000;")
                                                               : QStringLiteral("color: #b02020;"));
}

void WatchPanel::showFailed(const QString &message)
{
    m_running = false;
    updateButtons();
    m_verdict->setText(tr("Watching stopped: %1 (once it had started, the run is in the history as failed)").arg(message));
    m_verdict->setStyleSheet(QStringLiteral("color: #b02020;"));
}

} // namespace pb::ui
