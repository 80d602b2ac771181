#include "monitor/DashboardView.h"

#include "charts/RunCharts.h"
#include "config/RunConfigJson.h"
#include "engine/DevicePeak.h"
#include "engine/Environment.h"
#include "engine/MemoryProbe.h"
#include "engine/PilotEngine.h"
#include "estimate/MemoryEstimator.h"
#include "history/HistoryStore.h"
#include "monitor/PilotController.h"
#include "monitor/SampleBuffer.h"
#include "monitor/WatchController.h"
#include "monitor/WatchPanel.h"
#include "workflow/PilotMemoryCheck.h"
#include "util/Units.h"

#include <QComboBox>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTabBar>
#include <QThread>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>

namespace pb::ui {
namespace {

QString duration(double seconds)
{
    if (seconds < 60)
        return QStringLiteral("%1 s").arg(seconds, 0, 'f', 0);
    if (seconds < 3600)
        return QStringLiteral("%1 min %2 s").arg(static_cast<int>(seconds / 60)).arg(static_cast<int>(seconds) % 60);
    return QStringLiteral("%1 h %2 min").arg(static_cast<int>(seconds / 3600)).arg((static_cast<int>(seconds) % 3600) / 60);
}

QLabel *figure(QGridLayout *grid, int row, int column, const QString &name, const QString &objectName, QWidget *parent)
{
    auto *title = new QLabel(name, parent);
    title->setStyleSheet(QStringLiteral("color: palette(mid);"));
    auto *value = new QLabel(QStringLiteral("–"), parent);
    value->setObjectName(objectName);
    QFont f = value->font();
    f.setBold(true);
    value->setFont(f);
    grid->addWidget(title, row, column * 2);
    grid->addWidget(value, row, column * 2 + 1);
    return value;
}


} // namespace

DashboardView::DashboardView(const QString &databasePath, QWidget *parent)
    : QWidget(parent), m_databasePath(databasePath), m_buffer(std::make_unique<SampleBuffer>())
{
    setObjectName(QStringLiteral("dashboardView"));
    m_controller = new PilotController(*m_buffer, this);
    m_watch = new WatchController(*m_buffer, this);
    auto *outer = new QVBoxLayout(this);

    m_modes = new QTabBar(this);
    m_modes->setObjectName(QStringLiteral("dashboardModes"));
    m_modes->addTab(tr("Our pilot"));
    m_modes->setTabToolTip(0, tr("Measure a pilot of the Configuration tab's run with PilotBench's own engine"));
    m_modes->addTab(tr("Your command"));
    m_modes->setTabToolTip(1, tr("Run your own training command and measure it the same way"));
    m_modes->setExpanding(false);
    outer->addWidget(m_modes);
    m_modeStack = new QStackedWidget(this);
    m_modeStack->setObjectName(QStringLiteral("dashboardModeStack"));
    auto *pilotPage = new QWidget(m_modeStack);
    pilotPage->setObjectName(QStringLiteral("pilotPage"));
    auto *pilotLayout = new QVBoxLayout(pilotPage);
    pilotLayout->setContentsMargins(0, 0, 0, 0);

    auto *bar = new QHBoxLayout;
    m_configLabel = new QLabel(this);
    m_configLabel->setObjectName(QStringLiteral("dashboardConfig"));
    bar->addWidget(m_configLabel, 1);
    bar->addWidget(new QLabel(tr("Device:"), this));
    m_device = new QComboBox(this);
    m_device->setObjectName(QStringLiteral("deviceCombo"));
    m_device->addItem(QStringLiteral("cpu"));
    for (int i = 0; i < cudaDeviceCount(); ++i)
        m_device->addItem(QStringLiteral("cuda:%1").arg(i));
    bar->addWidget(m_device);
    bar->addWidget(new QLabel(tr("Warm-up:"), this));
    m_warmup = new QSpinBox(this);
    m_warmup->setObjectName(QStringLiteral("warmupSteps"));
    m_warmup->setRange(0, 1000);
    m_warmup->setValue(3);
    bar->addWidget(m_warmup);
    bar->addWidget(new QLabel(tr("Measured steps:"), this));
    m_steps = new QSpinBox(this);
    m_steps->setObjectName(QStringLiteral("measuredSteps"));
    m_steps->setRange(1, 10000000);
    m_steps->setValue(20);
    bar->addWidget(m_steps);
    m_start = new QPushButton(tr("Start pilot"), this);
    m_start->setObjectName(QStringLiteral("startButton"));
    m_start->setToolTip(tr("Ctrl+R"));
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_cancel->setObjectName(QStringLiteral("cancelButton"));
    m_cancel->setToolTip(tr("Esc: stops within one micro-batch; what was measured is kept"));
    bar->addWidget(m_start);
    bar->addWidget(m_cancel);
    pilotLayout->addLayout(bar);

    auto *figures = new QGroupBox(this);
    auto *grid = new QGridLayout(figures);
    grid->setContentsMargins(8, 4, 8, 4);
    m_progress = new QProgressBar(figures);
    m_progress->setObjectName(QStringLiteral("pilotProgress"));
    m_progress->setFormat(tr("step %v of %m"));
    grid->addWidget(m_progress, 0, 0, 1, 6);
    m_eta = figure(grid, 0, 3, tr("ETA"), QStringLiteral("etaFigure"), figures);
    m_phase = figure(grid, 0, 4, tr("Phase"), QStringLiteral("phaseFigure"), figures);
    m_stepTime = figure(grid, 1, 0, tr("Step time p50"), QStringLiteral("stepTimeFigure"), figures);
    m_tokens = figure(grid, 1, 1, tr("Tokens/s"), QStringLiteral("tokensFigure"), figures);
    m_stall = figure(grid, 1, 2, tr("Data stall"), QStringLiteral("stallFigure"), figures);
    m_mfu = figure(grid, 1, 3, tr("MFU"), QStringLiteral("mfuFigure"), figures);
    m_peak = figure(grid, 1, 4, tr("Peak allocated"), QStringLiteral("peakFigure"), figures);
    m_verdict = new QLabel(figures);
    m_verdict->setObjectName(QStringLiteral("verdictLabel"));
    m_verdict->setWordWrap(true);
    grid->addWidget(m_verdict, 2, 0, 1, 10);
    for (int c = 1; c < 10; c += 2)
        grid->setColumnStretch(c, 1);
    pilotLayout->addWidget(figures);

    m_watchPanel = new WatchPanel(m_modeStack);
    m_modeStack->addWidget(pilotPage);
    m_modeStack->addWidget(m_watchPanel);
    outer->addWidget(m_modeStack);
    auto showMode = [this](int index) {
        // A hidden page's size is ignored, so the pilot's short controls do not take the height of
        // the command's output view from the charts.
        for (int i = 0; i < m_modeStack->count(); ++i)
            m_modeStack->widget(i)->setSizePolicy(i == index ? QSizePolicy::Preferred : QSizePolicy::Ignored,
                                                  i == index ? QSizePolicy::Preferred : QSizePolicy::Ignored);
        m_modeStack->setCurrentIndex(index);
        if (m_charts && !isRunning())
            showModeCharts(static_cast<Mode>(index));
    };
    showMode(0);
    connect(m_modes, &QTabBar::currentChanged, this, showMode);

    m_chartsLabel = new QLabel(this);
    m_chartsLabel->setObjectName(QStringLiteral("chartsSubject"));
    m_chartsLabel->setStyleSheet(QStringLiteral("font-weight: bold;"));
    outer->addWidget(m_chartsLabel);
    m_charts = new RunCharts(this);
    m_charts->setAntialiasing(false);
    outer->addWidget(m_charts, 1);
    showModeCharts(Mode::Pilot);

    m_frame = new QTimer(this);
    m_frame->setInterval(kFrameIntervalMs);
    connect(m_frame, &QTimer::timeout, this, &DashboardView::drain);
    connect(m_start, &QPushButton::clicked, this, &DashboardView::startPilot);
    connect(m_cancel, &QPushButton::clicked, this, &DashboardView::cancelPilot);
    connect(m_controller, &PilotController::runStarted, this, &DashboardView::runStarted);
    connect(m_controller, &PilotController::runFinished, this, &DashboardView::onFinished);
    connect(m_controller, &PilotController::runFailed, this, &DashboardView::onFailed);

    connect(m_watchPanel, &WatchPanel::startRequested, this, &DashboardView::startWatch);
    connect(m_watchPanel, &WatchPanel::cancelRequested, this, &DashboardView::cancelPilot);
    connect(m_watch, &WatchController::output, m_watchPanel, &WatchPanel::appendOutput);
    connect(m_watch, &WatchController::notice, m_watchPanel, &WatchPanel::showNotice);
    connect(m_watch, &WatchController::processStarted, m_watchPanel, &WatchPanel::showProcessStarted);
    connect(m_watch, &WatchController::runStarted, this, &DashboardView::runStarted);
    connect(m_watch, &WatchController::runFinished, this, &DashboardView::onWatchFinished);
    connect(m_watch, &WatchController::runFailed, this, &DashboardView::onWatchFailed);
    updateRunningUi();
}

DashboardView::~DashboardView()
{
    // The controller cancels and joins the engine thread, which writes into m_buffer: it must go
    // before the buffer does (children would otherwise outlive the members).
    delete m_controller;
    m_controller = nullptr;
    delete m_watch;
    m_watch = nullptr;
}

void DashboardView::setConfig(const RunConfig &config, bool valid)
{
    m_config = config;
    m_configValid = valid;
    const QString name = QString::fromStdString(config.name.empty() ? config.model.preset : config.name);
    // The training mode beside the format: a QLoRA pilot's numbers are not a LoRA pilot's.
    const QString mode = usesAdapters(config.train.mode) ? QStringLiteral("%1 r%2").arg(QString::fromLatin1(toString(config.train.mode))).arg(config.train.lora.rank)
                                                          : QString::fromLatin1(toString(config.train.mode));
    m_configLabel->setText(valid ? tr("Config: %1 · %6 · seq %2 × micro-batch %3 × accum %4 · %5")
                                       .arg(name.isEmpty() ? tr("custom") : name)
                                       .arg(config.train.seqLen)
                                       .arg(config.train.microBatch)
                                       .arg(config.train.gradAccum)
                                       .arg(QString::fromLatin1(toString(config.train.precision)), mode)
                                 : tr("The config has problems: fix them on the Configuration tab."));
    if (!isRunning()) {
        m_start->setEnabled(valid);
        if (const ModeRun &shown = m_modeRun[m_modes->currentIndex()]; shown.id > 0 && m_chartsLabel->text().startsWith(shown.text))
            m_chartsLabel->setText(chartsText(shown));
    }
    m_watchPanel->setConfig(config, valid);
}

void DashboardView::setSteps(int measuredSteps, int warmupSteps)
{
    m_steps->setValue(measuredSteps);
    m_warmup->setValue(warmupSteps);
}

bool DashboardView::isRunning() const
{
    return (m_controller && m_controller->isRunning()) || (m_watch && m_watch->isRunning());
}

DashboardView::Mode DashboardView::mode() const
{
    return static_cast<Mode>(m_modes->currentIndex());
}

void DashboardView::setMode(Mode mode)
{
    m_modes->setCurrentIndex(static_cast<int>(mode));
}

bool DashboardView::startPilot()
{
    if (!m_configValid || isRunning())
        return false;
    setMode(Mode::Pilot);
    m_draining = Mode::Pilot;
    PilotOptions options;
    options.device = m_device->currentText().toStdString();
    options.steps = m_steps->value();
    options.warmupSteps = m_warmup->value();
    // On CPU, leave one core to the GUI thread: LibTorch's OpenMP workers spin at their barriers, and
    // with every core taken the event loop stalls for whole steps.
    if (options.device == "cpu")
        options.cpuThreads = std::max(1, QThread::idealThreadCount() - 1);
    options.devicePeakFlops = catalogPeakFlops(options.device);
    m_peakFlops = options.devicePeakFlops;
    // A pilot that cannot fit would allocate until the device (or the host, on CPU) refuses: ask first.
    const PilotMemoryCheck memory = checkPilotMemory(m_config, options);
    if (memory.exceeds()) {
        const QLocale locale;
        const QString where = options.device == "cpu" ? tr("this computer has %1 of memory available").arg(locale.formattedDataSize(memory.capacityBytes))
                                                      : tr("%1 has %2").arg(QString::fromStdString(options.device), locale.formattedDataSize(memory.capacityBytes));
        const QString ends = options.device == "cpu" && options.memoryLimitBytes <= 0
                                 ? tr(" It stops as does-not-fit once its tensors reach %1% of that memory, before the computer would start to page.")
                                       .arg(kCpuPilotHostMemoryPercent)
                                 : QString();
        const QString why = tr("The estimated peak of this run is %1, but %2. The pilot will most likely run out of memory.%3\n\nStart it anyway?")
                                .arg(locale.formattedDataSize(*memory.estimateBytes), where, ends);
        if (!(m_confirmOversized ? m_confirmOversized(why) : QMessageBox::question(this, tr("Start a pilot that does not fit?"), why) == QMessageBox::Yes))
            return false;
    }
    keepToHostMemory(options, memory);
    m_charts->clear();
    m_chartsLabel->setText(tr("Charts: the pilot of %1 now running").arg(QString::fromStdString(m_config.name.empty() ? m_config.model.preset : m_config.name)));
    m_charts->setEstimateBytes(memory.estimateBytes); // no estimate line for a shape the estimator refuses
    m_modeRun[static_cast<int>(Mode::Pilot)].estimate = memory.estimateBytes;
    m_lastStep = m_measured = m_tokensSum = m_peakAllocated = 0;
    m_longestFrameMs = 0;
    m_stepMsSum = m_dataWaitMsSum = m_recentStepMs = 0;
    m_totalSteps = options.steps + options.warmupSteps;
    m_charts->setPlannedLastStep(m_totalSteps);
    m_currentPhase = Phase::Setup;
    m_progress->setRange(0, static_cast<int>(m_totalSteps));
    m_progress->setValue(0);
    for (QLabel *l : {m_stepTime, m_tokens, m_stall, m_mfu, m_eta, m_peak})
        l->setText(QStringLiteral("–"));
    m_verdict->setText(tr("Running on %1…").arg(QString::fromStdString(options.device)));
    m_verdict->setStyleSheet(QString());
    if (!m_controller->start(m_config, options, m_databasePath))
        return false;
    m_elapsed.start();
    updateRunningUi();
    m_frame->start();
    Q_EMIT statusMessage(tr("Pilot started: %1 warm-up + %2 measured steps on %3").arg(options.warmupSteps).arg(options.steps).arg(QString::fromStdString(options.device)));
    return true;
}

bool DashboardView::startWatch()
{
    if (isRunning())
        return false;
    QString why;
    std::optional<WatchRunRequest> request = m_watchPanel->request(&why);
    if (!request) {
        Q_EMIT statusMessage(tr("Your command cannot start: %1").arg(why));
        return false;
    }
    request->database = m_databasePath;
    setMode(Mode::Command);
    m_draining = Mode::Command;
    m_charts->clear();
    m_chartsLabel->setText(tr("Charts: your command now running"));
    m_charts->setEstimateBytes(std::nullopt); // the command's device is not known before it runs
    m_charts->setPlannedLastStep(request->options.maxSteps.value_or(0));
    m_longestFrameMs = 0;
    const QString command = request->options.command.join(QLatin1Char(' '));
    if (!m_watch->start(std::move(*request)))
        return false;
    m_watchPanel->runStarting();
    m_elapsed.start();
    updateRunningUi();
    m_frame->start();
    Q_EMIT statusMessage(tr("Watching your command: %1").arg(command));
    return true;
}

void DashboardView::cancelPilot()
{
    if (m_watch->isRunning()) {
        m_watch->cancel();
        m_watchPanel->showCancelling();
        return;
    }
    if (!isRunning())
        return;
    m_controller->cancel();
    m_verdict->setText(tr("Cancelling: the engine stops after the current micro-batch…"));
}

void DashboardView::updateRunningUi()
{
    // One run at a time: the two kinds share the sample buffer and the charts.
    const bool pilot = m_controller->isRunning();
    m_start->setEnabled(!isRunning() && m_configValid);
    m_cancel->setEnabled(pilot);
    m_steps->setEnabled(!pilot);
    m_warmup->setEnabled(!pilot);
    m_device->setEnabled(!pilot);
    m_watchPanel->setBusy(isRunning());
    // A live run owns the dashboard until it ends: the other mode cannot be brought in front of it.
    const bool watching = m_watch->isRunning();
    m_modes->setTabEnabled(static_cast<int>(Mode::Pilot), !watching);
    m_modes->setTabEnabled(static_cast<int>(Mode::Command), !pilot);
}

void DashboardView::drain()
{
    QElapsedTimer frame;
    frame.start();
    SampleDrain d = m_buffer->drain();
    if (m_draining == Mode::Command) {
        m_watch->drainOutput();
        m_charts->appendSamples(d.samples);
        m_charts->refresh(++m_frameCount % 6 == 0);
        m_watchPanel->addSamples(d.samples);
        m_watchPanel->setLiveSources(m_watch->peakMemoryBytes(), m_watch->deviceSource(), m_watch->stepSource());
        m_longestFrameMs = std::max(m_longestFrameMs, frame.nsecsElapsed() / 1e6);
        return;
    }
    m_currentPhase = d.currentPhase;
    for (const StepSample &s : d.samples) {
        m_lastStep = std::max(m_lastStep, s.step);
        m_peakAllocated = std::max(m_peakAllocated, s.peakAllocatedBytes);
        m_recentStepMs = m_recentStepMs > 0 ? 0.8 * m_recentStepMs + 0.2 * s.stepTimeMs : s.stepTimeMs;
        if (s.phase == Phase::Train) {
            ++m_measured;
            m_stepMsSum += s.stepTimeMs;
            m_dataWaitMsSum += s.dataWaitMs;
            m_tokensSum += s.tokens;
        }
    }
    m_charts->appendSamples(d.samples);
    m_charts->appendPhases(d.phases);
    // Memory and step time every frame; loss and histogram (a pass over every sample) every 6th, ~5 Hz.
    m_charts->refresh(++m_frameCount % 6 == 0);
    if (!d.samples.empty())
        updateFigures();
    m_phase->setText(QString::fromLatin1(toString(m_currentPhase)));
    m_longestFrameMs = std::max(m_longestFrameMs, frame.nsecsElapsed() / 1e6);
}

void DashboardView::updateFigures()
{
    m_progress->setValue(static_cast<int>(std::min(m_lastStep, m_totalSteps)));
    const double remaining = static_cast<double>(m_totalSteps - m_lastStep);
    m_eta->setText(m_recentStepMs > 0 ? duration(remaining * m_recentStepMs / 1000.0) : QStringLiteral("–"));
    m_peak->setText(formatBytes(m_peakAllocated, 1));
    if (m_measured == 0)
        return;
    // The charts' last full refresh computed it (a pass over every sample, at most ~5 Hz).
    if (m_charts->percentilesMs()[0] > 0)
        m_stepTime->setText(QStringLiteral("%1 ms").arg(m_charts->percentilesMs()[0], 0, 'f', 1));
    m_tokens->setText(QStringLiteral("%1").arg(static_cast<double>(m_tokensSum) / (m_stepMsSum / 1000.0), 0, 'f', 0));
    m_stall->setText(QStringLiteral("%1 %").arg(100.0 * m_dataWaitMsSum / m_stepMsSum, 0, 'f', 1));
    if (m_peakFlops) {
        const int64_t tokensPerStep = m_tokensSum / m_measured;
        const double flops = modelFlopsPerStep(m_config, tokensPerStep, m_config.train.seqLen) * static_cast<double>(m_measured);
        m_mfu->setText(QStringLiteral("%1 %").arg(100.0 * flops / (m_stepMsSum / 1000.0) / *m_peakFlops, 0, 'f', 1));
    } else {
        m_mfu->setText(tr("n/a (device peak unknown)"));
    }
}

void DashboardView::onFinished(qint64 runId, const PilotSummary &summary, const QString &historyError)
{
    drain();
    m_charts->refresh(true);
    m_frame->stop();
    updateRunningUi();
    m_lastRunId = runId;
    m_lastVerdict = QString::fromLatin1(toString(summary.verdict));
    setChartsLabel(Mode::Pilot, runId, tr("pilot of %1, %2").arg(QString::fromStdString(m_config.name.empty() ? m_config.model.preset : m_config.name), m_lastVerdict));
    if (summary.measuredSteps > 0) {
        m_stepTime->setText(QStringLiteral("%1 ms").arg(summary.stepTimeP50Ms, 0, 'f', 1));
        m_tokens->setText(QStringLiteral("%1").arg(summary.tokensPerSecond, 0, 'f', 0));
        m_stall->setText(QStringLiteral("%1 %").arg(100.0 * summary.dataStallFraction, 0, 'f', 1));
    }
    m_mfu->setText(summary.mfu ? QStringLiteral("%1 %").arg(100.0 * *summary.mfu, 0, 'f', 1) : tr("n/a (device peak unknown)"));
    m_eta->setText(tr("done in %1").arg(duration(m_elapsed.elapsed() / 1000.0)));
    QString text = tr("Run %1: %2. p50 %3 ms, p90 %4 ms, p99 %5 ms over %6 measured steps; peak allocated %7.")
                       .arg(runId)
                       .arg(m_lastVerdict)
                       .arg(summary.stepTimeP50Ms, 0, 'f', 1)
                       .arg(summary.stepTimeP90Ms, 0, 'f', 1)
                       .arg(summary.stepTimeP99Ms, 0, 'f', 1)
                       .arg(summary.measuredSteps)
                       .arg(formatBytes(summary.peakAllocatedBytes, 1));
    if (!summary.message.empty())
        text += QLatin1Char(' ') + QString::fromStdString(summary.message);
    if (!historyError.isEmpty())
        text += QLatin1Char(' ') + historyError;
    m_verdict->setText(text);
    m_verdict->setStyleSheet(summary.verdict == Verdict::Fits ? QStringLiteral("color: #207020;") : QStringLiteral("color: #b02020;"));
    Q_EMIT statusMessage(tr("Pilot run %1 finished: %2").arg(runId).arg(m_lastVerdict));
    Q_EMIT runFinished(runId);
}

void DashboardView::onFailed(const QString &message)
{
    drain();
    m_charts->refresh(true);
    m_frame->stop();
    updateRunningUi();
    m_lastVerdict = QStringLiteral("error");
    m_lastRunId = m_controller->currentRunId();
    setChartsLabel(Mode::Pilot, m_lastRunId, tr("pilot, stopped with an error"));
    m_verdict->setText(tr("The pilot stopped with an error: %1").arg(message));
    m_verdict->setStyleSheet(QStringLiteral("color: #b02020;"));
    // Non-modal: the application keeps running and tests are never blocked by it.
    auto *box = new QMessageBox(QMessageBox::Critical, tr("Pilot failed"), message, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
    Q_EMIT statusMessage(tr("Pilot failed: %1").arg(message));
    if (m_lastRunId > 0)
        Q_EMIT runFinished(m_lastRunId);
}

void DashboardView::onWatchFinished(qint64 runId, const PilotSummary &summary, const QString &stepSource, const QString &deviceSource)
{
    drain();
    m_charts->refresh(true);
    m_frame->stop();
    m_lastRunId = runId;
    m_lastVerdict = QString::fromLatin1(toString(summary.verdict));
    setChartsLabel(Mode::Command, runId, tr("your command, %1").arg(m_lastVerdict));
    m_watchPanel->showFinished(runId, summary, stepSource, deviceSource, m_watch->logPath());
    updateRunningUi();
    Q_EMIT statusMessage(tr("Your command, run %1: %2 (steps from %3)").arg(runId).arg(m_lastVerdict, stepSource));
    Q_EMIT runFinished(runId);
}

void DashboardView::onWatchFailed(const QString &message)
{
    drain();
    m_frame->stop();
    m_lastVerdict = QStringLiteral("error");
    m_lastRunId = 0;
    setChartsLabel(Mode::Command, 0, QString());
    m_watchPanel->showFailed(message);
    updateRunningUi();
    Q_EMIT statusMessage(tr("Watching your command stopped: %1 (once it had started, the run is in the history as failed)").arg(message));
}

void DashboardView::setChartsLabel(Mode mode, int64_t runId, const QString &what)
{
    ModeRun &run = m_modeRun[static_cast<int>(mode)];
    run.id = runId;
    run.configHash = m_configValid ? configHash(m_config) : std::string(); // the run was of the config shown then
    run.text = runId > 0 ? tr("Charts: run %1, %2").arg(runId).arg(what) : QString();
    m_chartsLabel->setText(runId > 0 ? run.text : tr("Charts: the run stopped before it was recorded"));
}

void DashboardView::showRun(qint64 runId)
{
    if (isRunning() || runId <= 0 || m_modeRun[m_modes->currentIndex()].id == runId)
        return; // a live run's own, or already in front
    const std::optional<bool> watched = [&]() -> std::optional<bool> {
        try {
            const HistoryStore store(m_databasePath, HistoryStore::Access::ReadOnlyWhereNeeded);
            const RunRecord r = store.run(runId);
            const bool isWatch = r.kind == QLatin1String("watch");
            ModeRun &run = m_modeRun[static_cast<int>(isWatch ? Mode::Command : Mode::Pilot)];
            if (run.id != runId) {
                run.id = runId;
                run.estimate = std::nullopt; // its estimate line is drawn only by the window that ran it
                const QString what = isWatch ? tr("your command") : tr("%1 of %2").arg(r.kind, r.model);
                run.text = tr("Charts: run %1, %2, %3").arg(runId).arg(what, r.verdict.isEmpty() ? r.status : r.verdict)
                           + (r.sampleCount == 0 ? tr(" (no step samples: its figures are in History)") : QString());
                run.configHash = r.configHash;
            }
            return isWatch;
        } catch (const std::exception &e) {
            m_chartsLabel->setText(tr("Run %1 cannot be read back: %2").arg(runId).arg(QString::fromUtf8(e.what())));
            return std::nullopt;
        }
    }();
    if (!watched)
        return;
    const Mode mode = *watched ? Mode::Command : Mode::Pilot;
    if (m_modes->currentIndex() == static_cast<int>(mode))
        showModeCharts(mode);
    else
        setMode(mode); // shows its charts
}

QString DashboardView::chartsText(const ModeRun &run) const
{
    const bool other = m_configValid && !run.configHash.empty() && run.configHash != configHash(m_config);
    return run.text + (other ? tr(", of another config than the one above") : QString());
}

QString DashboardView::chartsSubject() const { return m_chartsLabel->text(); }

void DashboardView::showModeCharts(Mode mode)
{
    const ModeRun &run = m_modeRun[static_cast<int>(mode)];
    if (run.id <= 0) {
        m_charts->clear();
        m_charts->setEstimateBytes(std::nullopt); // another run's estimate is not this mode's
        m_chartsLabel->setText(mode == Mode::Pilot ? tr("No pilot in this window yet: its charts appear here when you start one.")
                                                   : tr("No command watched in this window yet: its charts appear here when you start it."));
        return;
    }
    try {
        const HistoryStore store(m_databasePath, HistoryStore::Access::ReadOnlyWhereNeeded);
        m_charts->setEstimateBytes(run.estimate);
        m_charts->setRun(store.samples(run.id), store.phases(run.id));
        m_chartsLabel->setText(chartsText(run));
    } catch (const std::exception &e) {
        m_charts->clear();
        m_chartsLabel->setText(tr("Charts of run %1 cannot be read back: %2").arg(run.id).arg(QString::fromUtf8(e.what())));
    }
}

} // namespace pb::ui
