#pragma once
// The live memory budget: one stacked horizontal bar per card (weights, gradients, optimizer,
// activations, logits, workspace, framework) against the card's capacity, the headroom line, and
// the largest micro-batch that fits. Painted by hand: seven segments on four rows read cleaner
// than a chart with a legend per series.
#include "estimate/MemoryEstimate.h"

#include <QColor>
#include <QString>
#include <QWidget>

#include <optional>
#include <utility>
#include <vector>

namespace pb::ui {

struct CardBudget {
    QString cardName;
    std::optional<MemoryEstimate> estimate; // empty: the estimator refused (error says why)
    QString error;
};

class MemoryBudgetWidget final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(MemoryBudgetWidget)
public:
    explicit MemoryBudgetWidget(QWidget *parent = nullptr);
    void setBudgets(std::vector<CardBudget> budgets);
    // Shown instead of the bars (an invalid config has no budget).
    void setMessage(const QString &message);
    const std::vector<CardBudget> &budgets() const { return m_budgets; }
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;
    // What the tooltip says at `pos` (a segment: its part, size and share of the peak; a bar's
    // empty capacity: capacity and headroom); empty elsewhere. As last painted.
    QString toolTipAt(const QPoint &pos) const;

protected:
    void paintEvent(QPaintEvent *event) override;
    bool event(QEvent *event) override;

private:
    std::vector<CardBudget> m_budgets;
    QString m_message;
    std::vector<std::pair<QRect, QString>> m_tips; // filled by paintEvent, most specific first
};

// The seven parts of the breakdown in drawing order, with names for the legend.
struct BudgetSegment {
    QString name;
    int64_t bytes = 0;
};
std::vector<BudgetSegment> budgetSegments(const MemoryBreakdown &breakdown);
// The colour of segment i of budgetSegments(), for views that draw the same parts.
const QColor &budgetSegmentColor(size_t i);

} // namespace pb::ui
