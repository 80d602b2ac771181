// Hand-computed budgets for a toy shape, the sharding rules, the micro-batch search, the
// checkpoint size of a planned job and the Llama-3.1-8B checks. The numbers are worked out
// in the comments, not taken from the code.
#include "config/Presets.h"
#include "estimate/ActivationModel.h"
#include "estimate/CardCapacities.h"
#include "estimate/CheckpointBytes.h"
#include "estimate/MemoryEstimator.h"
#include "estimate/ModelStates.h"
#include "estimate/ReferenceEstimators.h"
#include "util/Errors.h"

#include <QtTest>

#include <algorithm>

using namespace pb;

namespace {

// 1 layer, hidden 8, 2 heads of 4 (no GQA), SwiGLU 16, vocab 32, untied.
// Parameters: embed 32*8 = 256; block: 2 norms 8+8, q/k/v/o 4*64 = 256, gate/up/down 3*128 = 384
// -> 656; final norm 8; lm_head 256. Total 1176.
RunConfig toy()
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
RunConfig tinyMoe() { return presetConfig(QStringLiteral("tiny-moe")); }

// The same model with every layer dense.
RunConfig denseOf(RunConfig c)
{
    c.model.moe = MoeConfig {};
    return c;
}

} // namespace

// One phase of an estimate by name (a copy: estimates are often temporaries).
PhasePeak phaseOf(const MemoryEstimate &e, const char *name)
{
    for (const auto &p : e.phases)
        if (p.phase == name)
            return p;
    qFatal("no phase %s", name);
}

