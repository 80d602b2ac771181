#include "config/ConfigView.h"

#include "config/HfImport.h"
#include "config/MemoryBudgetWidget.h"
#include "config/Presets.h"
#include "config/RunConfigForm.h"
#include "config/RunConfigJson.h"
#include "estimate/CardCapacities.h"
#include "estimate/MemoryEstimator.h"
#include "util/Units.h"
#include "workflow/StoredCalibration.h"

#include <QComboBox>
#include <QFileDialog>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QPushButton>
#include <QJsonDocument>
#include <QScrollArea>
#include <QSettings>
#include <QSignalBlocker>
#include <QSplitter>
#include <QVBoxLayout>

#include <spdlog/spdlog.h>

#include <exception>

namespace pb::ui {

ConfigView::ConfigView(QWidget *parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("configView"));
    auto *outer = new QVBoxLayout(this);

    auto *bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("Preset:"), this));
    m_presets = new QComboBox(this);
    m_presets->setObjectName(QStringLiteral("presetCombo"));
    m_presets->addItem(tr("(custom)"));
    m_presets->addItems(presetNames());
    bar->addWidget(m_presets);
    auto *open = new QPushButton(tr("Open…"), this);
    auto *save = new QPushButton(tr("Save…"), this);
    auto *import = new QPushButton(tr("Import Hugging Face…"), this);
    m_run = new QPushButton(tr("Run pilot"), this);
    m_run->setObjectName(QStringLiteral("runPilotButton"));
    open->setToolTip(tr("Open a config file (Ctrl+O)"));
    save->setToolTip(tr("Save the config to a file (Ctrl+S)"));
    import->setToolTip(tr("Import the shape from a Hugging Face model folder holding config.json"));
    m_run->setToolTip(tr("Run a measured pilot of this config on the dashboard (Ctrl+R)"));
    bar->addWidget(open);
    bar->addWidget(save);
    bar->addWidget(import);
    bar->addStretch(1);
    m_source = new QLabel(this);
    m_source->setObjectName(QStringLiteral("configSource"));
    bar->addWidget(m_source);
    bar->addWidget(m_run);
    outer->addLayout(bar);

    auto *split = new QSplitter(Qt::Horizontal, this);
    auto *scroll = new QScrollArea(split);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    m_form = new RunConfigForm(scroll);
    scroll->setWidget(m_form);
    split->addWidget(scroll);

    auto *right = new QGroupBox(tr("Memory budget per card (peak of the whole run)"), split);
    auto *rl = new QVBoxLayout(right);
    // Ten cards of 66 px do not fit a 800 px window: the bars scroll, the summary stays below.
    auto *budgetScroll = new QScrollArea(right);
    budgetScroll->setWidgetResizable(true);
    budgetScroll->setFrameShape(QFrame::NoFrame);
    m_budget = new MemoryBudgetWidget(budgetScroll);
    budgetScroll->setWidget(m_budget);
    rl->addWidget(budgetScroll, 1);
    m_summary = new QLabel(right);
    m_summary->setObjectName(QStringLiteral("configSummary"));
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    rl->addWidget(m_summary);
    split->addWidget(right);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setSizes({790, 560});
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    outer->addWidget(split, 1);

    connect(m_form, &RunConfigForm::changed, this, [this] {
        recompute();
        updateEdited();
        Q_EMIT configChanged();
    });
    connect(m_presets, &QComboBox::currentIndexChanged, this, [this](int index) {
        if (index <= 0) {
            m_presetIndex = index;
            return;
        }
        const QString name = presetNames().value(index - 1);
        if (m_edited) {
            const QString question = tr("Load preset %1 and discard your edits to %2?").arg(name, m_sourceText);
            const bool discard = m_confirmDiscard ? m_confirmDiscard(question)
                                                  : QMessageBox::question(this, tr("Discard edits?"), question) == QMessageBox::Yes;
            if (!discard) {
                const QSignalBlocker block(m_presets);
                m_presets->setCurrentIndex(m_presetIndex);
                return;
            }
        }
        loadPreset(name);
    });
    connect(open, &QPushButton::clicked, this, &ConfigView::openDialog);
    connect(save, &QPushButton::clicked, this, &ConfigView::saveDialog);
    connect(import, &QPushButton::clicked, this, &ConfigView::importHfDialog);
    connect(m_run, &QPushButton::clicked, this, &ConfigView::runPilotRequested);

    loadPreset(defaultPresetName());
}

