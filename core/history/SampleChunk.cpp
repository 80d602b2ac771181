#include "history/SampleChunk.h"

#include "util/Errors.h"

#include <cstring>

namespace pb::history {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "sample chunks are stored little-endian");
constexpr char kMagic[4] = {'P', 'B', 'S', 1};
constexpr size_t kHeaderBytes = 8;

template <typename T>
void putColumn(char *&out, const StepSample *samples, size_t count, T (*get)(const StepSample &))
{
    for (size_t i = 0; i < count; ++i) {
        const T value = get(samples[i]);
        std::memcpy(out, &value, 8);
        out += 8;
    }
}

uint32_t checkedCount(const QByteArray &blob, const QString &where)
{
    uint32_t count = 0;
    if (blob.size() >= static_cast<qsizetype>(kHeaderBytes)) {
        std::memcpy(&count, blob.constData() + 4, 4);
        if (std::memcmp(blob.constData(), kMagic, 4) == 0
            && static_cast<size_t>(blob.size()) == kHeaderBytes + size_t(count) * kChunkColumns * 8)
            return count;
    }
    throw PilotBenchError(ExitCode::Failure, where.toStdString() + ": a sample chunk is damaged (unknown format or wrong size)");
}

void appendInts(const char *column, uint32_t count, std::vector<double> &to)
{
    const size_t base = to.size();
    to.resize(base + count);
    for (uint32_t i = 0; i < count; ++i) {
        int64_t v;
        std::memcpy(&v, column + size_t(i) * 8, 8);
        to[base + i] = static_cast<double>(v);
    }
}

void appendDoubles(const char *column, uint32_t count, std::vector<double> &to)
{
    const size_t base = to.size();
    to.resize(base + count);
    std::memcpy(to.data() + base, column, size_t(count) * 8);
}

} // namespace

QByteArray encodeChunk(const StepSample *s, size_t count)
{
    QByteArray blob(static_cast<qsizetype>(kHeaderBytes + count * kChunkColumns * 8), Qt::Uninitialized);
    char *out = blob.data();
    std::memcpy(out, kMagic, 4);
    const uint32_t n = static_cast<uint32_t>(count);
    std::memcpy(out + 4, &n, 4);
    out += kHeaderBytes;
    putColumn<int64_t>(out, s, count, [](const StepSample &x) { return x.step; });
    putColumn<int64_t>(out, s, count, [](const StepSample &x) { return static_cast<int64_t>(x.phase); });
    putColumn<double>(out, s, count, [](const StepSample &x) { return x.stepTimeMs; });
    putColumn<double>(out, s, count, [](const StepSample &x) { return x.forwardMs; });
    putColumn<double>(out, s, count, [](const StepSample &x) { return x.backwardMs; });
    putColumn<double>(out, s, count, [](const StepSample &x) { return x.optimizerMs; });
    putColumn<double>(out, s, count, [](const StepSample &x) { return x.dataWaitMs; });
    putColumn<int64_t>(out, s, count, [](const StepSample &x) { return x.allocatedBytes; });
    putColumn<int64_t>(out, s, count, [](const StepSample &x) { return x.reservedBytes; });
    putColumn<int64_t>(out, s, count, [](const StepSample &x) { return x.peakAllocatedBytes; });
    putColumn<int64_t>(out, s, count, [](const StepSample &x) { return x.deviceUsedBytes; });
    putColumn<int64_t>(out, s, count, [](const StepSample &x) { return x.tokens; });
    putColumn<double>(out, s, count, [](const StepSample &x) { return x.loss; });
    putColumn<double>(out, s, count, [](const StepSample &x) { return x.learningRate; });
    putColumn<double>(out, s, count, [](const StepSample &x) { return x.gradNorm; });
    return blob;
}

void appendChunk(const QByteArray &blob, SampleSeries &series, const QString &where)
{
    const uint32_t count = checkedCount(blob, where);
    const char *col = blob.constData() + kHeaderBytes;
    auto next = [&]() { const char *c = col; col += size_t(count) * 8; return c; };
    appendInts(next(), count, series.step);
    const char *phases = next();
    const size_t base = series.phase.size();
    series.phase.resize(base + count);
    for (uint32_t i = 0; i < count; ++i) {
        int64_t v;
        std::memcpy(&v, phases + size_t(i) * 8, 8);
        series.phase[base + i] = static_cast<Phase>(v);
    }
    appendDoubles(next(), count, series.stepTimeMs);
    appendDoubles(next(), count, series.forwardMs);
    appendDoubles(next(), count, series.backwardMs);
    appendDoubles(next(), count, series.optimizerMs);
    appendDoubles(next(), count, series.dataWaitMs);
    appendInts(next(), count, series.allocatedBytes);
    appendInts(next(), count, series.reservedBytes);
    appendInts(next(), count, series.peakAllocatedBytes);
    appendInts(next(), count, series.deviceUsedBytes);
    appendInts(next(), count, series.tokens);
    appendDoubles(next(), count, series.loss);
    appendDoubles(next(), count, series.learningRate);
    appendDoubles(next(), count, series.gradNorm);
}

void appendChunk(const QByteArray &blob, std::vector<StepSample> &samples, const QString &where)
{
    const uint32_t count = checkedCount(blob, where);
    const size_t base = samples.size();
    samples.resize(base + count);
    const char *data = blob.constData() + kHeaderBytes;
    auto at = [&](int column, uint32_t i) { return data + (size_t(column) * count + i) * 8; };
    auto i64 = [&](int column, uint32_t i) { int64_t v; std::memcpy(&v, at(column, i), 8); return v; };
    auto f64 = [&](int column, uint32_t i) { double v; std::memcpy(&v, at(column, i), 8); return v; };
    for (uint32_t i = 0; i < count; ++i) {
        StepSample &s = samples[base + i];
        s.step = i64(0, i);
        s.phase = static_cast<Phase>(i64(1, i));
        s.stepTimeMs = f64(2, i);
        s.forwardMs = f64(3, i);
        s.backwardMs = f64(4, i);
        s.optimizerMs = f64(5, i);
        s.dataWaitMs = f64(6, i);
        s.allocatedBytes = i64(7, i);
        s.reservedBytes = i64(8, i);
        s.peakAllocatedBytes = i64(9, i);
        s.deviceUsedBytes = i64(10, i);
        s.tokens = i64(11, i);
        s.loss = f64(12, i);
        s.learningRate = f64(13, i);
        s.gradNorm = f64(14, i);
    }
}

} // namespace pb::history
