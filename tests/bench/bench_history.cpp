// History benchmark: samples per second through the writer thread (target >= 200,000/s) and the time
// to load one run of 1,000,000 samples for plotting (target < 300 ms). Prints both.
// Usage: bench_history [SAMPLES] (default 1000000). Uses a temporary database.
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QTemporaryDir>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace {

pb::StepSample sampleAt(int64_t step)
{
    pb::StepSample s;
    s.step = step;
    s.phase = pb::Phase::Train;
    s.stepTimeMs = 40.0 + double(step % 17) * 0.37;
    s.forwardMs = 15.0 + double(step % 5) * 0.11;
    s.backwardMs = 21.0 + double(step % 7) * 0.13;
    s.optimizerMs = 4.0;
    s.dataWaitMs = double(step % 3) * 0.2;
    s.allocatedBytes = 7000000000LL + step;
    s.reservedBytes = 8000000000LL + step;
    s.peakAllocatedBytes = 7500000000LL + step;
    s.deviceUsedBytes = 9000000000LL + step;
    s.tokens = 8192;
    s.loss = 10.0 / (1.0 + double(step) * 1e-4);
    s.learningRate = 1e-4;
    s.gradNorm = 1.0 + double(step % 11) * 0.05;
    return s;
}

} // namespace

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    const int64_t samples = argc > 1 ? std::max<int64_t>(1, QByteArray(argv[1]).toLongLong()) : 1000000;
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("bench.sqlite"));

    int64_t runId = 0;
    double writeMs = 0;
    {
        pb::HistoryWriter writer(path);
        pb::RunStart start;
        start.model = QStringLiteral("bench");
        runId = writer.beginRun(start);
        QElapsedTimer timer;
        timer.start();
        for (int64_t step = 1; step <= samples; ++step)
            writer.appendSample(runId, sampleAt(step));
        const double appendMs = double(timer.nsecsElapsed()) / 1e6;
        if (!writer.flush()) {
            std::fprintf(stderr, "writer failed: %s\n", writer.lastError().c_str());
            return 1;
        }
        writeMs = double(timer.nsecsElapsed()) / 1e6;
        std::printf("writer: %lld samples appended in %.1f ms (caller side, %.0f ns each), committed after %.1f ms: %.0f samples/s (target >= 200000)\n",
                    static_cast<long long>(samples), appendMs, appendMs * 1e6 / double(samples), writeMs, double(samples) / (writeMs / 1000.0));
    }

    pb::HistoryStore store(path);
    std::vector<double> loadMs;
    size_t loaded = 0;
    for (int i = 0; i < 5; ++i) {
        QElapsedTimer timer;
        timer.start();
        const pb::SampleSeries series = store.samples(runId);
        loadMs.push_back(double(timer.nsecsElapsed()) / 1e6);
        loaded = series.size();
    }
    std::sort(loadMs.begin(), loadMs.end());
    std::printf("load: %zu samples into plot columns in %.1f ms median (min %.1f, max %.1f, 5 loads, target < 300 ms)\n",
                loaded, loadMs[2], loadMs.front(), loadMs.back());
    std::printf("file: %.1f MiB\n", double(QFileInfo(path).size()) / (1024.0 * 1024.0));
    return loaded == size_t(samples) ? 0 : 1;
}