RunConfig ConfigView::config() const
{
    return m_form->config();
}

bool ConfigView::isValid() const
{
    return m_form->isValid();
}

void ConfigView::setConfig(const RunConfig &config)
{
    m_form->setConfig(config);
    // What the form holds now (its own normalisation included) is the unedited state.
    m_loadedJson = QJsonDocument(toJson(m_form->config())).toJson(QJsonDocument::Compact);
    m_edited = false;
    {
        const QSignalBlocker block(m_presets);
        const int index = static_cast<int>(presetNames().indexOf(QString::fromStdString(config.model.preset))) + 1;
        m_presets->setCurrentIndex(index);
        m_presetIndex = index;
    }
    updateEdited();
}

bool ConfigView::loadConfigOfRun(const RunConfig &config, const QString &source)
{
    if (m_edited) {
        const QString question = tr("Load the config of %1 and discard your edits to %2?").arg(source, m_sourceText);
        if (!(m_confirmDiscard ? m_confirmDiscard(question) : QMessageBox::question(this, tr("Discard edits?"), question) == QMessageBox::Yes))
            return false;
    }
    m_file.clear();
    m_sourceText = tr("config of %1").arg(source);
    setConfig(config);
    recompute();
    Q_EMIT configChanged();
    return true;
}

void ConfigView::updateEdited()
{
    m_edited = m_form->isValid() ? QJsonDocument(toJson(m_form->config())).toJson(QJsonDocument::Compact) != m_loadedJson : true;
    const QString suffix = tr(" (edited)");
    const QStringList names = presetNames();
    for (int i = 1; i < m_presets->count(); ++i)
        m_presets->setItemText(i, names.value(i - 1) + (m_edited && i == m_presets->currentIndex() ? suffix : QString()));
    m_source->setText(m_sourceText + (m_edited && !m_sourceText.isEmpty() ? suffix : QString()));
}

void ConfigView::loadPreset(const QString &name)
{
    try {
        m_sourceText = tr("preset %1").arg(name);
        m_source->setText(m_sourceText);
        setConfig(presetConfig(name));
        m_file.clear();
    } catch (const std::exception &e) {
        QMessageBox::warning(this, tr("Preset"), QString::fromUtf8(e.what()));
    }
}

bool ConfigView::loadFile(const QString &path, QString *error)
{
    try {
        const RunConfig loaded = loadRunConfig(path);
        m_sourceText = QFileInfo(path).fileName();
        setConfig(loaded);
        m_file = path;
        QSettings().setValue(QStringLiteral("config/lastFile"), path);
        Q_EMIT statusMessage(tr("Loaded %1").arg(path));
        return true;
    } catch (const std::exception &e) {
        if (error)
            *error = QString::fromUtf8(e.what());
        return false;
    }
}

bool ConfigView::saveFile(const QString &path, QString *error)
{
    try {
        saveRunConfig(config(), path);
        m_file = path;
        // What was saved is the new unedited state.
        m_sourceText = QFileInfo(path).fileName();
        m_loadedJson = QJsonDocument(toJson(config())).toJson(QJsonDocument::Compact);
        updateEdited();
        QSettings().setValue(QStringLiteral("config/lastFile"), path);
        Q_EMIT statusMessage(tr("Saved %1").arg(path));
        return true;
    } catch (const std::exception &e) {
        if (error)
            *error = QString::fromUtf8(e.what());
        return false;
    }
}

bool ConfigView::importHf(const QString &folder, QString *error)
{
    try {
        const RunConfig imported = importHfConfig(folder);
        m_sourceText = tr("imported %1").arg(QFileInfo(folder).fileName());
        setConfig(imported);
        m_file.clear();
        Q_EMIT statusMessage(tr("Imported %1").arg(folder));
        return true;
    } catch (const std::exception &e) {
        if (error)
            *error = QString::fromUtf8(e.what());
        return false;
    }
}

