// GUI responsiveness. (1) During a CPU pilot with the dashboard's charts open, a 5 ms timer records
// how late each tick fires: the longest lateness is the longest stall of the event loop (target
// < 50 ms). (2) The time to load and redraw a 1,000,000-step run in the charts (target < 200 ms).
// Usage: bench_gui [--steps N] [--screenshots DIR] [--hidden-charts]  (QT_QPA_PLATFORM=offscreen when
// no display). --hidden-charts runs the pilot with the Configuration tab in front, which separates
// the cost of painting from the rest.
#include "MainWindow.h"
#include "charts/Lttb.h"
#include "charts/RunCharts.h"
#include "compare/CompareView.h"
#include "config/ConfigView.h"
#include "history/HistoryView.h"
#include "monitor/DashboardView.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QSettings>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using namespace pb;
using namespace pb::ui;

namespace {

double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double maxOf(const std::vector<double> &v)
{
    return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

void saveTabs(MainWindow &window, const QString &dir, const QString &suffix)
{
    for (int i = 0; i < window.tabs()->count(); ++i) {
        window.tabs()->setCurrentIndex(i);
        QApplication::processEvents();
        const QString name = window.tabs()->tabText(i).toLower().replace(QLatin1Char(' '), QLatin1Char('_'));
        window.grab().save(dir + QStringLiteral("/%1%2.png").arg(name, suffix));
    }
}

} // namespace

int main(int argc, char **argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("pilotbench-bench"));
    QSettings().clear();
    int steps = 200;
    QString shots;
    const QStringList args = QApplication::arguments();
    const bool hiddenCharts = args.contains(QStringLiteral("--hidden-charts"));
    for (int i = 1; i + 1 < args.size(); ++i) {
        if (args[i] == QLatin1String("--steps"))
            steps = args[i + 1].toInt();
        if (args[i] == QLatin1String("--screenshots"))
            shots = args[i + 1];
    }

    QTemporaryDir dir;
    MainWindow window(dir.filePath(QStringLiteral("bench.db")));
    window.resize(1366, 768);
    window.show();
    window.configView()->loadPreset(QStringLiteral("tiny"));
    if (!shots.isEmpty()) {
        window.grab().save(shots + QStringLiteral("/configuration.png"));
        window.configView()->loadPreset(QStringLiteral("llama-3.1-8b"));
        QApplication::processEvents();
        window.grab().save(shots + QStringLiteral("/configuration_8b.png"));
        if (auto *kv = window.configView()->findChild<QSpinBox *>(QStringLiteral("model.kv_heads")))
            kv->setValue(7);
        QApplication::processEvents();
        window.grab().save(shots + QStringLiteral("/configuration_invalid.png"));
        window.configView()->loadPreset(QStringLiteral("tiny"));
    }
    DashboardView *dash = window.dashboard();
    dash->setSteps(steps, 3);

    // (1) Event-loop stall during a live pilot.
    std::vector<double> latenessMs;
    QElapsedTimer clock;
    QTimer tick;
    tick.setTimerType(Qt::PreciseTimer);
    tick.setInterval(5);
    qint64 last = 0;
    QObject::connect(&tick, &QTimer::timeout, [&] {
        const qint64 now = clock.nsecsElapsed();
        if (last > 0)
            latenessMs.push_back(std::max(0.0, (now - last) / 1e6 - 5.0));
        last = now;
    });
    // The same timer with no pilot first: what the machine itself (other processes) costs.
    clock.start();
    tick.start();
    QElapsedTimer idle;
    idle.start();
    while (idle.elapsed() < 3000)
        QApplication::processEvents(QEventLoop::WaitForMoreEvents, 50);
    tick.stop();
    std::vector<double> idleLate = latenessMs;
    std::sort(idleLate.begin(), idleLate.end());
    std::printf("baseline, no pilot (3 s, %zu ticks): max lateness %.1f ms, p99 %.1f ms\n", idleLate.size(), idleLate.empty() ? 0.0 : idleLate.back(),
                idleLate.empty() ? 0.0 : idleLate[static_cast<size_t>(0.99 * static_cast<double>(idleLate.size() - 1))]);
    latenessMs.clear();
    last = 0;

