#pragma once
// Samples are stored as column-packed chunks (one row per up to kChunkSamples steps) rather than one
// row per step: loading a million samples for a plot is then a few hundred blob reads and memcpys,
// not a million rows of variants. Layout, little-endian: "PBS" + format byte, uint32 count, then 15
// columns of `count` 8-byte values in kColumns order (integers as int64, the rest as double).
#include "result/PilotTypes.h"
#include "history/HistoryTypes.h"

#include <QByteArray>
#include <QString>

#include <vector>

namespace pb::history {

constexpr size_t kChunkSamples = 4096;
constexpr int kChunkColumns = 15;

QByteArray encodeChunk(const StepSample *samples, size_t count);
// Throw PilotBenchError naming `where` when the blob is not a valid chunk.
void appendChunk(const QByteArray &blob, SampleSeries &series, const QString &where);
void appendChunk(const QByteArray &blob, std::vector<StepSample> &samples, const QString &where);

} // namespace pb::history
