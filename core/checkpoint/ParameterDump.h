#pragma once
// How far apart two runs ended: their parameter dumps (float32, the same tensors in the same order,
// written by writeParameterDump or a scale worker's --dump-parameters) compared value by value.
// The restore proof's second figure beside the losses. No torch here.
#include <QString>

#include <cstdint>

namespace pb {

struct ParameterDistance {
    double relative = 0;     // ||a - b|| / ||a||, 0 when both are all zero
    double maxAbs = 0;       // the largest |a_i - b_i|
    int64_t values = 0;
    int64_t differing = 0;   // values whose bits differ
};

// Throws PilotBenchError naming the file when one cannot be read or the two differ in size.
ParameterDistance parameterDistance(const QString &a, const QString &b);

} // namespace pb
