#include "compare/CompareView.h"

#include "compare/CostHoursChart.h"
#include "compare/ElidedLinesLabel.h"
#include "compare/HoursText.h"
#include "config/RunConfigJson.h"
#include "util/Units.h"
#include "history/HistoryStore.h"
#include "report/ReportCostChart.h"
#include "workflow/DecisionRun.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QFileInfo>
#include <QFrame>
#include <QFutureWatcher>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QPushButton>
#include <QLabel>
#include <QPointer>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pb::ui {
namespace {

struct Outcome {
    std::optional<Comparison> comparison;
    RunConfig config;                    // the config compared: a decision is recorded under it
    QString error;
    QString recorded;                    // the config's recorded decision and whether it still holds
    bool recordedStale = false;
};

QString qs(const std::string &s) { return QString::fromStdString(s); }

QString stepTime(double ms)
{
    return ms < 1 ? QString::number(ms * 1000, 'f', 2) + QStringLiteral(" \u00b5s") : QString::number(ms, 'f', 1) + QStringLiteral(" ms");
}

Outcome compute(const RunConfig &config, const Catalog &catalog, const ComparisonRequest &request, const QString &historyPath)
{
    Outcome out;
    try {
        out.config = config;
        out.comparison = decide(config, catalog, request, historyPath); // this thread's own connection
        if (!historyPath.isEmpty() && QFileInfo::exists(historyPath)) {
            const HistoryStore store(historyPath, HistoryStore::Access::ReadOnlyWhereNeeded);
            if (const auto d = currentDecision(store, configHash(config))) {
                const std::string why = decisionStaleness(store, *d, catalog);
                out.recordedStale = !why.empty();
                out.recorded = QCoreApplication::translate("CompareView", "Recorded decision (run %1): %2 x%3, %4.%5")
                                   .arg(d->id)
                                   .arg(d->summary.value(QStringLiteral("card_name")).toString())
                                   .arg(d->summary.value(QStringLiteral("gpus")).toInt())
                                   .arg(d->summary.value(QStringLiteral("billing")).toString())
                                   .arg(why.empty() ? QString()
                                                    : QCoreApplication::translate("CompareView", " Out of date: %1; record again to replace it.").arg(qs(why)));
            }
        }
    } catch (const std::exception &e) {
        out.error = QString::fromUtf8(e.what());
    }
    return out;
}

} // namespace