class TestMemoryEstimator final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // The whole run: construction holds the weights alone, each in the dtype it keeps (frozen bf16,
    // trainable fp32 masters); validation and checkpoint phases appear when scheduled; the peak is
    // the largest phase.
    // CUDA's caching allocator: a fresh request of 10 MiB or more takes a segment rounded up to
    // 2 MiB and keeps a remainder of up to 1 MiB (an 11 MiB expert matrix holds 12 MiB, measured on
    // an H200 at construction); smaller requests share split segments.
    void cachingAllocatorBlocks()
    {
        constexpr int64_t MiB = 1024 * 1024;
        QCOMPARE(cudaCachingBlockBytes(2048LL * 1408 * 4), 12 * MiB);
        QCOMPARE(cudaCachingBlockBytes(12 * MiB), 12 * MiB);
        QCOMPARE(cudaCachingBlockBytes(21 * MiB / 2), 21 * MiB / 2); // 1.5 MiB left: split off
        QCOMPARE(cudaCachingBlockBytes(5 * MiB), 5 * MiB);
        RunConfig c = tinyMoe();
        c.model.hiddenSize = 2048;
        c.model.attentionHeads = 16;
        c.model.kvHeads = 16;
        c.model.moe.expertIntermediateSize = 1408;
        c.model.moe.denseLayers.clear();
        EstimateOptions gpu;
        gpu.card = "h200-141gb";
        EstimateOptions cpu;
        cpu.device = DeviceKind::Cpu;
        const int64_t matrices = 3 * c.model.moe.experts * c.model.layers;
        QCOMPARE(phaseOf(estimateMemory(c, gpu), "construction").breakdown.trainableWeights
                     - phaseOf(estimateMemory(c, cpu), "construction").breakdown.trainableWeights,
                 matrices * MiB);
    }

    void wholeRunPhases()
    {
        RunConfig c = presetConfig(QStringLiteral("llama-3.2-1b"));
        c.train.mode = TrainMode::Lora;
        c.train.precision = Precision::Bf16Mixed;
        EstimateOptions o;
        o.card = "h200-141gb";
        MemoryEstimate e = estimateMemory(c, o);
        const auto construction = phaseOf(e, "construction").breakdown;
        QCOMPARE(construction.frozenWeights, e.breakdown.frozenWeights);
        QVERIFY(construction.trainableWeights < e.breakdown.trainableWeights); // no autocast copies yet
        QCOMPARE(construction.gradients + construction.optimizer + construction.activations + construction.logits + construction.blasWorkspaces, 0LL);
        QCOMPARE(e.phases.size(), size_t(4));
        c.validation.everySteps = 10;
        c.validation.batches = 2;
        c.checkpoint.everySteps = 10;
        e = estimateMemory(c, o);
        QCOMPARE(e.phases.size(), size_t(6));
        QVERIFY(phaseOf(e, "validation").breakdown.tensors() < e.peakAllocatedBytes);
        QCOMPARE(phaseOf(e, "checkpoint").breakdown.optimizer, phaseOf(e, "forward").breakdown.optimizer); // the states, no step temporary
        QCOMPARE(phaseOf(e, "checkpoint").breakdown.gradients, 0LL);
        int64_t largest = 0;
        for (const auto &p : e.phases)
            largest = std::max(largest, p.breakdown.tensors());
        QCOMPARE(e.peakAllocatedBytes, largest);
    }

    void modelStates_data()
    {
        QTest::addColumn<int>("mode");
        QTest::addColumn<int>("precision");
        QTest::addColumn<qint64>("frozen");
        QTest::addColumn<qint64>("trainable");
        QTest::addColumn<qint64>("gradients");
        QTest::addColumn<qint64>("optimizer");
        QTest::addColumn<qint64>("copies");
        // Full fp32: 4 B weights and grads, two 4 B AdamW moments: 4704, 4704, 9408.
        QTest::newRow("full fp32") << int(TrainMode::Full) << int(Precision::Fp32) << 0LL << 4704LL << 4704LL << 9408LL << 0LL;
        // Full bf16-mixed: fp32 master as above, plus bf16 copies of the matmul weights
        // (q,k,v,o 256 + MLP 384 + lm_head 256 = 896 elements, not the embedding) = 1792 B.
        QTest::newRow("full bf16-mixed") << int(TrainMode::Full) << int(Precision::Bf16Mixed) << 0LL << 4704LL << 4704LL << 9408LL << 1792LL;
        // Pure bf16: 2 B everywhere: 2352, 2352, moments 2*2*1176 = 4704.
        QTest::newRow("full bf16") << int(TrainMode::Full) << int(Precision::Bf16) << 0LL << 2352LL << 2352LL << 4704LL << 0LL;
        // LoRA rank 2 on q,k,v,o: A 2x8 + B 8x2 = 32 per projection, 128 trainable (fp32: 512 B,
        // grads 512, moments 1024, copies 2*128 = 256); the 1176 base parameters frozen in bf16: 2352.
        QTest::newRow("lora bf16-mixed") << int(TrainMode::Lora) << int(Precision::Bf16Mixed) << 2352LL << 512LL << 512LL << 1024LL << 256LL;
    }
    void modelStates()
    {
        QFETCH(int, mode);
        QFETCH(int, precision);
        QFETCH(qint64, frozen);
        QFETCH(qint64, trainable);
        QFETCH(qint64, gradients);
        QFETCH(qint64, optimizer);
        QFETCH(qint64, copies);
        RunConfig c = toy();
        c.train.mode = TrainMode(mode);
        c.train.precision = Precision(precision);
        c.train.lora.rank = 2;
        const ModelStateBytes s = modelStateBytes(c);
        QCOMPARE(s.frozenWeights, frozen);
        QCOMPARE(s.trainableWeights, trainable);
        QCOMPARE(s.gradients, gradients);
        QCOMPARE(s.optimizerStates, optimizer);
        QCOMPARE(s.autocastCopies, copies);
    }

    void checkpointBytes_data()
    {
        QTest::addColumn<QString>("shape");     // "tiny": preset:tiny, 125,248 parameters; "toy": toy() above, 1176
        QTest::addColumn<int>("mode");
        QTest::addColumn<int>("precision");
        QTest::addColumn<int>("optimizer");
        QTest::addColumn<double>("momentum");
        QTest::addColumn<qint64>("bytes");
        // Weights as stored plus the trainable parameters' optimizer state; no step counters
        // (checkpointBytesFor counts tensors only). preset:tiny: fp32, AdamW, all trainable:
        // 125,248 x 4 + 2 x 125,248 x 4 = 500,992 + 1,001,984 = 1,502,976.
        QTest::newRow("tiny fp32 adamw") << "tiny" << int(TrainMode::Full) << int(Precision::Fp32) << int(OptimizerKind::AdamW) << 0.9 << 1502976LL;
        // Mixed precision keeps fp32 masters and fp32 moments; autocast's 16-bit copies are not saved.
        QTest::newRow("tiny bf16-mixed adamw") << "tiny" << int(TrainMode::Full) << int(Precision::Bf16Mixed) << int(OptimizerKind::AdamW) << 0.9 << 1502976LL;
        // Pure bf16: 125,248 x 2 + 2 x 125,248 x 2 = 751,488.
        QTest::newRow("tiny bf16 adamw") << "tiny" << int(TrainMode::Full) << int(Precision::Bf16) << int(OptimizerKind::AdamW) << 0.9 << 751488LL;
        // SGD with momentum keeps one buffer: 125,248 x 4 x 2 = 1,001,984; without momentum none.
        QTest::newRow("tiny fp32 sgd momentum") << "tiny" << int(TrainMode::Full) << int(Precision::Fp32) << int(OptimizerKind::Sgd) << 0.9 << 1001984LL;
        QTest::newRow("tiny fp32 sgd plain") << "tiny" << int(TrainMode::Full) << int(Precision::Fp32) << int(OptimizerKind::Sgd) << 0.0 << 500992LL;
        // LoRA rank 2 on the toy: the 1176 frozen base weights in bf16 (2352 B), the 128 adapter
        // parameters in fp32 (512 B) and their two fp32 moments (1024 B): 3888.
        QTest::newRow("toy lora bf16-mixed") << "toy" << int(TrainMode::Lora) << int(Precision::Bf16Mixed) << int(OptimizerKind::AdamW) << 0.9 << 3888LL;
    }
    void checkpointBytes()
    {
        QFETCH(QString, shape);
        QFETCH(int, mode);
        QFETCH(int, precision);
        QFETCH(int, optimizer);
        QFETCH(double, momentum);
        QFETCH(qint64, bytes);
        RunConfig c = shape == QLatin1String("tiny") ? presetConfig(QStringLiteral("tiny")) : toy();
        if (shape == QLatin1String("tiny")) {
            const ParamCounts params = countParameters(c);
            QCOMPARE(params.total, qint64(125248));
            QCOMPARE(params.trainable, qint64(125248));
        }
        c.train.mode = TrainMode(mode);
        c.train.precision = Precision(precision);
        c.train.optimizer.kind = OptimizerKind(optimizer);
        c.train.optimizer.momentum = momentum;
        c.train.lora.rank = 2;
        QCOMPARE(checkpointBytesFor(c), bytes);
    }

    void activationsMathVersusFused()
    {
        // fp32, B=1, T=4 (n = 4 tokens), hidden 8, 2 heads, inter 16; every element 4 B.
        // norm1: input x 4*4*8 = 128 (kept by pow and the rsqrt multiply), pow's output 128
        // (kept by mean), rsqrt 4*4 = 16, normalised h 128 (kept by weight * h)       = 400
        // q,k,v share the norm output (fp32, no autocast casts)                    = 128
        // math attention: contiguous q and expanded k, v 3*4*4*8 = 384, mask 4*4 = 16,
        // probs 4*1*2*4*4 = 128                                                    = 528
        // o_proj input 128; norm2 (residual, pow, rsqrt, h) 400; gate/up share input 128
        // SwiGLU: gate out, silu out, up out 3*4*4*16 = 768; down input 256
        // total 400 + 128 + 528 + 128 + 400 + 128 + 768 + 256 = 2736
        const RunConfig c = toy();
        const ActivationBytes math = activationBytes(c, false, false);
        QCOMPARE(math.savedPerBlock.size(), size_t(1));
        QCOMPARE(math.savedPerBlock[0], 2736LL);
        // Of which the block input itself (recompute keeps it already): 128.
        QCOMPARE(math.inputSavedPerBlock[0], 128LL);
        // SDPA: q,k,v 384 + output 128 (o_proj reads a view of it) + fp32 log-sum-exp 4*1*2*4 = 32:
        // 544 replaces math's 528 + o_proj's 128 -> 2736 - 656 + 544 = 2624.
        const ActivationBytes fused = activationBytes(c, true, false);
        QCOMPARE(fused.savedPerBlock[0], 2624LL);
        // attention=math forces the math path even where SDPA exists.
        RunConfig m = c;
        m.train.attention = AttentionImpl::Math;
        QCOMPARE(activationBytes(m, true, false).savedPerBlock[0], 2736LL);
        // Logits: 4 tokens x vocab 32 = 128 elements. Forward: fp32 logits 512 (the fp32 upcast is
        // the same tensor) + log-softmax 512 = 1024; backward: three fp32 N x V tensors = 1536.
        QCOMPARE(math.logitsForwardPeak, 1024LL);
        QCOMPARE(math.logitsBackwardPeak, 1536LL);
        // Final norm 400 as norm1, plus lm_head's input 128 = 528; lm_head keeps the very
        // tensor the loss function holds, so nothing extra is alive at the loss.
        QCOMPARE(math.headSaved, 528LL);
        QCOMPARE(math.headOutputAlive, 0LL);
        // Recompute keeps the block input only: 4 tokens x 8 x 4 B = 128.
        QCOMPARE(math.blockInputBytes, 128LL);
        // MLP backward above the kept set: down_proj's weight gradient 16*8*4 = 512, then at
        // the multiply the gradients of the product, silu(g) and up, 3*4*4*16 = 768, less the
        // product down_proj kept (256, freed once down's backward ran): 512 + 512 = 1024.
        QCOMPARE(math.backwardMlpExtraPerBlock[0], 1024LL);
        // Attention backward at the softmax: kept up to the probabilities 400 + 128 + 528 = 1056;
        // gradients of o_proj (64), norm2 (8) and the MLP (3*128) = 456 floats = 1824 B; the
        // softmax's input and output gradients 2*128 and expanded v's gradient 128 = 384;
        // above the whole kept set: 1056 + 1824 + 384 - 2736 = 528.
        QCOMPARE(math.backwardAttentionExtraPerBlock[0], 528LL);
    }

    void activationsBf16MixedCasts()
    {
        // bf16-mixed: residual fp32 (the embedding trains), compute bf16. norm1 400 as in fp32
        // (x is fp32, the weight is an fp32 master, so its output is fp32 too).
        // q,k,v: autocast casts the fp32 norm output once per projection: 3 * 2*4*8 = 192.
        // math attention: 3*2*4*8 = 192 + mask 16 + rotary tables cast per layer 2*2*4*4 = 64
        // + probs 2*1*2*16 = 64 -> 336. o_proj input (already bf16, shared) 2*4*8 = 64.
        // norm2 400; gate/up casts 2 * 64 = 128; SwiGLU 3*2*4*16 = 384; down input 128.
        // total 400 + 192 + 336 + 64 + 400 + 128 + 384 + 128 = 2032
        RunConfig c = toy();
        c.train.precision = Precision::Bf16Mixed;
        const ActivationBytes a = activationBytes(c, false, false);
        QCOMPARE(a.savedPerBlock[0], 2032LL);
        // Backward releases the bf16 weight copies as the matmuls' backward runs: down_proj's
        // 16*8*2 = 256 B before the MLP's multiply; gate, up, down (3*128) and o_proj (64)
        // elements, 448*2 = 896 B, before the attention's softmax.
        QCOMPARE(a.backwardMlpCopiesFreedPerBlock[0], 256LL);
        QCOMPARE(a.backwardAttentionCopiesFreedPerBlock[0], 896LL);
        // In fp32 there are no copies to release.
        QCOMPARE(activationBytes(toy(), false, false).backwardAttentionCopiesFreedPerBlock[0], 0LL);
    }

    void activationsLoraBf16MixedResidualIsBf16()
    {
        // LoRA rank 2 on q,k,v,o under bf16-mixed: the frozen embedding is bf16, so the residual
        // stream is bf16 and, without recompute, the block input does not require grad.
        // norm1: nothing requires grad (frozen bf16 weight): nothing kept; output bf16.
        // q,k,v: lora_A keeps the bf16 norm output once 2*4*8 = 64, lora_B each A's output
        // 2*4*2 = 16 -> 64 + 48 = 112. Math attention as under bf16-mixed: 336.
        // o_proj: input 64 + lora_B's 16 = 80.
        // norm2 on the bf16 residual: its fp32 copy 4*4*8 = 128, pow 128, rsqrt 16 = 272 (frozen
        // weight: h' not kept). MLP frozen: its inputs are not kept, but gate out, silu out and
        // up out are (the gradient flows through them): 3*2*4*16 = 384.
        // total 0 + 112 + 336 + 80 + 272 + 384 = 1184
        RunConfig c = toy();
        c.train.mode = TrainMode::Lora;
        c.train.lora.rank = 2;
        c.train.precision = Precision::Bf16Mixed;
        const ActivationBytes a = activationBytes(c, false, false);
        QCOMPARE(a.savedPerBlock[0], 1184LL);
        QCOMPARE(a.inputSavedPerBlock[0], 0LL);
        // Recompute keeps bf16 block inputs: 2*4*8 = 64.
        QCOMPARE(a.blockInputBytes, 64LL);
        // Final norm: fp32 copy 128 + pow 128 + rsqrt 16 = 272; the frozen lm_head keeps nothing,
        // so the bf16 norm output (2*4*8 = 64) is alive beside it during the loss.
        QCOMPARE(a.headSaved, 272LL);
        QCOMPARE(a.headOutputAlive, 64LL);
        // MLP backward: no weight gradient; down_proj is frozen and kept nothing, so the
        // product's gradient and those of silu(g) and up all add: 3*2*4*16 = 384.
        QCOMPARE(a.backwardMlpExtraPerBlock[0], 384LL);
        // The norm output needs no gradient, so q/k/v's lora_A matmuls keep not their weights'
        // bf16 copies (2*8 elements each, 2 B): 3 * 2*2*8 = 96 B nothing holds on CPU.
        QCOMPARE(a.unkeptAutocastCopies, 96LL);
        // With recompute the block input asks for grad: every copy is kept.
        c.train.recompute = true;
        QCOMPARE(activationBytes(c, false, false).unkeptAutocastCopies, 0LL);
    }

    void moeSparseLayerAgainstDense()
    {
        // fp32, N = 256 tokens, k = 2: n*k = 512 routed pairs. Both layers share the attention
        // (with its q/k norm) and the norms; the MLPs differ.
        // Dense MLP (layer 0): gate/up input 4*256*64 = 65,536; gate out, silu out, up out
        // 3*4*256*176 = 540,672; down input 4*256*176 = 180,224                     = 786,432.
        // Sparse MLP (layer 1): the norm output, read by router, shared gate/up and the sigmoid
        // gate's linear: 65,536; softmax's fp32 output 4*256*4 = 4,096; top-k indices 8*256*2 =
        // 4,096; order 8*512 = 4,096; token 8*512 = 4,096; permuted tokens 4*512*64 = 131,072;
        // the experts' gate out, silu out, up out 3*4*512*48 = 294,912 and down inputs 4*512*48
        // = 98,304; the weighting multiply: the concatenated outputs 4*512*64 = 131,072 and the pair
        // weights 4*512 = 2,048; shared expert 3*4*256*64 = 196,608 + down input 65,536; its gate:
        // sigmoid output 4*256 = 1,024 and the shared output 4*256*64 = 65,536; index_add keeps its
        // source, the weighted outputs 4*512*64 = 131,072                            = 1,199,104.
        // Layer 1 - layer 0 = 1,199,104 - 786,432 = 412,672.
        const RunConfig c = tinyMoe();
        const ActivationBytes a = activationBytes(c, true, false);
        QCOMPARE(a.savedPerBlock.size(), size_t(2));
        QCOMPARE(a.savedPerBlock[1] - a.savedPerBlock[0], 412672LL);
        // Backward of the sparse MLP, at its worst point (the weighting multiply): the shared
        // expert ran first (its weight gradients 3*64*64*4 + 64*4 = 49,408 B, its kept 328,704 B
        // released, the norm output's gradient 65,536 B begun); index_add's gathered gradient and
        // the multiply's two [512, 64] fp32 products 3*131,072 = 393,216.
        // 49,408 + 65,536 - 328,704 + 393,216 = 179,456.
        QCOMPARE(a.backwardMlpExtraPerBlock[1], 179456LL);
        QVERIFY(std::find(a.assumptions.begin(), a.assumptions.end(),
                          std::string("mixture of experts: N*k routed token copies per sparse layer (N = micro_batch x seq_len tokens, "
                                      "k = experts_per_token), split evenly across the experts where a per-expert peak depends on it; "
                                      "expert parallelism not modelled")) != a.assumptions.end());
        // The dense layer is the dense model's layer, whatever the precision and attention path.
        for (Precision p : {Precision::Fp32, Precision::Bf16Mixed, Precision::Bf16}) {
            for (bool fused : {false, true}) {
                RunConfig moe = c;
                moe.train.precision = p;
                const ActivationBytes sparse = activationBytes(moe, fused, fused), dense = activationBytes(denseOf(moe), fused, fused);
                QCOMPARE(sparse.savedPerBlock[0], dense.savedPerBlock[0]);
                QCOMPARE(sparse.inputSavedPerBlock[0], dense.inputSavedPerBlock[0]);
                QCOMPARE(sparse.forwardAbovePerBlock[0], dense.forwardAbovePerBlock[0]);
                QCOMPARE(sparse.backwardMlpExtraPerBlock[0], dense.backwardMlpExtraPerBlock[0]);
                QCOMPARE(sparse.backwardAttentionExtraPerBlock[0], dense.backwardAttentionExtraPerBlock[0]);
                QCOMPARE(sparse.backwardMlpCopiesFreedPerBlock[0], dense.backwardMlpCopiesFreedPerBlock[0]);
                QCOMPARE(sparse.backwardAttentionCopiesFreedPerBlock[0], dense.backwardAttentionCopiesFreedPerBlock[0]);
                QVERIFY(dense.assumptions.size() + 1 == sparse.assumptions.size());
            }
        }
    }

    void moeActivationsLinearInK_data()
    {
        QTest::addColumn<int>("precision");
        QTest::addColumn<int>("mode");
        QTest::addColumn<QString>("variant");
        QTest::addColumn<int>("layer");       // the sparse layer compared
        QTest::addColumn<qint64>("perPair");  // bytes kept per routed (token, choice) pair
        // Per routed pair, from the ops of SparseMoe::forward (h = 64, expert width 48, rank 16).
        // Wherever the experts' outputs need a gradient, index_add also keeps its source, the
        // weighted row (the multiply's promoted dtype times 64), counted last in each sum below.
        // fp32, all trainable: top-k index 8, order 8, token 8; its permuted row 4*64; its expert's
        // gate out, silu out, up out 3*4*48 and down input 4*48; its concatenated output row 4*64
        // and pair weight 4: 24 + 256 + 768 + 256 + 4 = 1,308 + 4*64 = 1,564.
        QTest::newRow("fp32") << int(Precision::Fp32) << int(TrainMode::Full) << "" << 1 << 1564LL;
        // normalize_top_k: weights / sum keeps the fp32 weights, 4 more per pair (the sum is per token).
        QTest::newRow("fp32 normalized") << int(Precision::Fp32) << int(TrainMode::Full) << "normalize" << 1 << 1568LL;
        // bf16-mixed: fp32 residual and norm output, bf16 compute. The permuted row is cast to
        // bf16 once for all experts and kept instead of the row: 2*64; SwiGLU 3*2*48 + down
        // input 2*48; the bf16 output row 2*64 and the fp32 pair weight 4:
        // 24 + 128 + 384 + 128 + 4 = 668 + 4*64 = 924.
        QTest::newRow("bf16-mixed") << int(Precision::Bf16Mixed) << int(TrainMode::Full) << "" << 1 << 924LL;
        // Pure bf16: the permuted row kept once 2*64; SwiGLU 384; output row 2*64, pair weight 2:
        // 24 + 128 + 384 + 128 + 2 = 666 + 2*64 = 794.
        QTest::newRow("bf16") << int(Precision::Bf16) << int(TrainMode::Full) << "" << 1 << 794LL;
        // LoRA on q,k,v,o under bf16-mixed: the residual and norm output are bf16 (frozen
        // embedding and norm); the experts are frozen, so their inputs and down's are not kept, but
        // the gradient flows through them: gate out, silu out, up out 3*2*48; output row 2*64 (the
        // router's weights need a gradient), pair weight 2: 24 + 288 + 128 + 2 = 442 + 2*64 = 570.
        QTest::newRow("lora bf16-mixed") << int(Precision::Bf16Mixed) << int(TrainMode::Lora) << "" << 1 << 570LL;
        // LoRA all-linear under bf16-mixed: every expert projection carries an adapter. The bf16
        // permuted row kept once 2*64; gate's and up's lora_B keep A's output 2*2*16; SwiGLU 3*2*48;
        // down keeps its input 2*48 and its lora_B's 2*16; output row 2*64, pair weight 2:
        // 24 + 128 + 64 + 288 + 96 + 32 + 128 + 2 = 762 + 2*64 = 890.
        QTest::newRow("lora all-linear bf16-mixed") << int(Precision::Bf16Mixed) << int(TrainMode::Lora) << "all-linear" << 1 << 890LL;
        // Mixtral's names (w1, w3, w2 for gate, up, down), every layer sparse, LoRA on gate_proj
        // only, fp32: the first layer has no gradient flowing in, and the router is frozen, so only
        // the experts' w1 adapters need anything: token 8; the permuted row 4*64 (lora_A reads it),
        // lora_B's input 4*16; gate out (silu) and up out (the product) 2*4*48; pair weight 4:
        // 8 + 256 + 64 + 384 + 4 = 716 + 4*64 = 972.
        QTest::newRow("mixtral lora w1") << int(Precision::Fp32) << int(TrainMode::Lora) << "mixtral" << 0 << 972LL;
        // Only layer 1's router trains ("...mlp.gate.weight", which no gate_proj matches): top-k
        // index, order, token 24 and the concatenated output row the multiply keeps for the
        // router's gradient 4*64: 280.
        QTest::newRow("router only") << int(Precision::Fp32) << int(TrainMode::Freeze) << "router" << 1 << 280LL;
    }
    void moeActivationsLinearInK()
    {
        QFETCH(int, precision);
        QFETCH(int, mode);
        QFETCH(QString, variant);
        QFETCH(int, layer);
        QFETCH(qint64, perPair);
        RunConfig c = tinyMoe();
        c.train.precision = Precision(precision);
        c.train.mode = TrainMode(mode);
        c.model.moe.normalizeTopK = variant == QLatin1String("normalize");
        if (variant == QLatin1String("all-linear"))
            c.train.lora.targets = {"all-linear"};
        if (variant == QLatin1String("mixtral")) {
            c.model.family = "mixtral";
            c.model.moe.denseLayers.clear();
            c.train.lora.targets = {"gate_proj"};
        }
        if (variant == QLatin1String("router"))
            c.train.trainable = {"model.layers.1.mlp.gate.weight"};
        const int64_t n = c.train.microBatch * c.train.seqLen;
        QCOMPARE(n, 256LL);
        for (bool fused : {false, true}) {
            std::vector<int64_t> saved;
            for (int64_t k : {1, 2, 4}) {
                c.model.moe.expertsPerToken = k;
                saved.push_back(activationBytes(c, fused, fused).savedPerBlock[size_t(layer)]);
            }
            // k = 1 -> 2 adds n pairs, 2 -> 4 adds 2n.
            QCOMPARE(saved[1] - saved[0], n * perPair);
            QCOMPARE(saved[2] - saved[1], 2 * n * perPair);
        }
    }

    void qkNormAddsItsTerms_data()
    {
        QTest::addColumn<QString>("preset");
        QTest::addColumn<int>("precision");
        QTest::addColumn<bool>("fused");
        QTest::addColumn<int>("qkNorm");
        QTest::addColumn<qint64>("added");
        // preset:tiny (and tiny-moe's attention): N = 256 tokens, q 4 heads x 16 = 64 wide, k 2 x 16 = 32.
        // fp32, per head: the norm keeps its input (fp32 already) and pow's output 2*4*N*width,
        // rsqrt's 4 per row, and, its weight training, the normalised h' 4*N*width.
        // q: 8*256*64 + 4*256*4 + 4*256*64 = 200,704; k: 8*256*32 + 4*256*2 + 4*256*32 = 100,352.
        QTest::newRow("tiny fp32 head math") << "tiny" << int(Precision::Fp32) << false << int(QkNorm::Head) << 301056LL;
        QTest::newRow("tiny fp32 head fused") << "tiny" << int(Precision::Fp32) << true << int(QkNorm::Head) << 301056LL;
        // Over the whole projection: one rsqrt per token: q 131,072 + 1,024 + 65,536, k 65,536 + 1,024 + 32,768.
        QTest::newRow("tiny fp32 full") << "tiny" << int(Precision::Fp32) << true << int(QkNorm::Full) << 296960LL;
        QTest::newRow("tiny-moe fp32 head") << "tiny-moe" << int(Precision::Fp32) << true << int(QkNorm::Head) << 301056LL;
        // bf16-mixed: the bf16 projection output's fp32 copy and pow's output 2*4*N*width, rsqrt 4
        // per row, h' cast back to bf16 2*N*width: q 131,072 + 4,096 + 32,768, k 65,536 + 2,048 +
        // 16,384 = 251,904. The fp32 weight makes q and k fp32: the rotary uses the fp32 tables as
        // they are, so the per-layer bf16 casts of cos and sin (2*2*64*16 = 4,096) go: 247,808.
        QTest::newRow("tiny bf16-mixed head math") << "tiny" << int(Precision::Bf16Mixed) << false << int(QkNorm::Head) << 247808LL;
        // Fused: an fp32 q takes the engine's expand path (no fp32 GQA kernel), so SDPA keeps k and
        // v at all 4 heads: 2*2*256*(64 - 32) = 32,768 more: 280,576.
        QTest::newRow("tiny bf16-mixed head fused") << "tiny" << int(Precision::Bf16Mixed) << true << int(QkNorm::Head) << 280576LL;
        // Pure bf16: the bf16 weight keeps q and k bf16: the norm terms alone, fp32 copy, pow, rsqrt
        // and h' (bf16): 251,904.
        QTest::newRow("tiny bf16 head fused") << "tiny" << int(Precision::Bf16) << true << int(QkNorm::Head) << 251904LL;
    }
    void qkNormAddsItsTerms()
    {
        QFETCH(QString, preset);
        QFETCH(int, precision);
        QFETCH(bool, fused);
        QFETCH(int, qkNorm);
        QFETCH(qint64, added);
        RunConfig with = presetConfig(preset);
        with.train.precision = Precision(precision);
        with.model.qkNorm = QkNorm(qkNorm);
        RunConfig without = with;
        without.model.qkNorm = QkNorm::None;
        // LibTorch 1.13 semantics: the expected terms above include mean's kept input.
        const ActivationBytes a = activationBytes(with, fused, false), b = activationBytes(without, fused, false);
        for (size_t i = 0; i < a.savedPerBlock.size(); ++i)
            QCOMPARE(a.savedPerBlock[i] - b.savedPerBlock[i], added);
    }

    void moeWeightsCountEveryExpert()
    {
        // tiny-moe: embedding and lm_head 2*256*64 = 32,768, final norm 64. Layer 0: norms 128,
        // q/k/v/o 4,096 + 2*2,048 + 4,096 = 12,288, q/k norms 2*16, MLP 3*64*176 = 33,792 -> 46,240.
        // Layer 1: 128 + 12,288 + 32, router 4*64 = 256, experts 4*3*64*48 = 36,864, shared expert
        // 3*64*64 = 12,288 and its gate 64 -> 61,920. Total 140,992: every expert's weights count,
        // whatever the share of tokens each sees.
        const RunConfig c = tinyMoe();
        QCOMPARE(countParameters(c).total, 140992LL);
        const ModelStateBytes s = modelStateBytes(c);
        QCOMPARE(s.totalParams, 140992LL);
        QCOMPARE(s.trainableWeights, 4 * 140992LL);
        QCOMPARE(s.gradients, 4 * 140992LL);
        QCOMPARE(s.optimizerStates, 8 * 140992LL);
        // Sharded over 4 devices as a dense model: weights, gradients and the AdamW moments each
        // divided by 4; the fused AdamW kernel a CUDA host runs adds no temporary.
        EstimateOptions o;
        o.card = "h100-sxm-80gb";
        o.gpus = 4;
        o.strategy = ParallelStrategy::Fsdp;
        const auto step = phaseOf(estimateMemory(c, o), "optimizer").breakdown;
        QCOMPARE(step.trainableWeights, 4 * 140992LL / 4);
        QCOMPARE(step.gradients, 4 * 140992LL / 4);
        QCOMPARE(step.optimizer, 8 * 140992LL / 4);
    }

    void denseEstimatesUnchanged_data()
    {
        QTest::addColumn<QString>("preset");
        QTest::addColumn<int>("precision");   // -1: the preset's
        QTest::addColumn<int>("mode");        // -1: the preset's
        QTest::addColumn<bool>("recompute");
        QTest::addColumn<int>("gpus");
        QTest::addColumn<qint64>("peak");
        QTest::addColumn<qint64>("forward");
        // What the estimator gives for these dense configs (pilotbench-cli estimate --no-calibration
        // --card h200-141gb): its peak allocated bytes and the forward phase's tensors. Pinned before
        // mixture-of-experts support; changed once since, on purpose, by what the peak recorder's
        // attribution showed on an H200 (LibTorch 2.11): mean keeps no input (2 x 4 x tokens x
        // hidden less per layer), a tied embedding gets lm_head's autocast copy, the allocator holds
        // the cuBLAS and cuBLASLt workspaces (64 MiB) and fused AdamW makes no temporaries.
        QTest::newRow("tiny") << "tiny" << -1 << -1 << false << 1 << 72372992LL << 72110848LL;
        QTest::newRow("tiny bf16-mixed") << "tiny" << int(Precision::Bf16Mixed) << -1 << false << 1 << 71574272LL << 71508736LL;
        QTest::newRow("llama-3.2-1b") << "llama-3.2-1b" << -1 << -1 << false << 1 << 76787310592LL << 72718835712LL;
        QTest::newRow("llama-3.2-1b recompute") << "llama-3.2-1b" << -1 << -1 << true << 1 << 43122778112LL << 39054303232LL;
        QTest::newRow("llama-3.2-1b fsdp4") << "llama-3.2-1b" << -1 << -1 << false << 4 << 64244160512LL << 60175685632LL;
    }
    void denseEstimatesUnchanged()
    {
        QFETCH(QString, preset);
        QFETCH(int, precision);
        QFETCH(int, mode);
        QFETCH(bool, recompute);
        QFETCH(int, gpus);
        QFETCH(qint64, peak);
        QFETCH(qint64, forward);
        RunConfig c = presetConfig(preset);
        if (precision >= 0)
            c.train.precision = Precision(precision);
        if (mode >= 0)
            c.train.mode = TrainMode(mode);
        c.train.recompute = recompute;
        EstimateOptions o;
        o.card = "h200-141gb";
        o.gpus = gpus;
        o.strategy = gpus > 1 ? ParallelStrategy::Fsdp : ParallelStrategy::None;
        const MemoryEstimate e = estimateMemory(c, o);
        QCOMPARE(e.peakAllocatedBytes, peak);
        QCOMPARE(phaseOf(e, "forward").breakdown.tensors(), forward);
    }

    void recomputeForwardOnCpu()
    {
        // toy fp32 with recompute on CPU (math attention). The forward keeps the block input
        // 4*8*4 = 128 and the generator state saved with it (LibTorch's CPU mt19937 state,
        // 5056 B); at the loss: final norm + lm_head input 528 (as without recompute) and the
        // logits' peak 1024 -> 128 + 5056 + 528 + 1024 = 6736.
        // Inside the block under no_grad the MLP is the larger live set: residual 128, norm output
        // 128, gate/silu/up/product 4*4*4*16 = 1024, down's output 128 = 1408 (the attention's:
        // norm output 128, q/k/v 4*4*24 = 384, masked scores and probabilities 2*128, output 128,
        // mask 16 = 912) -> 128 + 5056 + 1408 = 6592 < 6736: the loss sets the forward peak.
        // Fixed: token ids and targets 2*8*4 = 64 for the step and 4 prefetched batches = 320,
        // rotary cos/sin 2*4*(4*4) = 128 -> 448. Activations 6736 - 1024 + 448 = 6160.
        RunConfig c = toy();
        c.train.recompute = true;
        EstimateOptions o;
        o.device = DeviceKind::Cpu;
        const MemoryEstimate cpu = estimateMemory(c, o);
        QCOMPARE(cpu.phases[0].phase, std::string("construction"));
        QCOMPARE(cpu.phases[1].phase, std::string("forward"));
        QCOMPARE(phaseOf(cpu, "forward").breakdown.logits, 1024LL);
        QCOMPARE(phaseOf(cpu, "forward").breakdown.activations, 6160LL);
        // A CUDA device: no generator state in device memory, no host prefetch counted:
        // 128 + 528 + 1024 at the loss, fixed 64 + 128 -> activations 656 + 192 = 848.
        o.device = DeviceKind::Cuda;
        o.fusedAttentionAvailable = false;
        QCOMPARE(phaseOf(estimateMemory(c, o), "forward").breakdown.activations, 848LL);
    }

    void shardingOverGpus()
    {
        // Optimizer phase, full fp32 AdamW: weights 4704, grads 4704, moments 9408; the fused AdamW
        // kernel of LibTorch 2.x on CUDA updates in place (no step temporary).
        RunConfig c = toy();
        EstimateOptions o;
        o.device = DeviceKind::Cuda;
        o.card = "h100-sxm-80gb";
        o.gpus = 2;
        o.strategy = ParallelStrategy::Ddp;
        const MemoryEstimate ddp = estimateMemory(c, o);
        const auto &ddpStep = phaseOf(ddp, "optimizer").breakdown;
        QCOMPARE(ddp.phases[3].phase, std::string("optimizer"));
        QCOMPARE(ddpStep.trainableWeights, 4704LL);
        QCOMPARE(ddpStep.gradients, 4704LL + 4704LL);   // + flat DDP buckets over every gradient
        QCOMPARE(ddpStep.optimizer, 9408LL);
        // LibTorch 1.x has no fused AdamW: the per-tensor step's temporary, 2 * 4 B * largest
        // parameter (256 elements) = 2048.
        {
            EstimateOptions perTensor = o;
            perTensor.fusedAttentionAvailable = false;
            QCOMPARE(phaseOf(estimateMemory(c, perTensor), "optimizer").breakdown.optimizer, 9408LL + 2048LL);
        }
        o.gpus = 4;
        o.strategy = ParallelStrategy::Fsdp;
        const auto fsdpStep = phaseOf(estimateMemory(c, o), "optimizer").breakdown; // a copy: the estimate is a temporary
        QCOMPARE(fsdpStep.trainableWeights, 4704LL / 4);
        QCOMPARE(fsdpStep.gradients, 4704LL / 4);
        QCOMPARE(fsdpStep.optimizer, 9408LL / 4);
        o.strategy = ParallelStrategy::Zero1;
        const auto zero1Step = phaseOf(estimateMemory(c, o), "optimizer").breakdown;
        QCOMPARE(zero1Step.trainableWeights, 4704LL);
        QCOMPARE(zero1Step.gradients, 4704LL);
        QCOMPARE(zero1Step.optimizer, 9408LL / 4);
    }

    void maxMicroBatchIsTheLargestThatFits()
    {
        RunConfig c = presetConfig(QStringLiteral("llama-3.2-1b"));
        c.train.seqLen = 2048;
        EstimateOptions o;
        o.card = "h100-sxm-80gb";
        int64_t previous = 0;
        for (int64_t b : {1, 2, 4, 8, 16, 32}) {
            const int64_t peak = estimatePeakAllocatedBytes(c, o, b);
            QVERIFY2(peak > previous, "the estimate must grow with the micro-batch");
            previous = peak;
        }
        const MemoryEstimate e = estimateMemory(c, o);
        QVERIFY(e.maxMicroBatch >= 1);
        RunConfig at = c, above = c;
        at.train.microBatch = e.maxMicroBatch;
        above.train.microBatch = e.maxMicroBatch + 1;
        QVERIFY(estimateMemory(at, o).fits);
        QVERIFY(!estimateMemory(above, o).fits);
    }

    void llama8bFullDoesNotFitOneCardButFitsFsdp8()
    {
        RunConfig c = presetConfig(QStringLiteral("llama-3.1-8b"));
        c.train.mode = TrainMode::Full;
        c.train.optimizer.kind = OptimizerKind::AdamW;
        c.train.precision = Precision::Bf16Mixed;
        c.train.seqLen = 2048;
        c.train.microBatch = 1;
        EstimateOptions o;
        for (const char *card : {"a100-sxm-80gb", "h100-sxm-80gb"}) {
            o.card = card;
            const MemoryEstimate e = estimateMemory(c, o);
            QVERIFY2(!e.fits, card);
            // 8.03e9 parameters x 16 B of weights, grads and moments alone exceed 80 GB.
            QVERIFY(e.totalBytes > 8000000000LL * 16);
        }
        o.card = "h100-sxm-80gb";
        o.gpus = 8;
        o.strategy = ParallelStrategy::Fsdp;
        QVERIFY(estimateMemory(c, o).fits);
    }

    void llama8bLoraFitsOneH100()
    {
        RunConfig c = presetConfig(QStringLiteral("llama-3.1-8b"));
        c.train.mode = TrainMode::Lora;
        c.train.lora.rank = 16;
        c.train.precision = Precision::Bf16Mixed;
        c.train.seqLen = 2048;
        c.train.microBatch = 1;
        EstimateOptions o;
        o.card = "h100-sxm-80gb";
        const MemoryEstimate e = estimateMemory(c, o);
        QVERIFY(e.fits);
        // Frozen base in bf16: about 16 GB; well below the card.
        QVERIFY(e.breakdown.frozenWeights > 15000000000LL && e.breakdown.frozenWeights < 17000000000LL);
    }

    void referenceFormulas()
    {
        // Accelerate: fp32 -> 16 B per parameter, mixed -> 8 B. DeepSpeed ZeRO-2 on one GPU:
        // 4P + 16P = 20 B per parameter; ZeRO-3 over 4: 4 * largest (256) + 18 * 1176 / 4.
        RunConfig c = toy();
        QCOMPARE(accelerateTrainingBytes(c), 16LL * 1176);
        c.train.precision = Precision::Bf16Mixed;
        QCOMPARE(accelerateTrainingBytes(c), 8LL * 1176);
        QCOMPARE(deepSpeedModelStatesBytes(c, ParallelStrategy::None, 1), 20LL * 1176);
        QCOMPARE(deepSpeedModelStatesBytes(c, ParallelStrategy::Zero3, 4), 4LL * 256 + 18LL * 1176 / 4);
    }

    void badInputIsRejected()
    {
        EstimateOptions o;
        o.card = "b200";
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, estimateMemory(toy(), o));
        o.card = "h100-sxm-80gb";
        o.gpus = 2;
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, estimateMemory(toy(), o)); // two GPUs, no strategy
        o.gpus = 1;
        o.headroomFraction = 1.0;
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, estimateMemory(toy(), o));
    }
};

QTEST_GUILESS_MAIN(TestMemoryEstimator)
#include "tst_memory_estimator.moc"
