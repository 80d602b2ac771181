#pragma once
// FP8's speed for a run as measured evidence: two fitting pilots of the same config, one in an fp8
// precision and one in bf16-mixed, on the same device. Compare projects an fp8 step with this
// ratio (never the datasheets' FP8/BF16 peak ratio), and a bf16 comparison says what fp8 measured.
#include "config/RunConfig.h"
#include "history/HistoryTypes.h"

#include <QJsonObject>

#include <cstdint>
#include <optional>
#include <string>

namespace pb {

class HistoryStore;

struct FormatSpeedup {
    Precision fp8 = Precision::Fp8Rowwise;   // the fp8 precision measured
    double ratio = 0;                        // tokens/s in fp8 / tokens/s in bf16-mixed
    int64_t fp8RunId = 0, bf16RunId = 0;
    std::string deviceName;                  // "NVIDIA H200"
    double fp8TokensPerSecond = 0, bf16TokensPerSecond = 0;

    // "pilots 12 (fp8-rowwise) and 11 (bf16-mixed) on NVIDIA H200"
    std::string source() const;
    QJsonObject toJson() const;
};

// The precision a run was recorded with ("bf16-mixed" for a config that predates the field).
std::string runPrecision(const RunRecord &run);

// `config` under fp8 (its own fp8 precision, or rowwise then tensorwise for any other precision)
// and under bf16-mixed: the newest fitting pilot of the fp8 config and the newest fitting pilot
// of the bf16-mixed one on the same device (`deviceName` when given). nullopt when either is
// missing.
std::optional<FormatSpeedup> measuredFp8Speedup(const HistoryStore &store, const RunConfig &config, const std::string &deviceName = {});

} // namespace pb