void ConfigView::openDialog()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Open run config"), QFileInfo(m_file).absolutePath(), tr("Run configs (*.json);;All files (*)"));
    QString error;
    if (!path.isEmpty() && !loadFile(path, &error))
        QMessageBox::warning(this, tr("Open run config"), error);
}

void ConfigView::saveDialog()
{
    if (!isValid()) {
        QMessageBox::warning(this, tr("Save run config"), tr("The config has problems (shown in red); fix them before saving."));
        return;
    }
    const QString path = QFileDialog::getSaveFileName(this, tr("Save run config"), m_file.isEmpty() ? QStringLiteral("run.json") : m_file, tr("Run configs (*.json)"));
    QString error;
    if (!path.isEmpty() && !saveFile(path, &error))
        QMessageBox::warning(this, tr("Save run config"), error);
}

void ConfigView::importHfDialog()
{
    const QString folder = QFileDialog::getExistingDirectory(this, tr("Hugging Face model folder (holding config.json)"));
    QString error;
    if (!folder.isEmpty() && !importHf(folder, &error))
        QMessageBox::warning(this, tr("Import Hugging Face model"), error);
}

void ConfigView::setHistoryDatabase(const QString &path)
{
    m_database = path;
    reloadCalibration();
}

// Sorted out by card here, once, rather than on every keystroke's recompute.
void ConfigView::reloadCalibration()
{
    std::vector<CalibrationResidual> stored;
    if (!m_database.isEmpty()) {
        try {
            stored = storedResiduals(m_database);
        } catch (const std::exception &e) {
            spdlog::warn("memory budget without calibration: {}", e.what());
        }
    }
    m_cardResiduals.clear();
    for (const CardCapacity &card : cardCapacities())
        m_cardResiduals.push_back(residualsForCard(stored, card));
    recompute();
}

void ConfigView::recompute()
{
    m_run->setEnabled(m_form->isValid());
    if (!m_form->isValid()) {
        m_budget->setMessage(tr("Fix the fields in red to see the memory budget."));
        m_summary->clear();
        return;
    }
    const RunConfig c = config();
    std::vector<CardBudget> budgets;
    const ConfigEstimator estimator(c); // reads the parameter table once for every card and the CPU line
    const auto &cards = cardCapacities();
    for (size_t i = 0; i < cards.size(); ++i) {
        const CardCapacity &card = cards[i];
        CardBudget b;
        b.cardName = QString::fromStdString(card.name);
        try {
            EstimateOptions options;
            options.device = DeviceKind::Cuda;
            options.card = card.id;
            if (i < m_cardResiduals.size()) // none before a history is set
                options.calibration = m_cardResiduals[i];
            b.estimate = estimator.estimate(options);
        } catch (const std::exception &e) {
            b.error = QString::fromUtf8(e.what());
        }
        budgets.push_back(std::move(b));
    }
    m_budget->setBudgets(std::move(budgets));

    const QLocale locale;
    const ParamCounts params = countParameters(c);
    QString text = tr("Parameters: %1 (trainable %2%4). Tokens per optimizer step: %3.")
                       .arg(locale.toString(static_cast<qlonglong>(params.total)), locale.toString(static_cast<qlonglong>(params.trainable)),
                            locale.toString(static_cast<qlonglong>(c.train.seqLen * c.train.microBatch * c.train.gradAccum)),
                            params.active != params.total ? tr("; %1 active per token").arg(locale.toString(static_cast<qlonglong>(params.active))) : QString());
    try {
        EstimateOptions cpu;
        cpu.device = DeviceKind::Cpu;
        const MemoryEstimate e = estimator.estimate(cpu);
        text += tr(" CPU pilot tensor peak: %1 (%2 phase).").arg(formatBytes(e.peakAllocatedBytes, 1), QString::fromStdString(e.peakPhase));
    } catch (const std::exception &) {
        // The CPU line is a convenience; the per-card rows above already show any refusal.
    }
    m_summary->setText(text);
}

} // namespace pb::ui
