// The decoder and optimizers directly (torch): LoRA trains only adapters (also inside the fused
// path's projection nodes), recomputation gives the gradients of the plain backward pass,
// soft-capped attention holds what Transformers' does.
#include "config/Presets.h"
#include "engine/MemoryProbe.h"
#include "engine/TorchCompat.h"
#include "engine/Optimizer.h"
#include "model/Transformer.h"

#include <QtTest>

#include <atomic>
#include <set>

using namespace pb;

namespace {

std::pair<torch::Tensor, torch::Tensor> batch(const RunConfig &c, int64_t b, int64_t t)
{
    torch::manual_seed(7);
    auto tokens = torch::randint(0, c.model.vocabSize, {b, t + 1}, torch::kLong);
    return {tokens.slice(1, 0, t), tokens.slice(1, 1, t + 1)};
}

// One eager fp32 forward of the loss of a one-layer model of `c` on b x t tokens, on the CPU's
// tracking allocator: what the forward keeps, its peak (both above what was allocated before) and
// the loss.
struct ForwardMemory {
    int64_t kept = 0, peak = 0;
    double loss = 0;
};
ForwardMemory oneLayerForward(RunConfig c, int64_t b, int64_t t)
{
    c.model.layers = 1;
    c.train.precision = Precision::Fp32;
    DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
    model->initialise(1);
    const auto [x, y] = batch(c, b, t);
    MemoryProbe probe("cpu");
    const int64_t before = probe.read().allocatedBytes;
    probe.resetPeak();
    const auto loss = model->loss(x, y);
    return {probe.read().allocatedBytes - before, probe.read().peakAllocatedBytes - before, loss.item<double>()};
}

} // namespace

