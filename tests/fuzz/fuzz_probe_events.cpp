// The probe channel as watch reads it: bytes from a job, split into lines of at most
// kMaxProbeLineBytes, each line checked by readProbeLine and turned into a sample, a validation or
// a checkpoint. Every accepted event's figures must be finite and inside the bounds (so no sum or
// mean of them can go negative, overflow or turn infinite), and a refusal must say why.
#include "FuzzSupport.h"

#include "watch/ProbeEvents.h"

#include <cmath>

namespace {

bool duration(double ms) { return std::isfinite(ms) && ms >= 0 && ms < pb::watch::kMaxProbeDurationMs; }
bool bytes(int64_t b) { return b >= 0 && static_cast<double>(b) < pb::watch::kMaxProbeBytes; }
bool count(int64_t n) { return n >= 0 && static_cast<double>(n) < pb::watch::kMaxProbeStep; }
// NaN is "not reported"; a reported figure is finite.
bool reportedFinite(double v) { return std::isnan(v) || std::isfinite(v); }
bool reportedNonNegative(double v) { return std::isnan(v) || (std::isfinite(v) && v >= 0); }

void checkLine(const QByteArray &line)
{
    FUZZ_REQUIRE(line.size() <= pb::watch::kMaxProbeLineBytes);
    const pb::watch::ProbeLine read = pb::watch::readProbeLine(line);
    if (!read.event) {
        FUZZ_REQUIRE(!read.rejection.empty());
        return;
    }
    FUZZ_REQUIRE(read.rejection.empty());
    const pb::watch::ProbeEvent &e = *read.event;
    FUZZ_REQUIRE(e.rank >= 0 && e.rank < pb::watch::kMaxProbeRanks);
    FUZZ_REQUIRE(std::isfinite(e.t) && e.t >= 0);
    switch (e.kind) {
    case pb::watch::ProbeEvent::Kind::Hello: {
        const double w = e.fields.value(QStringLiteral("world_size")).toDouble(1);
        FUZZ_REQUIRE(w >= 1 && w <= pb::watch::kMaxProbeRanks && e.fields.value(QStringLiteral("world_size")).toInt(1) == static_cast<int>(w));
        break;
    }
    case pb::watch::ProbeEvent::Kind::Step: {
        const pb::StepSample s = pb::watch::stepSampleFromProbe(e.fields);
        FUZZ_REQUIRE(count(s.step) && count(s.tokens));
        FUZZ_REQUIRE(duration(s.stepTimeMs) && duration(s.forwardMs) && duration(s.backwardMs) && duration(s.optimizerMs) && duration(s.dataWaitMs));
        FUZZ_REQUIRE(bytes(s.peakAllocatedBytes) && bytes(s.reservedBytes) && bytes(s.allocatedBytes));
        FUZZ_REQUIRE(reportedFinite(s.loss) && reportedNonNegative(s.learningRate) && reportedNonNegative(s.gradNorm));
        break;
    }
    case pb::watch::ProbeEvent::Kind::Validation: {
        const pb::ValidationResult v = pb::watch::validationFromProbe(e.fields);
        FUZZ_REQUIRE(count(v.step) && count(v.batches) && duration(v.durationMs) && std::isfinite(v.loss));
        break;
    }
    case pb::watch::ProbeEvent::Kind::Checkpoint: {
        const pb::CheckpointWrite c = pb::watch::checkpointFromProbe(e.fields);
        FUZZ_REQUIRE(count(c.step) && bytes(c.bytes) && duration(c.writeMs));
        break;
    }
    default:
        break;
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    // The input as a stream, fed in two pieces (a split the first byte chooses) so that lines
    // crossing reads are split too; over-long lines must not reach the reader.
    const char *chars = reinterpret_cast<const char *>(data);
    const auto n = static_cast<qsizetype>(size);
    const qsizetype cut = n > 0 ? static_cast<unsigned char>(chars[0]) * n / 256 : 0;
    pb::watch::ProbeLineSplitter splitter;
    int tooLong = 0;
    splitter.feed(chars, cut, checkLine, [&] { ++tooLong; });
    splitter.feed(chars + cut, n - cut, checkLine, [&] { ++tooLong; });
    splitter.flush(checkLine);
    return 0;
}