CompareView::CompareView(QWidget *parent) : QWidget(parent)
{
    try {
        m_catalog = builtInCatalog();
    } catch (const std::exception &e) {
        spdlog::error("compare view: built-in catalog unusable: {}", e.what());
    }
    auto *layout = new QVBoxLayout(this);

    auto *controls = new QHBoxLayout;
    m_gpus = new QComboBox(this);
    m_strategy = new QComboBox(this);
    m_strategy->setObjectName(QStringLiteral("strategySelector"));
    m_term = new QComboBox(this);
    m_strategy->addItem(tr("auto (cheapest that fits)"), -1);
    for (const auto s : {ParallelStrategy::Ddp, ParallelStrategy::Fsdp, ParallelStrategy::Zero1, ParallelStrategy::Zero2, ParallelStrategy::Zero3})
        m_strategy->addItem(QString::fromLatin1(toString(s)), static_cast<int>(s));
    controls->addWidget(new QLabel(tr("GPUs:"), this));
    controls->addWidget(m_gpus);
    controls->addWidget(new QLabel(tr("Multi-GPU strategy:"), this));
    controls->addWidget(m_strategy);
    m_bucketLabel = new QLabel(tr("Buckets:"), this);
    m_bucket = new QSpinBox(this);
    m_bucket->setObjectName(QStringLiteral("bucketSelector"));
    m_bucket->setRange(1, 16384);
    m_bucket->setValue(25);
    m_bucket->setSuffix(tr(" MiB"));
    m_bucket->setKeyboardTracking(false); // one comparison when the number is entered, not one a keystroke
    m_bucket->setToolTip(tr("The pair of gradient buckets ZeRO-1 and ZeRO-2 reduce through, on every GPU: 25 MiB is PyTorch DDP's "
                            "bucket_cap_mb, 954 MiB DeepSpeed stage 2's default (5e8 elements of bf16)."));
    m_bucketLabel->setToolTip(m_bucket->toolTip());
    controls->addWidget(m_bucketLabel);
    controls->addWidget(m_bucket);
    controls->addWidget(new QLabel(tr("Term:"), this));
    controls->addWidget(m_term);
    m_stack = new QComboBox(this);
    m_stack->setObjectName(QStringLiteral("stackSelector"));
    m_stack->addItem(tr("any stack"), -1);
    m_stack->addItem(tr("CUDA only"), static_cast<int>(SoftwareStack::Cuda));
    m_stack->addItem(tr("ROCm only"), static_cast<int>(SoftwareStack::Rocm));
    controls->addWidget(m_stack);
    controls->addStretch(1);
    layout->addLayout(controls);
    // The basis names the pilot, its device, kernels and numerical format: on a line of its own
    // under the controls, so that it keeps the window's width (beside them it wrapped into a column
    // of single words in a 960 px window, and pushed the tiles under the table).
    m_basis = new QLabel(this);
    m_basis->setObjectName(QStringLiteral("comparisonBasis"));
    m_basis->setWordWrap(true);
    m_basis->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    layout->addWidget(m_basis);

    m_tiles = new QWidget(this);
    m_tilesLayout = new QGridLayout(m_tiles);
    m_tilesLayout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_tiles);

    m_table = new QTableWidget(this);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->verticalHeader()->setVisible(false);
    m_table->setWordWrap(false);
    m_costChart = new CostHoursChart(this);
    m_costChart->setObjectName(QStringLiteral("costHoursChart"));
    // The table and the picture of it share the height; people read the picture first.
    auto *split = new QHBoxLayout;
    split->addWidget(m_table, 3);
    split->addWidget(m_costChart, 2);
    layout->addLayout(split, 1);

    m_recommendation = new QLabel(this);
    m_recommendation->setWordWrap(true);
    m_recommendation->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_recommendation->setTextFormat(Qt::PlainText);
    layout->addWidget(m_recommendation);
    auto *decisionRow = new QHBoxLayout;
    m_record = new QPushButton(tr("Record decision"), this);
    m_record->setObjectName(QStringLiteral("recordDecisionButton"));
    m_record->setToolTip(tr("Keep the selected configuration (or, with none selected, the recommended one) as this config's term decision: stage 4 of the checklist."));
    m_record->setEnabled(false);
    connect(m_record, &QPushButton::clicked, this, [this] { recordDecision(); });
    m_decisionLabel = new QLabel(this);
    m_decisionLabel->setObjectName(QStringLiteral("decisionLabel"));
    m_decisionLabel->setWordWrap(true);
    decisionRow->addWidget(m_record);
    decisionRow->addWidget(m_decisionLabel, 1);
    layout->addLayout(decisionRow);
    m_notice = new QLabel(this);
    m_notice->setWordWrap(true);
    m_notice->setTextFormat(Qt::PlainText);
    m_notice->setStyleSheet(QStringLiteral("color: palette(mid);"));
    layout->addWidget(m_notice);

    rebuildSelectors();
    connect(m_gpus, &QComboBox::currentIndexChanged, this, &CompareView::refresh);
    connect(m_strategy, &QComboBox::currentIndexChanged, this, &CompareView::refresh);
    connect(m_term, &QComboBox::currentIndexChanged, this, &CompareView::refresh);
    connect(m_stack, &QComboBox::currentIndexChanged, this, &CompareView::refresh);
    connect(m_bucket, &QSpinBox::valueChanged, this, &CompareView::refresh);
    auto showBucket = [this] {
        const int strategy = m_strategy->currentData().toInt();
        const bool zero = strategy < 0 || strategy == static_cast<int>(ParallelStrategy::Zero1) || strategy == static_cast<int>(ParallelStrategy::Zero2);
        m_bucketLabel->setVisible(zero);
        m_bucket->setVisible(zero);
    };
    connect(m_strategy, &QComboBox::currentIndexChanged, this, showBucket);
    showBucket();
}

CompareView::~CompareView() = default;

void CompareView::rebuildSelectors()
{
    const QSignalBlocker blockGpus(m_gpus);
    const QSignalBlocker blockTerm(m_term);
    m_gpus->clear();
    m_gpus->addItem(tr("all counts"), 0);
    for (int g : m_catalog.gpuCounts)
        m_gpus->addItem(QString::number(g), g);
    m_term->clear();
    m_term->addItem(tr("cheapest billing"), QString());
    m_term->addItem(tr("on demand"), QStringLiteral("on_demand"));
    for (const auto &t : m_catalog.terms)
        m_term->addItem(qs(t.label), qs(t.id));
}

