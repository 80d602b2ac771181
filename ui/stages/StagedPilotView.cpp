#include "stages/StagedPilotView.h"

#include "history/HistoryStore.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QFrame>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <exception>

namespace pb::ui {

StagedPilotView::StagedPilotView(QWidget *parent) : QWidget(parent), m_status(kStageCount)
{
    setObjectName(QStringLiteral("stagedPilotView"));
    auto *outer = new QVBoxLayout(this);
    m_modelLabel = new QLabel(this);
    m_modelLabel->setWordWrap(true);
    outer->addWidget(m_modelLabel);
    auto *currentRow = new QHBoxLayout;
    m_currentRunLabel = new QLabel(this);
    m_currentRunLabel->setObjectName(QStringLiteral("currentRunLabel"));
    m_currentRunLabel->setWordWrap(true);
    m_loadRunConfig = new QPushButton(tr("Load its config"), this);
    m_loadRunConfig->setObjectName(QStringLiteral("loadRunConfigButton"));
    m_loadRunConfig->setToolTip(tr("Make the config this run ran with the one in the form (asks first if the form has edits)"));
    connect(m_loadRunConfig, &QPushButton::clicked, this, [this] { Q_EMIT loadRunConfigRequested(m_currentRun); });
    currentRow->addWidget(m_currentRunLabel, 1);
    currentRow->addWidget(m_loadRunConfig, 0, Qt::AlignTop);
    outer->addLayout(currentRow);
    m_currentRunLabel->setVisible(false);
    m_loadRunConfig->setVisible(false);
    auto *grid = new QGridLayout;
    grid->setHorizontalSpacing(14);
    grid->setVerticalSpacing(10);
    const QString cli[] {QString(), QString(), QString(), QString()};
    for (int i = 0; i < kStageCount; ++i) {
        const StageSpec &spec = checklistStages()[static_cast<size_t>(i)];
        auto *badge = new QLabel(this);
        badge->setObjectName(QStringLiteral("stageBadge%1").arg(i));
        badge->setAlignment(Qt::AlignCenter);
        badge->setFixedSize(110, 28);
        auto *title = new QLabel(QStringLiteral("<b>%1</b><br><span style='color:gray'>%2</span>").arg(QCoreApplication::translate("Checklist", spec.title), QCoreApplication::translate("Checklist", spec.rule)), this);
        title->setWordWrap(true);
        auto *evidence = new QLabel(this);
        evidence->setObjectName(QStringLiteral("stageEvidence%1").arg(i));
        evidence->setWordWrap(true);
        evidence->setTextInteractionFlags(Qt::TextSelectableByMouse);
        grid->addWidget(badge, i * 2, 0, Qt::AlignTop);
        grid->addWidget(title, i * 2, 1);
        grid->addWidget(evidence, i * 2 + 1, 1);
        if (i == 3) {
            auto *b = new QPushButton(tr("Open comparison"), this);
            connect(b, &QPushButton::clicked, this, &StagedPilotView::compareRequested);
            grid->addWidget(b, i * 2, 2, Qt::AlignTop);
        } else if (i == 2) {
            m_restoreButton = new QPushButton(tr("Run restore check"), this);
            m_restoreButton->setObjectName(QStringLiteral("restoreCheckButton"));
            m_restoreButton->setToolTip(tr("4 steps, checkpoint, restore in a fresh pilotbench-cli process, 4 more steps; compared with 8 uninterrupted steps"));
            connect(m_restoreButton, &QPushButton::clicked, this, &StagedPilotView::restoreCheckRequested);
            grid->addWidget(m_restoreButton, i * 2, 2, Qt::AlignTop);
        } else if (i == 1) {
            auto *box = new QWidget(this);
            auto *col = new QVBoxLayout(box);
            col->setContentsMargins(0, 0, 0, 0);
            auto *opts = new QHBoxLayout;
            m_scaleGpus = new QSpinBox(box);
            m_scaleGpus->setObjectName(QStringLiteral("scaleGpus"));
            m_scaleGpus->setRange(2, 64);
            m_scaleGpus->setValue(2);
            m_scaleGpus->setSuffix(tr(" ranks"));
            m_scaleStrategy = new QComboBox(box);
            m_scaleStrategy->setObjectName(QStringLiteral("scaleStrategy"));
            for (const auto st : {ParallelStrategy::Ddp, ParallelStrategy::Zero2, ParallelStrategy::Fsdp})
                m_scaleStrategy->addItem(QString::fromLatin1(toString(st)), static_cast<int>(st));
            opts->addWidget(m_scaleGpus);
            opts->addWidget(m_scaleStrategy);
            col->addLayout(opts);
            m_scaleButton = new QPushButton(tr("Run scaling step"), box);
            m_scaleButton->setObjectName(QStringLiteral("scaleStepButton"));
            m_scaleButton->setToolTip(tr("A one-process baseline at the ranks' effective batch, then N ranks (GPUs on a CUDA host, CPU shares otherwise) "
                                         "in a pilotbench-cli worker process; recorded as a scale run. On the rented machine: "
                                         "pilotbench-cli scale --config FILE --gpus N."));
            connect(m_scaleButton, &QPushButton::clicked, this, [this] {
                if (m_scaleRunning)
                    Q_EMIT scaleCancelRequested();
                else
                    Q_EMIT scaleStepRequested(m_scaleGpus->value(), static_cast<ParallelStrategy>(m_scaleStrategy->currentData().toInt()));
            });
            col->addWidget(m_scaleButton);
            m_scaleProgress = new QLabel(box);
            m_scaleProgress->setObjectName(QStringLiteral("scaleProgressLabel"));
            m_scaleProgress->setWordWrap(true);
            m_scaleProgress->setMaximumWidth(260);
            m_scaleProgress->setStyleSheet(QStringLiteral("color: gray;"));
            col->addWidget(m_scaleProgress);
            grid->addWidget(box, i * 2, 2, 2, 1, Qt::AlignTop);
        } else if (i == 0) {
            auto *budget = new QPushButton(tr("Show budget"), this);
            connect(budget, &QPushButton::clicked, this, &StagedPilotView::showBudgetRequested);
            grid->addWidget(budget, i * 2, 2, Qt::AlignTop);
            auto *run = new QPushButton(tr("Run pilot"), this);
            connect(run, &QPushButton::clicked, this, &StagedPilotView::runPilotRequested);
            grid->addWidget(run, i * 2 + 1, 2, Qt::AlignTop);
        }
        if (!cli[i].isEmpty()) {
            auto *hint = new QLabel(cli[i], this);
            hint->setWordWrap(true);
            hint->setMaximumWidth(320);
            hint->setStyleSheet(QStringLiteral("color: gray;"));
            grid->addWidget(hint, i * 2, 2, 2, 1, Qt::AlignTop);
        }
        m_badges.push_back(badge);
        m_evidence.push_back(evidence);
    }
    grid->setColumnStretch(1, 1);
    outer->addLayout(grid);
    auto *refreshButton = new QPushButton(tr("Refresh evidence"), this);
    connect(refreshButton, &QPushButton::clicked, this, &StagedPilotView::refresh);
    auto *row = new QHBoxLayout;
    row->addStretch(1);
    row->addWidget(refreshButton);
    outer->addLayout(row);
    outer->addStretch(1);
    refresh();
}

void StagedPilotView::setRestoreCheckRunning(bool running)
{
    m_restoreRunning = running;
    m_restoreButton->setEnabled(!running);
    m_restoreButton->setText(running ? tr("Restore check running…") : tr("Run restore check"));
}

void StagedPilotView::setScaleStepRunning(bool running)
{
    m_scaleRunning = running;
    m_scaleButton->setText(running ? tr("Cancel scaling step") : tr("Run scaling step"));
    m_scaleGpus->setEnabled(!running);
    m_scaleStrategy->setEnabled(!running);
    if (!running)
        m_scaleProgress->clear();
}

void StagedPilotView::setScaleProgress(int done, int total, const QString &text)
{
    m_scaleProgress->setText(tr("%1/%2 %3").arg(done).arg(total).arg(text));
}

void StagedPilotView::setStore(HistoryStore *store)
{
    m_store = store;
    refresh();
}

void StagedPilotView::setModel(const QString &model)
{
    if (model == m_model)
        return;
    m_model = model;
    markStale();
}

void StagedPilotView::setConfigHash(const std::string &hash)
{
    if (hash == m_configHash)
        return;
    m_configHash = hash;
    updateCurrentRunLine();
    markStale();
}

void StagedPilotView::setCurrentRun(qint64 runId)
{
    m_currentRun = runId;
    updateCurrentRunLine();
}

void StagedPilotView::updateCurrentRunLine()
{
    m_loadRunConfig->setVisible(false);
    m_currentRunLabel->setVisible(m_currentRun > 0);
    if (m_currentRun <= 0 || !m_store)
        return;
    try {
        const RunRecord r = m_store->run(m_currentRun);
        const QString what = tr("Current run: run %1, %2 of %3 (%4)").arg(m_currentRun).arg(r.kind, r.model, r.verdict.isEmpty() ? r.status : r.verdict);
        const bool same = !m_configHash.empty() && r.configHash == m_configHash;
        m_currentRunLabel->setText(same ? tr("%1: it ran the config in the form, so it counts as evidence below.").arg(what)
                                        : tr("%1: it ran another config than the one in the form, so the stages below are not its.").arg(what));
        m_loadRunConfig->setVisible(!same && !r.config.isEmpty());
    } catch (const std::exception &e) {
        m_currentRunLabel->setText(tr("Current run %1 cannot be read: %2").arg(m_currentRun).arg(QString::fromUtf8(e.what())));
    }
}

void StagedPilotView::markStale()
{
    m_stale = true;
    if (isVisible())
        refresh();
}

void StagedPilotView::setCatalog(const Catalog &catalog)
{
    m_catalog = catalog;
    markStale();
}

void StagedPilotView::showEvent(QShowEvent *event)
{
    QWidget::showEvent(event);
    if (m_stale)
        refresh();
}

void StagedPilotView::refresh()
{
    updateCurrentRunLine(); // the current run's record may have changed (a live run ended)
    m_stale = false;
    m_modelLabel->setText(tr("Evidence for model <b>%1</b>%2: the best evidence of each kind in the history (the newest run that passes).")
                              .arg(m_model.isEmpty() ? tr("(any)") : m_model.toHtmlEscaped(),
                                   m_configHash.empty() ? QString() : tr(", config %1").arg(QString::fromStdString(m_configHash.substr(0, 12)))));
    for (int i = 0; i < kStageCount; ++i) {
        try {
            if (!m_store)
                m_status[static_cast<size_t>(i)] = {StageState::Missing, 0, tr("No history database open.")};
            else
                m_status[static_cast<size_t>(i)] = evaluateStage(*m_store, i, m_model, m_configHash, m_catalog ? &*m_catalog : nullptr);
        } catch (const std::exception &e) {
            m_status[static_cast<size_t>(i)] = {StageState::Missing, 0, QString::fromUtf8(e.what())};
        }
        const StageStatus &s = m_status[static_cast<size_t>(i)];
        QLabel *badge = m_badges[static_cast<size_t>(i)];
        switch (s.state) {
        case StageState::Passed:
            badge->setText(tr("✔ passed"));
            badge->setStyleSheet(QStringLiteral("background:#2e7d32; color:white; border-radius:4px; font-weight:bold;"));
            break;
        case StageState::Stale:
            badge->setText(tr("⟳ out of date"));
            badge->setStyleSheet(QStringLiteral("background:#e08a00; color:white; border-radius:4px; font-weight:bold;"));
            break;
        case StageState::Failed:
            badge->setText(tr("✘ not passed"));
            badge->setStyleSheet(QStringLiteral("background:#c62828; color:white; border-radius:4px; font-weight:bold;"));
            break;
        case StageState::Missing:
            badge->setText(tr("○ no evidence"));
            badge->setStyleSheet(QStringLiteral("background:#9e9e9e; color:white; border-radius:4px;"));
            break;
        }
        m_evidence[static_cast<size_t>(i)]->setText(s.evidence);
    }
}

} // namespace pb::ui