    window.runPilot();
    if (hiddenCharts)
        window.tabs()->setCurrentIndex(0); // the dashboard still drains, but nothing paints
    tick.start();
    QElapsedTimer wall;
    wall.start();
    while (dash->isRunning())
        QApplication::processEvents(QEventLoop::WaitForMoreEvents, 50);
    tick.stop();
    const double pilotS = wall.elapsed() / 1000.0;
    std::vector<double> sorted = latenessMs;
    std::sort(sorted.begin(), sorted.end());
    const double maxLate = sorted.empty() ? 0 : sorted.back();
    const double p99Late = sorted.empty() ? 0 : sorted[static_cast<size_t>(0.99 * static_cast<double>(sorted.size() - 1))];
    std::printf("pilot: %d measured + 3 warm-up steps of the tiny preset on CPU in %.1f s, verdict %s, %zu samples charted\n", steps, pilotS,
                qPrintable(dash->lastVerdict()), dash->charts()->sampleCount());
    std::printf("event-loop stall during the pilot (5 ms timer lateness over %zu ticks): max %.1f ms, p99 %.1f ms (target max < 50 ms)\n",
                latenessMs.size(), maxLate, p99Late);
    std::printf("ticks later than 50 ms: %zu, later than 20 ms: %zu\n", static_cast<size_t>(std::count_if(sorted.begin(), sorted.end(), [](double v) { return v > 50; })),
                static_cast<size_t>(std::count_if(sorted.begin(), sorted.end(), [](double v) { return v > 20; })));
    std::printf("longest dashboard frame (drain + series update, painting excluded): %.1f ms\n", dash->longestFrameMs());

    if (!shots.isEmpty()) {
        window.history()->refresh();
        window.history()->openRun(dash->lastRunId());
        saveTabs(window, shots, QString());
        if (auto *compare = window.findChild<CompareView *>()) {
            window.tabs()->setCurrentWidget(compare);
            QElapsedTimer wait;
            wait.start();
            do
                QApplication::processEvents(QEventLoop::WaitForMoreEvents, 50);
            while (compare->busy() && wait.elapsed() < 20000);
            QApplication::processEvents();
            window.grab().save(shots + QStringLiteral("/compare_done.png"));
        }
        // A second, shorter run of another sequence length: the overlay and the config diff.
        const int64_t first = dash->lastRunId();
        window.configView()->findChild<QSpinBox *>(QStringLiteral("train.seq_len"))->setValue(32);
        dash->setSteps(40, 2);
        window.runPilot();
        while (dash->isRunning())
            QApplication::processEvents(QEventLoop::WaitForMoreEvents, 50);
        window.tabs()->setCurrentWidget(window.history());
        window.history()->refresh();
        window.history()->diffRuns(first, dash->lastRunId());
        QApplication::processEvents();
        window.grab().save(shots + QStringLiteral("/history_diff.png"));
        window.history()->overlayRuns({first, dash->lastRunId()});
        window.tabs()->setCurrentWidget(window.history());
        QApplication::processEvents();
        window.grab().save(shots + QStringLiteral("/history_overlay.png"));
    }