int CompareView::selectedGpus() const { return m_gpus->currentData().toInt(); }

std::string CompareView::selectedTerm() const { return m_term->currentData().toString().toStdString(); }

void CompareView::setConfig(const RunConfig &config)
{
    m_config = config;
    refresh();
}

void CompareView::setCatalog(const Catalog &catalog)
{
    m_catalog = catalog;
    rebuildSelectors();
    refresh();
}

void CompareView::setHistoryPath(const QString &databasePath)
{
    m_historyPath = databasePath;
    refresh();
}

void CompareView::refresh()
{
    if (!m_config)
        return;
    ComparisonRequest request;
    if (selectedGpus() > 0)
        request.gpuCounts = {selectedGpus()};
    if (m_strategy->currentData().toInt() >= 0)
        request.multiGpuStrategy = static_cast<ParallelStrategy>(m_strategy->currentData().toInt());
    request.termId = selectedTerm();
    if (m_stack->currentData().toInt() >= 0)
        request.stack = static_cast<SoftwareStack>(m_stack->currentData().toInt());
    request.bucketBytes = static_cast<int64_t>(m_bucket->value()) << 20;
    const quint64 generation = ++m_generation;
    m_running = true;
    m_basis->setText(tr("comparing..."));
    auto *watcher = new QFutureWatcher<Outcome>(this);
    connect(watcher, &QFutureWatcher<Outcome>::finished, this, [this, watcher, generation] {
        watcher->deleteLater();
        if (generation != m_generation)
            return; // superseded by a newer request
        m_running = false;
        const Outcome outcome = watcher->result();
        m_comparedConfig = outcome.config;
        if (outcome.comparison) {
            showComparison(*outcome.comparison);
            m_decisionLabel->setText(outcome.recorded);
            m_decisionLabel->setStyleSheet(outcome.recordedStale ? QStringLiteral("color: #a05a00; font-weight: bold;") : QString());
        } else {
            showError(outcome.error);
        }
    });
    // Until the new comparison is shown, the old one cannot be recorded under the new config.
    m_record->setEnabled(false);
    watcher->setFuture(QtConcurrent::run(compute, *m_config, m_catalog, request, m_historyPath));
}

void CompareView::setComparison(const Comparison &comparison)
{
    ++m_generation; // a running computation no longer applies
    m_running = false;
    m_comparedConfig.reset(); // computed elsewhere: shown, not recorded from here
    showComparison(comparison);
}

int64_t CompareView::recordDecision(int row)
{
    if (!m_comparison || !m_comparedConfig || m_running)
        return 0;
    if (row < 0) {
        const auto selected = m_table->selectionModel() ? m_table->selectionModel()->selectedRows() : QModelIndexList {};
        row = selected.isEmpty() ? m_comparison->recommendedIndex : selected.first().row();
    }
    try {
        const int64_t runId = pb::recordDecision(m_historyPath, *m_comparedConfig, *m_comparison, row);
        const auto &r = m_comparison->rows[static_cast<size_t>(row)];
        m_decisionLabel->setText(tr("Decision recorded as run %1: %2 x%3 (%4), %5 %6.")
                                     .arg(runId).arg(qs(r.cardName)).arg(r.gpus).arg(QString::fromLatin1(toString(r.strategy)))
                                     .arg(r.cost.totalCost, 0, 'f', 2).arg(qs(m_comparison->currency)));
        m_decisionLabel->setStyleSheet(QString());
        Q_EMIT decisionRecorded(runId);
        return runId;
    } catch (const std::exception &e) {
        m_decisionLabel->setText(tr("Not recorded: %1").arg(QString::fromUtf8(e.what())));
        m_decisionLabel->setStyleSheet(QStringLiteral("color: #b00020;"));
        return 0;
    }
}

void CompareView::showError(const QString &message)
{
    m_record->setEnabled(false);
    m_error = message;
    m_comparison.reset();
    m_table->setRowCount(0);
    m_costChart->clear();
    m_recommendation->setText(tr("No comparison: %1").arg(message));
    m_basis->clear();
    Q_EMIT comparisonChanged();
}

