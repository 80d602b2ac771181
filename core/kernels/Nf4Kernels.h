#pragma once
// QLoRA's dequantisation on the device (config/Nf4Format.h's layout), built with the fused kernels
// (PB_WITH_CUDA_KERNELS). Plain pointers, no torch: model/Nf4.cpp checks and allocates.
#include "kernels/FusedKernels.h"

#include <cstdint>

namespace pb::kernels {

// out[i] = nf4[code i] * (absmax[i / 64] * scales[i / (64 * 256)] + offset[0]), computed in fp32
// and rounded once to `type` (the composite path's arithmetic, so the two agree bit for bit).
// `packed` holds (numel + 1) / 2 bytes, the first code in the high nibble.
void nf4Dequantize(const uint8_t *packed, const int8_t *absmax, const float *scales, const float *offset, void *out, Dtype type, int64_t numel,
                   void *stream);

} // namespace pb::kernels
