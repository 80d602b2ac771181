#pragma once
// Configs and lookups shared by the estimator's tests (tst_memory_estimator, tst_activation_estimates,
// tst_moe_estimates).
#include "config/Presets.h"
#include "estimate/MemoryEstimator.h"

#include <QtTest>

namespace pbtest {

using namespace pb;

// 1 layer, hidden 8, 2 heads of 4 (no GQA), SwiGLU 16, vocab 32, untied.
// Parameters: embed 32*8 = 256; block: 2 norms 8+8, q/k/v/o 4*64 = 256, gate/up/down 3*128 = 384
// -> 656; final norm 8; lm_head 256. Total 1176.
inline RunConfig toy()
{
    RunConfig c;
    c.model.layers = 1;
    c.model.hiddenSize = 8;
    c.model.attentionHeads = 2;
    c.model.kvHeads = 2;
    c.model.intermediateSize = 16;
    c.model.vocabSize = 32;
    c.model.maxPositions = 64;
    c.train.precision = Precision::Fp32;
    c.train.seqLen = 4;
    c.train.microBatch = 1;
    c.train.optimizer.kind = OptimizerKind::AdamW;
    return c;
}

// preset:tiny-moe: 2 layers, hidden 64, 4 heads of 16 over 2 KV heads, per-head q/k norm, fp32,
// B=4, T=64 (N = 256 tokens). Layer 0 dense (SwiGLU 176), layer 1 sparse: 4 experts of 48, top-2
// (not renormalised), a shared expert of 64 with its sigmoid gate.
inline RunConfig tinyMoe() { return presetConfig(QStringLiteral("tiny-moe")); }

// The same model with every layer dense.
inline RunConfig denseOf(RunConfig c)
{
    c.model.moe = MoeConfig {};
    return c;
}


// One phase of an estimate by name (a copy: estimates are often temporaries).
inline PhasePeak phaseOf(const MemoryEstimate &e, const char *name)
{
    for (const auto &p : e.phases)
        if (p.phase == name)
            return p;
    qFatal("no phase %s", name);
}

} // namespace pbtest
