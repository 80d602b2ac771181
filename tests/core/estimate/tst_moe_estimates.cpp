// The estimator on mixtures of experts: every expert's weights, a sparse layer against its dense
// twin, activations linear in the experts a token goes through, and the caching allocator's blocks
// that odd-sized expert matrices hold on CUDA.
#include "estimate/ActivationModel.h"
#include "estimate/ModelStates.h"
#include "EstimatorTestConfigs.h"

#include <QtTest>

#include <algorithm>

using namespace pb;
using namespace pbtest;

class TestMoeEstimates final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // CUDA's caching allocator: a fresh request of 10 MiB or more takes a segment rounded up to
    // 2 MiB and keeps a remainder of up to 1 MiB (an 11 MiB expert matrix holds 12 MiB, measured on
    // an H200 at construction); smaller requests share split segments. Pooled experts hold one
    // block per pool instead.
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
        auto weights = [&](const RunConfig &config, const EstimateOptions &o) {
            const auto &b = phaseOf(estimateMemory(config, o), "construction").breakdown;
            return b.trainableWeights + b.frozenWeights;
        };
        // A layer's experts live in two pools, one block each ([E, 2I, H] and [E, H, I] fp32).
        const int64_t gateUpPool = c.model.moe.experts * 2 * 1408 * 2048 * 4, downPool = c.model.moe.experts * 2048 * 1408 * 4;
        QCOMPARE(weights(c, gpu) - weights(c, cpu),
                 c.model.layers * (cudaCachingBlockBytes(gateUpPool) - gateUpPool + cudaCachingBlockBytes(downPool) - downPool));
        // Out of their pools (a freeze pattern training one expert): each matrix holds its 12 MiB block.
        c.train.mode = TrainMode::Freeze;
        c.train.trainable = {"experts.1."};
        const int64_t matrices = 3 * c.model.moe.experts * c.model.layers;
        QCOMPARE(weights(c, gpu) - weights(c, cpu), matrices * MiB);
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
};

QTEST_GUILESS_MAIN(TestMoeEstimates)
#include "tst_moe_estimates.moc"