class TestModel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void loraLeavesBaseBitIdenticalAndTrainsAdapters()
    {
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.train.mode = TrainMode::Lora;
        c.train.precision = Precision::Fp32;
        c.train.lora.rank = 4;
        c.train.lora.targets = {"q_proj", "v_proj"};
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        model->initialise(1);
        std::map<std::string, torch::Tensor> before;
        for (const auto &item : model->named_parameters())
            before[item.key()] = item.value().detach().clone();
        auto optimizer = makeOptimizer(c.train.optimizer, model->trainableParameters());
        // Only the adapters are trainable: 2 targets x 2 layers x (A + B).
        QCOMPARE(optimizer->parameters().size(), size_t(8));
        const auto [x, y] = batch(c, 2, 16);
        for (int step = 0; step < 3; ++step) {
            model->loss(x, y).backward();
            optimizer->step(1e-2);
            optimizer->zeroGrad();
        }
        int changed = 0;
        for (const auto &item : model->named_parameters()) {
            const bool same = torch::equal(before[item.key()], item.value());
            const bool adapter = item.key().find("lora_") != std::string::npos;
            if (adapter)
                changed += same ? 0 : 1;
            else
                QVERIFY2(same, item.key().c_str());
        }
        QCOMPARE(changed, 8);
    }

    // The fused path under bf16 autocast, LoRA on every projection: with the adapters inside the
    // projections' nodes (model/MixedLinear.h) the model gives the loss of the adapters added after
    // them bit for bit, and the graph holds no adapter's own matmul nodes. The adapters' gradients
    // differ by bf16 rounding (the input's gradient summed by the GEMMs instead of added apart): by
    // no more than twice what the nodes themselves changed against autocast's linear one by one
    // (stop 63's form against the one before; CPU: 0.64% against 0.60% over all adapters). A block
    // makes four nodes: q, k and v as one (their input's gradient summed by its GEMMs), o, gate and
    // up as one, down.
    void loraAdaptersInsideTheNodeTrainAsOutside_data()
    {
        QTest::addColumn<double>("dropout");
        QTest::newRow("no dropout") << 0.0;
        // The node draws each adapter's mask as torch::dropout does, in the adapters' order, so the
        // same masks as outside; it keeps the mask and makes the dropped input again.
        QTest::newRow("dropout 0.1") << 0.1;
    }

    void loraAdaptersInsideTheNodeTrainAsOutside()
    {
        QFETCH(double, dropout);
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.train.mode = TrainMode::Lora;
        c.train.precision = Precision::Bf16Mixed;
        c.train.kernels = KernelPath::Fused;
        c.train.lora.rank = 4;
        c.train.lora.dropout = dropout;
        c.train.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
        const auto [x, y] = batch(c, 2, 16);
        // 0: adapters inside the nodes, 1: added after them, 2: no nodes (autocast's linear).
        std::vector<torch::Tensor> grads[3];
        double losses[3] = {0, 0, 0};
        int adapterProducts[3] = {0, 0, 0}, mixedNodes[3] = {0, 0, 0};
        for (int form = 0; form < 3; ++form) {
            ModelRuntime runtime;
            runtime.adaptersInNode = form == 0;
            runtime.mixedLinear = form != 2;
            DecoderModel model(c, runtime, torch::kCPU);
            model->initialise(5);
            // lora_B starts at zero (as PEFT's): give it values so that the adapters change the loss.
            torch::manual_seed(9);
            {
                torch::NoGradGuard noGrad;
                for (auto &item : model->named_parameters())
                    if (item.key().find("lora_B") != std::string::npos)
                        item.value().normal_(0, 0.05);
            }
            model->train();
            torch::Tensor loss;
            {
                compat::AutocastGuard autocast(torch::kCPU, true, torch::kBFloat16);
                loss = model->loss(x, y);
            }
            // The nodes of the adapters' own products (lora_A's linear, lora_B's addmm_) by name.
            std::vector<torch::autograd::Node *> stack {loss.grad_fn().get()};
            std::set<torch::autograd::Node *> seen;
            while (!stack.empty()) {
                auto *node = stack.back();
                stack.pop_back();
                if (!node || !seen.insert(node).second)
                    continue;
                const std::string name = node->name();
                adapterProducts[form] += name.find("Addmm") != std::string::npos || name.find("MmBackward") != std::string::npos ? 1 : 0;
                mixedNodes[form] += name.find("MixedLinearFunction") != std::string::npos ? 1 : 0;
                for (const auto &edge : node->next_edges())
                    stack.push_back(edge.function.get());
            }
            loss.backward();
            losses[form] = loss.item<double>();
            for (const auto &item : model->named_parameters())
                if (item.key().find("lora_") != std::string::npos) {
                    QVERIFY2(item.value().grad().defined() && item.value().grad().scalar_type() == torch::kFloat, item.key().c_str());
                    grads[form].push_back(item.value().grad().flatten().clone());
                }
            if (form == 0 && dropout > 0) { // the masks inside did drop: the same model in eval mode differs
                model->eval();
                compat::AutocastGuard autocast(torch::kCPU, true, torch::kBFloat16);
                torch::NoGradGuard noGrad;
                QVERIFY(model->loss(x, y).item<double>() != losses[0]);
            }
        }
        QCOMPARE(losses[0], losses[1]);
        QVERIFY2(adapterProducts[1] > 0 && adapterProducts[0] == 0,
                 qPrintable(QStringLiteral("adapter product nodes: %1 outside, %2 inside").arg(adapterProducts[1]).arg(adapterProducts[0])));
        QCOMPARE(grads[0].size(), size_t(2 * 7 * 2)); // 2 layers x 7 projections x (A, B)
        QCOMPARE(mixedNodes[0], 2 * 4);
        QCOMPARE(mixedNodes[1], 2 * 4 - 1); // outside, the first block's q/k/v node reads a frozen input with frozen weights: no node
        QCOMPARE(mixedNodes[2], 0);
        const auto all = [&](int form) { return torch::cat(grads[form]); };
        const double inside = ((all(0) - all(1)).norm() / all(1).norm()).item<double>();
        const double nodes = ((all(1) - all(2)).norm() / all(2).norm()).item<double>();
        qDebug("adapter gradients: inside against outside %.3g, the nodes against autocast's linear %.3g", inside, nodes);
        QVERIFY(nodes > 0);
        QVERIFY2(inside <= 2 * nodes, qPrintable(QStringLiteral("%1 against %2").arg(inside).arg(nodes)));
    }

    // The eager path is PEFT's twin: under autocast each adapter casts its 16-bit input to fp32
    // (lora_A's dtype) before its product, as LoRA's Linear does by default, and autocast casts it
    // back (the copy lora_A keeps, which the estimator counts). The fused path's nodes make no such
    // cast; the loss is the same either way (the fp32 copy holds the 16-bit values exactly).
    void eagerAdaptersCastTheirInputAsPeft()
    {
        static thread_local bool inAdapter = false;
        static std::atomic<int> casts {0};
        const auto handle = at::addThreadLocalCallback(
            at::RecordFunctionCallback(
                [](const at::RecordFunction &fn) -> std::unique_ptr<at::ObserverContext> {
                    const std::string name = fn.name();
                    if (name == "pb.lora")
                        inAdapter = true;
                    else if (inAdapter && name == "aten::_to_copy") {
                        const auto inputs = fn.inputs();
                        if (!inputs.empty() && inputs[0].isTensor() && inputs[0].toTensor().dim() == 3 &&
                            inputs[0].toTensor().scalar_type() == torch::kBFloat16 && inputs.size() > 1 && !inputs[1].isNone() &&
                            inputs[1].toScalarType() == torch::kFloat)
                            ++casts;
                    }
                    return nullptr;
                },
                [](const at::RecordFunction &fn, at::ObserverContext *) {
                    if (std::string(fn.name()) == "pb.lora")
                        inAdapter = false;
                })
                .needsInputs(true));
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.train.mode = TrainMode::Lora;
        c.train.precision = Precision::Bf16Mixed;
        c.train.lora.rank = 4;
        const auto [x, y] = batch(c, 2, 16);
        double losses[2] = {0, 0};
        int counted[2] = {0, 0};
        for (int fused = 0; fused < 2; ++fused) {
            c.train.kernels = fused ? KernelPath::Fused : KernelPath::Eager;
            DecoderModel model(c, ModelRuntime {}, torch::kCPU);
            model->initialise(5);
            model->train();
            casts = 0;
            compat::AutocastGuard autocast(torch::kCPU, true, torch::kBFloat16);
            losses[fused] = model->loss(x, y).item<double>();
            counted[fused] = casts.load();
        }
        at::removeCallback(handle);
        QCOMPARE(counted[0], c.model.layers * 4); // q, k, v and o in each layer
        QCOMPARE(counted[1], 0);
        QVERIFY(std::abs(losses[0] - losses[1]) < 1e-2 * std::abs(losses[1]));
    }

    // Eager soft-capped attention (Gemma 2) keeps tanh's output and the probabilities (fp32 here).
    // Making them, it holds no more than Transformers' statements do: the forward's peak is within
    // half a score-sized tensor of what it keeps (131,072 B above it). Written as one C++
    // expression, the old scores and each temporary of the cap lived to its end, four at once:
    // 1,695,748 B above (and the CPU peak recorder's peak of a recomputed gemma2 layer).
    void softCappedAttentionHoldsWhatTransformersHolds()
    {
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.model.vocabSize = 64;
        c.model.traits.attentionSoftcap = 50.0;
        const int64_t b = 2, t = 256;
        const int64_t scores = b * c.model.attentionHeads * t * t * 4;
        const auto [kept, peak, loss] = oneLayerForward(c, b, t);
        qInfo("forward: kept %lld B, peak %lld B, one score tensor %lld B", static_cast<long long>(kept), static_cast<long long>(peak),
              static_cast<long long>(scores));
        QVERIFY(kept > 2 * scores); // tanh's output and the probabilities at least
        QVERIFY2(peak - kept < scores / 2, "the forward's peak is half a score-sized tensor or more above what it keeps");
        QVERIFY(std::isfinite(loss));
    }

    // The eager head's final soft-cap (Gemma 2, Gemma 4): divide, tanh, multiply as three
    // statements, so the forward holds two logits-sized tensors at the cap, not four. With the
    // vocabulary far wider than the model, the loss's forward peaks at the cross-entropy, one
    // logits-sized tensor above what it keeps (tanh's output and log-softmax's).
    void finalSoftcapHoldsWhatTransformersHolds()
    {
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.model.vocabSize = 8192;
        c.model.traits.finalSoftcap = 30.0;
        const int64_t b = 2, t = 128;
        const int64_t logits = b * t * c.model.vocabSize * 4;
        const auto [kept, peak, loss] = oneLayerForward(c, b, t);
        qInfo("forward: kept %lld B, peak %lld B, one logits tensor %lld B", static_cast<long long>(kept), static_cast<long long>(peak),
              static_cast<long long>(logits));
        QVERIFY(kept > 2 * logits - logits / 8); // tanh's output and log-softmax's
        QVERIFY2(peak - kept < logits + logits / 2, "the forward's peak is one and a half logits tensors or more above what it keeps");
        QVERIFY(std::isfinite(loss));
    }

    void recomputeGivesTheSameGradients()
    {
        RunConfig c = presetConfig(QStringLiteral("tiny"));
        c.train.precision = Precision::Fp32;
        const auto [x, y] = batch(c, 2, 24);
        std::map<std::string, torch::Tensor> grads[2];
        double losses[2] = {0, 0};
        for (int recompute = 0; recompute < 2; ++recompute) {
            DecoderModel model(c, ModelRuntime {false, recompute == 1}, torch::kCPU);
            model->initialise(3);
            model->train();
            auto loss = model->loss(x, y);
            loss.backward();
            losses[recompute] = loss.item<double>();
            for (const auto &item : model->named_parameters())
                grads[recompute][item.key()] = item.value().grad().clone();
        }
        QCOMPARE(losses[1], losses[0]);
        QCOMPARE(grads[1].size(), grads[0].size());
        for (const auto &[name, g] : grads[0])
            QVERIFY2(torch::allclose(grads[1][name], g, 1e-5, 1e-6), name.c_str());
    }

    void parameterNamesFollowHuggingFace()
    {
        const RunConfig c = presetConfig(QStringLiteral("tiny"));
        DecoderModel model(c, ModelRuntime {}, torch::kCPU);
        const auto params = model->named_parameters();
        QVERIFY(params.contains("model.embed_tokens.weight"));
        QVERIFY(params.contains("model.layers.1.self_attn.k_proj.weight"));
        QVERIFY(params.contains("model.layers.0.mlp.down_proj.weight"));
        QVERIFY(params.contains("model.norm.weight"));
        QCOMPARE(params.contains("lm_head.weight"), !c.model.tieEmbeddings);
        int64_t total = 0;
        for (const auto &p : model->parameters())
            total += p.numel();
        QCOMPARE(total, countParameters(c).total);
    }
};

QTEST_GUILESS_MAIN(TestModel)
#include "tst_model.moc"
