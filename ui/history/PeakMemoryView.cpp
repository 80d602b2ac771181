#include "history/PeakMemoryView.h"

#include "config/MemoryBudgetWidget.h"
#include "config/RunConfigJson.h"
#include "history/HistoryTypes.h"
#include "report/ReportData.h"
#include "util/Units.h"

#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace pb::ui {
namespace {

struct Part {
    QString name;
    int64_t bytes;
};

// The allocator's parts only: fragmentation and the device context are not in its peak statistic.
std::vector<Part> partsOf(const MemoryBreakdown &b)
{
    return {{PeakBars::tr("weights"), b.weights()},   {PeakBars::tr("gradients"), b.gradients}, {PeakBars::tr("optimizer"), b.optimizer},
            {PeakBars::tr("activations"), b.activations}, {PeakBars::tr("logits"), b.logits}, {PeakBars::tr("BLAS workspaces, other"), b.blasWorkspaces}};
}

constexpr int kBarHeight = 22;
constexpr int kRow = 48;

} // namespace

PeakBars::PeakBars(QWidget *parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("peakBars"));
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

QSize PeakBars::sizeHint() const { return {600, 30 + 2 * kRow}; }

void PeakBars::setBars(std::optional<MemoryBreakdown> estimate, std::optional<MemoryBreakdown> measured)
{
    m_estimate = estimate;
    m_measured = measured;
    update();
}

void PeakBars::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    const QRect area = rect().adjusted(8, 4, -8, -4);
    const QFontMetrics fm(font());
    // Legend: the budget's colours, in its order.
    int lx = area.left();
    const auto names = partsOf({});
    for (size_t i = 0; i < names.size(); ++i) {
        p.fillRect(QRect(lx, area.top() + 5, 10, 10), budgetSegmentColor(i));
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QPoint(lx + 14, area.top() + 3 + fm.ascent()), names[i].name);
        lx += 14 + fm.horizontalAdvance(names[i].name) + 14;
    }
    int64_t scale = 1;
    for (const auto &b : {m_estimate, m_measured})
        if (b)
            scale = std::max(scale, b->tensors());
    const int labelWidth = fm.horizontalAdvance(tr("Measured (pilot)")) + 12;
    const int barLeft = area.left() + labelWidth, barWidth = std::max(40, area.width() - labelWidth - 90);
    int y = area.top() + 26;
    auto drawBar = [&](const QString &label, const std::optional<MemoryBreakdown> &b, const QString &missing) {
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(area.left(), y, labelWidth, kBarHeight), Qt::AlignLeft | Qt::AlignVCenter, label);
        if (!b) {
            p.drawText(QRect(barLeft, y, area.right() - barLeft, kBarHeight), Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap, missing);
            y += kRow;
            return;
        }
        int64_t at = 0;
        const auto parts = partsOf(*b);
        for (size_t i = 0; i < parts.size(); ++i) {
            const int x0 = barLeft + static_cast<int>(static_cast<double>(at) / static_cast<double>(scale) * barWidth);
            at += parts[i].bytes;
            const int x1 = barLeft + static_cast<int>(static_cast<double>(at) / static_cast<double>(scale) * barWidth);
            if (x1 > x0)
                p.fillRect(QRect(x0, y, x1 - x0, kBarHeight), budgetSegmentColor(i));
        }
        p.setPen(palette().color(QPalette::WindowText));
        const int end = barLeft + static_cast<int>(static_cast<double>(at) / static_cast<double>(scale) * barWidth);
        p.drawText(QRect(end + 6, y, area.right() - end - 6, kBarHeight), Qt::AlignLeft | Qt::AlignVCenter, formatBytes(at, 2));
        y += kRow;
    };
    drawBar(tr("Estimated"), m_estimate, tr("no estimate for this run's config"));
    drawBar(tr("Measured (pilot)"), m_measured, tr("not attributed: the run stopped before its last warm-up step, or predates the attribution"));
}

PeakMemoryView::PeakMemoryView(QWidget *parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("peakMemory"));
    auto *layout = new QVBoxLayout(this);
    m_title = new QLabel(tr("Open a pilot to see where its peak memory went."), this);
    m_title->setWordWrap(true);
    m_bars = new PeakBars(this);
    m_sites = new QTableWidget(0, 5, this);
    m_sites->setObjectName(QStringLiteral("peakSites"));
    m_sites->setHorizontalHeaderLabels({tr("Part"), tr("Phase"), tr("Scope"), tr("Operator"), tr("Bytes at the peak")});
    m_sites->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_sites->verticalHeader()->hide();
    m_sites->horizontalHeader()->setStretchLastSection(true);
    layout->addWidget(m_title);
    layout->addWidget(m_bars);
    layout->addWidget(m_sites, 1);
}

void PeakMemoryView::setRun(const RunRecord &run)
{
    std::optional<MemoryBreakdown> estimated, measured;
    QString title;
    try {
        estimated = estimateForRun(runConfigFromJson(run.config), run).breakdown;
    } catch (const std::exception &) {
        // The bar says there is no estimate; the summary tab carries the config's own error.
    }
    std::optional<MemoryAttribution> attribution;
    const QJsonValue stored = run.summary.value(QStringLiteral("memory_attribution"));
    if (stored.isObject()) {
        try {
            attribution = memoryAttributionFromJson(stored.toObject(), "memory_attribution");
            measured = measuredBreakdown(*attribution);
        } catch (const std::exception &e) {
            title = tr("The stored attribution is unreadable: %1").arg(QString::fromUtf8(e.what()));
        }
    }
    if (attribution)
        title = tr("Run %1: peak allocated %2 at step %3, in the %4 pass, reached by %5.")
                    .arg(run.id)
                    .arg(formatBytes(attribution->peakAllocatedBytes), QString::number(attribution->step), QString::fromStdString(attribution->peakPhase),
                         QString::fromStdString(attribution->peakSite));
    else if (title.isEmpty())
        title = tr("Run %1 has no attribution of its peak memory.").arg(run.id);
    m_title->setText(title);
    m_bars->setBars(estimated, measured);
    m_sites->setRowCount(0);
    if (!attribution)
        return;
    m_sites->setRowCount(static_cast<int>(attribution->sites.size()));
    for (int r = 0; r < static_cast<int>(attribution->sites.size()); ++r) {
        const auto &s = attribution->sites[static_cast<size_t>(r)];
        const QStringList cells {QString::fromLatin1(toString(s.part)).replace(QLatin1Char('_'), QLatin1Char(' ')), QString::fromStdString(s.phase),
                                 QString::fromStdString(s.scope), QString::fromStdString(s.op), formatBytes(s.bytes)};
        for (int c = 0; c < cells.size(); ++c)
            m_sites->setItem(r, c, new QTableWidgetItem(cells[c]));
    }
    m_sites->resizeColumnsToContents();
}

} // namespace pb::ui
