#include "config/MemoryBudgetWidget.h"

#include "estimate/CardCapacities.h"
#include "util/Units.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <QPainterPath>

#include <algorithm>

namespace pb::ui {
namespace {

constexpr int kLegendHeight = 22;
constexpr int kRowHeight = 66;

// One decimal: the row's text shares its line with the bar.
QString sizeText(int64_t bytes) { return formatBytes(bytes, 1); }

} // namespace

const QColor &budgetSegmentColor(size_t i)
{
    static const QColor colors[] {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b), QColor(0xe1, 0x57, 0x59), QColor(0x76, 0xb7, 0xb2),
                                  QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48), QColor(0xb0, 0x7a, 0xa1)};
    return colors[i % 7];
}

std::vector<BudgetSegment> budgetSegments(const MemoryBreakdown &b)
{
    return {{MemoryBudgetWidget::tr("weights"), b.weights()},   {MemoryBudgetWidget::tr("gradients"), b.gradients},
            {MemoryBudgetWidget::tr("optimizer"), b.optimizer}, {MemoryBudgetWidget::tr("activations"), b.activations},
            {MemoryBudgetWidget::tr("logits"), b.logits},       {MemoryBudgetWidget::tr("workspace"), b.workspace + b.blasWorkspaces},
            {MemoryBudgetWidget::tr("framework"), b.framework}};
}

MemoryBudgetWidget::MemoryBudgetWidget(QWidget *parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("memoryBudget"));
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Minimum);
}

void MemoryBudgetWidget::setBudgets(std::vector<CardBudget> budgets)
{
    m_budgets = std::move(budgets);
    m_message.clear();
    updateGeometry();
    update();
}

void MemoryBudgetWidget::setMessage(const QString &message)
{
    m_budgets.clear();
    m_message = message;
    update();
}

QSize MemoryBudgetWidget::sizeHint() const
{
    const int rows = std::max<int>(4, static_cast<int>(m_budgets.size()));
    return {520, kLegendHeight * 2 + rows * kRowHeight + 8};
}

QSize MemoryBudgetWidget::minimumSizeHint() const
{
    return {360, sizeHint().height()};
}

QString MemoryBudgetWidget::toolTipAt(const QPoint &pos) const
{
    for (const auto &[rect, text] : m_tips)
        if (rect.contains(pos))
            return text;
    return {};
}

bool MemoryBudgetWidget::event(QEvent *event)
{
    if (event->type() == QEvent::ToolTip) {
        const auto *help = static_cast<QHelpEvent *>(event);
        const QString text = toolTipAt(help->pos());
        if (text.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), text, this);
        return true;
    }
    return QWidget::event(event);
}

