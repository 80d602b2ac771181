#pragma once
// A run's peak allocated memory, estimated against measured: two stacked bars in the memory
// budget's colours (weights, gradients, optimizer, activations, logits, BLAS workspaces), the
// measured one from the pilot's attribution of its last warm-up step, and the sites that held the
// most at the peak.
#include "estimate/MemoryEstimate.h"
#include "result/MemoryAttribution.h"

#include <QWidget>

#include <optional>

class QLabel;
class QTableWidget;

namespace pb {
struct RunRecord;
}

namespace pb::ui {

class PeakBars final : public QWidget {
    Q_OBJECT
public:
    explicit PeakBars(QWidget *parent = nullptr);
    void setBars(std::optional<MemoryBreakdown> estimate, std::optional<MemoryBreakdown> measured);
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent *event) override;

private:
    std::optional<MemoryBreakdown> m_estimate, m_measured;
};

class PeakMemoryView final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(PeakMemoryView)
public:
    explicit PeakMemoryView(QWidget *parent = nullptr);
    void setRun(const RunRecord &run);

private:
    QLabel *m_title = nullptr;
    PeakBars *m_bars = nullptr;
    QTableWidget *m_sites = nullptr;
};

} // namespace pb::ui
