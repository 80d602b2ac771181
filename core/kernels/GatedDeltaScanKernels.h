#pragma once
// The state recurrence of the chunked gated delta rule (model/GatedDeltaScan.h), one launch per
// layer and direction where the LibTorch loop issues about ten kernels per chunk of 64 tokens. Plain
// pointers, no torch: model/GatedDeltaScan.cpp checks shapes and allocates. fp32 throughout.
//
// Per head h (the batch's B x H heads as one index) and chunk i, with S the head's [dk, dv] state:
//     entering[h, i] = S
//     innovation[h, i] = Y_i + zScale * Z_i S                       [chunk, dv]
//     S = decay[h, i] * S + xScale * X_i innovation[h, i] (+ Xr_i Yr_i)
// chunks taken in order, or from the last to the first (`reverse`: the backward's recurrence of the
// state's gradient); final = S after the last one.
#include <cstdint>

namespace pb::kernels {

// Element (r, c) of matrix m (m = head * chunks + chunk) at p[m * batch + r * row + c * col]: the
// strides let the backward pass transposed views without copies.
struct ScanMatrix {
    const float *p = nullptr;
    int64_t batch = 0, row = 0, col = 0;
};

struct DeltaScanArgs {
    int64_t heads = 0, chunks = 0, chunk = 0, dk = 0, dv = 0;
    const float *decay = nullptr;   // [heads, chunks]
    ScanMatrix x;                   // [dk, chunk]
    ScanMatrix y;                   // [chunk, dv]
    ScanMatrix z;                   // [chunk, dk]
    ScanMatrix xr, yr;              // [dk, chunk] and [chunk, dv]; xr.p null: no such term
    float xScale = 1.f, zScale = -1.f;
    const float *initial = nullptr; // [heads, dk, dv]; null: zeros
    float *entering = nullptr;      // [heads, chunks, dk, dv], contiguous
    float *final = nullptr;         // [heads, dk, dv], contiguous
    float *innovation = nullptr;    // [heads, chunks, chunk, dv], contiguous
    bool reverse = false;
    int64_t tile = 0;               // value columns per block (set by the launcher)
};

// Runs the recurrence on `stream`. False, having launched nothing, where one chunk's matrices do
// not fit a block's shared memory (the caller then takes the LibTorch loop).
bool gatedDeltaScan(DeltaScanArgs args, void *stream);

} // namespace pb::kernels