void MemoryBudgetWidget::paintEvent(QPaintEvent *)
{
    m_tips.clear();
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QRect area = rect().adjusted(4, 4, -4, -4);
    if (!m_message.isEmpty() || m_budgets.empty()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(area, Qt::AlignCenter | Qt::TextWordWrap, m_message.isEmpty() ? tr("No budget yet") : m_message);
        return;
    }

    // Legend, wrapped onto two lines when narrow.
    const QFontMetrics fm(font());
    const auto names = budgetSegments({});
    int lx = area.left(), ly = area.top();
    for (size_t i = 0; i < names.size(); ++i) {
        const int w = 14 + fm.horizontalAdvance(names[i].name) + 12;
        if (lx + w > area.right()) {
            lx = area.left();
            ly += kLegendHeight;
        }
        p.fillRect(QRect(lx, ly + 5, 10, 10), budgetSegmentColor(i));
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QPoint(lx + 14, ly + 5 + fm.ascent() - 2), names[i].name);
        lx += w;
    }
    {
        const int w = 14 + fm.horizontalAdvance(tr("headroom")) + 12;
        if (lx + w > area.right()) {
            lx = area.left();
            ly += kLegendHeight;
        }
        p.setPen(QPen(QColor(0xc0, 0x30, 0x30), 2, Qt::DashLine));
        p.drawLine(lx + 5, ly + 3, lx + 5, ly + 17);
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QPoint(lx + 14, ly + 5 + fm.ascent() - 2), tr("headroom"));
    }
    int y = ly + kLegendHeight + 4;

    // One scale for every card, so capacities compare at a glance; overflow is clipped and marked.
    int64_t scaleBytes = 1;
    for (const auto &b : m_budgets)
        if (b.estimate)
            scaleBytes = std::max(scaleBytes, b.estimate->capacityBytes);
    scaleBytes = scaleBytes + scaleBytes / 5;
    const int barLeft = area.left();
    const int barWidth = std::max(40, area.width() - 4);
    auto xOf = [&](int64_t bytes) { return barLeft + static_cast<int>(static_cast<double>(std::min(bytes, scaleBytes)) / static_cast<double>(scaleBytes) * barWidth); };

    QFont bold = font();
    bold.setBold(true);
    const QFontMetrics boldMetrics(bold);
    for (const auto &b : m_budgets) {
        // Line 1: the card in bold and what the estimate says; line 2: the bar.
        p.setPen(palette().color(QPalette::WindowText));
        p.setFont(bold);
        const QRect nameRect(area.left(), y, area.width(), 20);
        p.drawText(nameRect, Qt::AlignLeft | Qt::AlignVCenter, b.cardName);
        const int textLeft = area.left() + boldMetrics.horizontalAdvance(b.cardName) + 12;
        p.setFont(font());
        if (!b.estimate) {
            p.setPen(QColor(0xc0, 0x30, 0x30));
            p.drawText(QRect(textLeft, y, area.right() - textLeft, kRowHeight - 4), Qt::AlignLeft | Qt::TextWordWrap, b.error);
            y += kRowHeight;
            continue;
        }
        const MemoryEstimate &e = *b.estimate;
        const QRect bar(barLeft, y + 22, barWidth, 18);
        const QRect capacity(barLeft, bar.top(), xOf(e.capacityBytes) - barLeft, bar.height());
        p.fillRect(capacity, palette().color(QPalette::AlternateBase));
        int64_t at = 0;
        const auto segments = budgetSegments(e.breakdown);
        // A part too small for a pixel still shows as a sliver (a tiny model's bar is not empty);
        // each part's rectangle carries its tooltip.
        int drawnTo = barLeft;
        for (size_t i = 0; i < segments.size(); ++i) {
            if (segments[i].bytes <= 0)
                continue;
            at += segments[i].bytes;
            const int x0 = std::min(drawnTo, barLeft + barWidth);
            const int x1 = std::min(std::max(xOf(at), x0 + 2), barLeft + barWidth);
            if (x1 <= x0)
                continue;
            const QRect segment(x0, bar.top(), x1 - x0, bar.height());
            p.fillRect(segment, budgetSegmentColor(i));
            m_tips.emplace_back(segment, tr("%1 — %2: %3 (%4 % of the peak)")
                                              .arg(b.cardName, segments[i].name, sizeText(segments[i].bytes))
                                              .arg(100.0 * static_cast<double>(segments[i].bytes) / static_cast<double>(std::max<int64_t>(1, e.totalBytes)), 0, 'f', 1));
            drawnTo = x1;
        }
        m_tips.emplace_back(capacity, tr("%1: capacity %2, usable %3 after headroom, estimated peak %4")
                                          .arg(b.cardName, sizeText(e.capacityBytes), sizeText(e.usableBytes), sizeText(e.totalBytes)));
        p.setPen(QPen(palette().color(QPalette::WindowText), 1));
        p.setBrush(Qt::NoBrush);
        p.drawRect(capacity);
        if (e.usableBytes > 0) {
            const int hx = xOf(e.usableBytes);
            p.setPen(QPen(QColor(0xc0, 0x30, 0x30), 2, Qt::DashLine));
            p.drawLine(hx, bar.top() - 3, hx, bar.bottom() + 3);
        }
        if (e.totalBytes > scaleBytes) {
            // Past the scale: a break across the bar and how much does not fit, so a 1 TiB
            // estimate on a 192 GiB card does not read as a full bar.
            const int bx = barLeft + barWidth - 96;
            p.setPen(QPen(palette().color(QPalette::Base), 3));
            p.drawLine(bx, bar.bottom() + 2, bx + 6, bar.top() - 2);
            p.drawLine(bx + 6, bar.bottom() + 2, bx + 12, bar.top() - 2);
            const QString over = tr("+%1").arg(sizeText(e.totalBytes - e.usableBytes));
            QFont small = font();
            small.setBold(true);
            p.setFont(small);
            p.setPen(Qt::white);
            p.drawText(QRect(bx + 14, bar.top(), barLeft + barWidth - bx - 16, bar.height()), Qt::AlignRight | Qt::AlignVCenter,
                       QFontMetrics(small).elidedText(over, Qt::ElideRight, barLeft + barWidth - bx - 16));
            p.setFont(font());
        }
        // The refusal names the card, which the row already shows.
        QString refusal = QString::fromStdString(e.refusal);
        if (!refusal.isEmpty())
            if (const QString prefix = QString::fromStdString(cardCapacity(e.card).name) + QStringLiteral(" has "); refusal.startsWith(prefix))
                refusal = refusal.mid(prefix.size());
        const QString mb = !e.refusal.empty() ? refusal : e.maxMicroBatch > 0 ? tr("max micro-batch %1").arg(e.maxMicroBatch) : (e.maxMicroBatch == 0 ? tr("micro-batch 1 does not fit") : tr("max micro-batch unknown"));
        QString verdict = (!e.refusal.empty() ? tr("cannot run") : e.fits ? tr("fits") : tr("does not fit")) + QStringLiteral(" · ") + mb;
        // Pilots measured on this card scale the estimate; the bar stays the raw breakdown.
        if (e.calibratedTotalBytes)
            verdict += tr(" · calibrated %1 by %2").arg(sizeText(*e.calibratedTotalBytes),
                                                            e.calibrationSamples == 1 ? tr("1 pilot") : tr("%1 pilots").arg(e.calibrationSamples));
        p.setPen(e.fits ? QColor(0x20, 0x70, 0x20) : QColor(0xc0, 0x30, 0x30));
        p.drawText(QRect(textLeft, y, area.right() - textLeft, 20), Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(verdict, Qt::ElideRight, area.right() - textLeft));
        const QString detail = tr("%1 of %2, usable %3 after headroom · peak: %4")
                                   .arg(sizeText(e.totalBytes), sizeText(e.capacityBytes), sizeText(e.usableBytes), QString::fromStdString(e.peakPhase));
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(barLeft, bar.bottom() + 2, barWidth, 20), Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(detail, Qt::ElideRight, barWidth));
        y += kRowHeight;
    }
}

} // namespace pb::ui