    // (1b) The cost of one live frame without the engine competing for the CPU: append a sample,
    // refresh (light, and every 6th full), paint.
    {
        RunCharts live;
        live.setAntialiasing(false); // as on the dashboard, which also knows the run's last step
        live.setPlannedLastStep(300);
        live.resize(1366, 520);
        live.show();
        QApplication::processEvents();
        std::vector<double> updateMs, paintMs, fullMs;
        QElapsedTimer f;
        // Frames 1..300 on a short run, then 300 more once the run holds 100,000 steps.
        for (int i = 1; i <= 600; ++i) {
            if (i == 301) {
                std::printf("one live frame, first 300 frames of a run: light update median %.1f ms, max %.1f ms; full update (every 6th) median %.1f ms, max %.1f ms; repaint median %.1f ms, max %.1f ms\n",
                            median(updateMs), maxOf(updateMs), median(fullMs), maxOf(fullMs), median(paintMs), maxOf(paintMs));
                updateMs.clear();
                fullMs.clear();
                paintMs.clear();
                std::vector<StepSample> bulk(100000);
                for (size_t k = 0; k < bulk.size(); ++k) {
                    bulk[k].step = 301 + static_cast<int64_t>(k);
                    bulk[k].stepTimeMs = 50.0 + static_cast<double>(k % 13);
                    bulk[k].allocatedBytes = bulk[k].reservedBytes = 6 << 20;
                    bulk[k].deviceUsedBytes = 200 << 20;
                    bulk[k].loss = 2.0 + 1.0 / static_cast<double>(k + 1);
                }
                live.appendSamples(bulk);
                live.setPlannedLastStep(100600);
                live.refresh(true);
            }
            StepSample s;
            s.step = i <= 300 ? i : 100000 + i;
            s.phase = i <= 3 ? Phase::Warmup : Phase::Train;
            s.stepTimeMs = 50.0 + (i % 7);
            s.allocatedBytes = s.reservedBytes = 6 << 20;
            s.deviceUsedBytes = 200 << 20;
            s.loss = 5.0 / i;
            f.restart();
            live.appendSamples({s});
            live.refresh(i % 6 == 0);
            (i % 6 == 0 ? fullMs : updateMs).push_back(f.nsecsElapsed() / 1e6);
            f.restart();
            live.repaint();
            for (QWidget *w : live.findChildren<QWidget *>())
                w->repaint();
            paintMs.push_back(f.nsecsElapsed() / 1e6);
        }
        std::printf("one live frame, run past 100,000 steps: light update median %.1f ms, max %.1f ms; full update (every 6th) median %.1f ms, max %.1f ms; repaint median %.1f ms, max %.1f ms (no pilot running)\n",
                    median(updateMs), maxOf(updateMs), median(fullMs), maxOf(fullMs), median(paintMs), maxOf(paintMs));
    }

    // (2) Redraw of a 1,000,000-step run.
    const size_t n = 1000000;
    SampleSeries series;
    series.reserve(n);
    std::mt19937 rng(7);
    std::normal_distribution<double> noise(0.0, 3.0);
    for (size_t i = 0; i < n; ++i) {
        const double step = static_cast<double>(i + 1);
        series.step.push_back(step);
        series.stepTimeMs.push_back(120.0 + noise(rng) + (i % 5000 == 0 ? 400.0 : 0.0));
        series.allocatedBytes.push_back(2e9 + 1e8 * std::sin(step / 1000.0));
        series.reservedBytes.push_back(2.5e9);
        series.deviceUsedBytes.push_back(3e9);
        series.loss.push_back(3.0 + 2.0 * std::exp(-step / 1e5));
        series.phase.push_back(i < 10 ? Phase::Warmup : Phase::Train);
    }
    for (auto *v : {&series.forwardMs, &series.backwardMs, &series.optimizerMs, &series.dataWaitMs, &series.peakAllocatedBytes, &series.tokens, &series.learningRate, &series.gradNorm})
        v->assign(n, 0.0);

    QElapsedTimer t;
    t.start();
    const auto points = lttb(series.step.data(), series.stepTimeMs.data(), n, RunCharts::kMaxPointsPerSeries);
    const double lttbMs = t.nsecsElapsed() / 1e6;

    RunCharts charts;
    charts.resize(1366, 640);
    charts.show();
    QApplication::processEvents();
    std::vector<double> redrawMs, loadMs;
    for (int rep = 0; rep < 3; ++rep) {
        t.restart();
        charts.setRun(series, {});
        loadMs.push_back(t.nsecsElapsed() / 1e6);
        QApplication::processEvents(); // the charts' deferred layout (legend, axes) counts too
        const QPixmap frame = charts.grab(); // forces the layout and a full paint of the four charts
        redrawMs.push_back(t.nsecsElapsed() / 1e6);
        if (!shots.isEmpty() && rep == 0)
            frame.save(shots + QStringLiteral("/million_step_run.png"));
    }
    std::printf("1,000,000-step run: LTTB of one series to %zu points %.1f ms; load + redraw of all charts %.1f / %.1f / %.1f ms (target < 200 ms), of which load (columns, LTTB, histogram) %.1f / %.1f / %.1f ms\n",
                static_cast<size_t>(points.size()), lttbMs, redrawMs[0], redrawMs[1], redrawMs[2], loadMs[0], loadMs[1], loadMs[2]);
    return 0;
}