void CompareView::rebuildTiles(const Comparison &c)
{
    while (QLayoutItem *item = m_tilesLayout->takeAt(0)) {
        delete item->widget();
        delete item;
    }
    // Each tile carries its card's colour in the chart, so the tiles are the chart's legend (ten
    // cards do not fit a legend column at the chart's height); a card without a tile keeps its entry.
    const CostHoursPlot plot = costHoursPlot(c);
    int named = 0;
    int index = 0;
    for (const auto &card : m_catalog.cards) {
        if (std::none_of(c.rows.begin(), c.rows.end(), [&card](const ComparisonRow &r) { return r.cardId == card.id; }))
            continue; // not compared (another stack, or a comparison made on another catalog)
        // The card's cheapest fitting row (the recommended one when it is this card's).
        const ComparisonRow *best = nullptr;
        bool recommended = false;
        for (const auto &r : c.rows) {
            if (r.cardId != card.id || !r.fits)
                continue;
            recommended = recommended || r.recommended;
            if (!best || r.recommended || (!best->recommended && r.cost.totalCost < best->cost.totalCost))
                best = &r;
        }
        auto *tile = new QFrame(m_tiles);
        tile->setFrameShape(QFrame::StyledPanel);
        tile->setObjectName(QStringLiteral("cardTile"));
        tile->setProperty("cardId", qs(card.id));
        if (recommended)
            tile->setStyleSheet(QStringLiteral("#cardTile { background: #d8f0d8; border: 2px solid #3a8a3a; }"));
        auto *v = new QVBoxLayout(tile);
        v->setContentsMargins(6, 4, 6, 4);
        v->setSpacing(2);
        // Every line is elided to the tile's width and shown whole in the tooltip, so every tile
        // keeps the same lines at any window width (a long name: the RTX PRO 6000's).
        auto *name = new ElidedLinesLabel(qs(card.name), tile);
        QFont bold = name->font();
        bold.setBold(true);
        name->setFont(bold);
        name->setToolTip(qs(card.name));
        auto *nameRow = new QHBoxLayout;
        nameRow->setSpacing(5);
        const auto plotted = std::find_if(plot.cards.begin(), plot.cards.end(), [&card](const CostHoursCard &p) { return p.cardId == qs(card.id); });
        if (plotted != plot.cards.end())
            ++named;
        if (plotted == plot.cards.end() || plotted->points.empty()) {
            nameRow->addSpacing(10); // no points of its own: the names still line up
        } else {
            auto *swatch = new QLabel(tile);
            swatch->setObjectName(QStringLiteral("tileSwatch"));
            swatch->setFixedSize(10, 10);
            swatch->setStyleSheet(QStringLiteral("background: %1; border: 1px solid %2; border-radius: 5px;")
                                      .arg(plotted->color.name(), plotted->color.darker(140).name()));
            swatch->setToolTip(tr("%1's points in the chart").arg(shortCardName(plotted->name)));
            nameRow->addWidget(swatch);
        }
        nameRow->addWidget(name, 1);
        v->addLayout(nameRow);
        // Three short lines of specifications (the interconnect and the price's source in the
        // tooltip): ten tiles share the height with the table and the chart.
        auto *specs = new ElidedLinesLabel(tr("%1 GB · %2 TB/s\nBF16 %3 TF%4\nprice as of %5")
                                               .arg(card.memoryGb).arg(card.memoryBandwidthTbps).arg(card.bf16DenseTflops)
                                               .arg(card.fp8DenseTflops ? tr(" · FP8 %1 TF").arg(*card.fp8DenseTflops) : tr(" · no FP8"))
                                               .arg(card.priceSource ? qs(card.priceSource->asOf) : tr("(not stated)")),
                                           tile);
        specs->setToolTip(specs->fullText() + QStringLiteral("\n") + tr("%1 (%2 GB/s)").arg(qs(card.interconnect)).arg(card.interconnectGBps)
                          + (card.priceSource ? QStringLiteral("\n") + qs(card.priceSource->text + (card.priceSource->url.empty() ? std::string() : " " + card.priceSource->url))
                                              : QString()));
        v->addWidget(specs);
        QString verdict = tr("does not fit at any count shown");
        if (best) {
            // The mark leads its line, so a narrow tile elides the step's basis rather than the mark.
            verdict = tr("%8: x%1%9, %2 (%3)\n%7 %6 per M tokens\n%5 %6 over %4")
                          .arg(best->gpus).arg(stepTime(best->stepTimeMs), QString::fromLatin1(toString(best->stepTimeBasis)))
                          .arg(hoursText(best->cost.windowHours)).arg(best->cost.totalCost, 0, 'f', 2).arg(qs(c.currency))
                          .arg(best->cost.costPerMillionTokens, 0, 'f', 2).arg(recommended ? tr("RECOMMENDED") : tr("best"))
                          .arg(best->gpus > 1 ? QStringLiteral(" ") + QString::fromLatin1(toString(best->strategy)) : QString());
        }
        auto *result = new ElidedLinesLabel(verdict, tile);
        result->setObjectName(QStringLiteral("tileVerdict"));
        result->setToolTip(verdict);
        v->addWidget(result);
        v->addStretch(1);
        m_tilesLayout->addWidget(tile, index / 5, index % 5);
        m_tilesLayout->setColumnStretch(index % 5, 1);
        ++index;
    }
    m_tiles->setMinimumHeight(m_tilesLayout->totalMinimumSize().height()); // the table and chart give way, not the tiles
    m_costChart->setCardLegendVisible(named < static_cast<int>(plot.cards.size()));
}

void CompareView::showComparison(const Comparison &c)
{
    m_error.clear();
    m_comparison = c;
    m_costChart->setComparison(c);
    m_record->setEnabled(m_comparedConfig && !m_historyPath.isEmpty() && std::any_of(c.rows.begin(), c.rows.end(), [](const ComparisonRow &r) { return r.fits; }));
    m_decisionLabel->clear();
    rebuildTiles(c);
    const QStringList headers {tr("Card"), tr("GPUs"), tr("Strategy"), tr("Fits"), tr("Headroom"), tr("Max micro-batch"), tr("Step time"), tr("Basis"),
                               tr("Tokens/s"), tr("Job"), tr("Window"), tr("Billing"), tr("Total (%1)").arg(qs(c.currency)), tr("Per M tokens"), tr("Deadline")};
    m_table->clear();
    m_table->setColumnCount(headers.size());
    m_table->setHorizontalHeaderLabels(headers);
    m_table->setRowCount(static_cast<int>(c.rows.size()));
    for (int i = 0; i < static_cast<int>(c.rows.size()); ++i) {
        const auto &r = c.rows[static_cast<size_t>(i)];
        const QStringList cells {qs(r.cardId), QString::number(r.gpus), QString::fromLatin1(toString(r.strategy)), r.fits ? tr("yes") : tr("no"),
                                 formatBytes(r.headroomBytes, 1), QString::number(r.maxMicroBatch), stepTime(r.stepTimeMs), QString::fromLatin1(toString(r.stepTimeBasis)),
                                 QString::number(r.tokensPerSecond, 'f', 0), hoursText(r.cost.jobHours), hoursText(r.cost.windowHours),
                                 qs(r.cost.plan.description), QString::number(r.cost.totalCost, 'f', 2), QString::number(r.cost.costPerMillionTokens, 'f', 2),
                                 r.meetsDeadline ? tr("meets") : tr("misses")};
        QString tip;
        const CardSpec *spec = m_catalog.find(r.cardId);
        if (spec && spec->priceSource)
            tip += tr("Price as of %1: %2\n").arg(qs(spec->priceSource->asOf), qs(spec->priceSource->text));
        if (!r.strategyReason.empty())
            tip += tr("Strategy: %1\n").arg(qs(r.strategyReason));
        for (const auto &a : r.assumptions)
            tip += QStringLiteral("- ") + qs(a) + QLatin1Char('\n');
        for (int col = 0; col < cells.size(); ++col) {
            auto *item = new QTableWidgetItem(cells[col]);
            if (col > 0 && col != 2 && col != 7 && col != 11)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            if (r.recommended) {
                item->setBackground(QColor(216, 240, 216));
                QFont f = item->font();
                f.setBold(true);
                item->setFont(f);
            } else if (!r.fits) {
                item->setForeground(QColor(150, 150, 150));
            }
            item->setToolTip(tip.trimmed());
            m_table->setItem(i, col, item);
        }
    }
    m_table->resizeColumnsToContents();
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_recommendation->setText(qs(c.recommendation));
    m_basis->setText((c.pilotRunId ? tr("Step times from pilot run %1 on %2, measured with %3 kernels.").arg(*c.pilotRunId).arg(qs(c.pilotDevice), qs(c.pilotKernels))
                                   : tr("No pilot of this config in the history: step times modelled."))
                     + QLatin1Char(' ') + qs(numericFormatText(c)));
    m_notice->setText(tr("Catalog (%1) modelled on %2. %3").arg(qs(c.catalogSource), qs(c.catalogDate), qs(c.catalogNotice)));
    Q_EMIT comparisonChanged();
}

} // namespace pb::ui
