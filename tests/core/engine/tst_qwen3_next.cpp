// Qwen's hybrids in the engine, built from imported config.json files: qwen3_next (in_proj_qkvz /
// in_proj_ba) and qwen3_5 (in_proj_qkv / _z / _b / _a). Parameters named as the hub checkpoints;
// the gated full-attention layer against Qwen3NextAttention's formula in float64 (zero-centred
// RMSNorm in fp32, q_proj's per-head [query | gate], per-head q/k norm, rotate_half on the first
// int(head_dim * 0.25) dims, output * sigmoid(gate)); a checkpoint written under the hub's names
// (with Qwen3-Next's mtp.* tensors, which Transformers leaves unused) loads back to the same logits;
// full, LoRA (all-linear: linear_attn's projections adapted) and recompute runs train, the loss
// finite and falling.
#include "checkpoint/TensorFileIo.h"
#include "config/HfImport.h"
#include "config/ParameterTable.h"
#include "engine/Optimizer.h"
#include "model/Transformer.h"
#include "model/WeightLoader.h"

#include <QJsonArray>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <set>

using namespace pb;

namespace {

// 4 layers, full attention on 1 and 3 (full_attention_interval 2); 4 heads sharing 2 key/value
// heads of 16 dims (4 rotary); Gated DeltaNet with 2 key heads and 4 value heads of 8; 8 experts
// (top 2) and a gated shared expert on every layer. `type`: qwen3_next, or qwen3_5 (dense text_config).
RunConfig tinyHybrid(const char *type, int layers = 4, int interval = 2)
{
    QJsonObject text {{"model_type", type},
                      {"hidden_size", 32},
                      {"num_hidden_layers", layers},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 16},
                      {"intermediate_size", 48},
                      {"vocab_size", 64},
                      {"max_position_embeddings", 64},
                      {"full_attention_interval", interval},
                      {"linear_num_key_heads", 2},
                      {"linear_num_value_heads", 4},
                      {"linear_key_head_dim", 8},
                      {"linear_value_head_dim", 8},
                      {"linear_conv_kernel_dim", 4},
                      {"rope_theta", 10000.0},
                      {"rms_norm_eps", 1e-6},
                      {"tie_word_embeddings", false}};
    QJsonObject json;
    if (QLatin1String(type) == QLatin1String("qwen3_next")) {
        for (const auto &[key, value] : {std::pair {"num_experts", 8}, std::pair {"num_experts_per_tok", 2}, std::pair {"moe_intermediate_size", 8},
                                         std::pair {"shared_expert_intermediate_size", 16}})
            text.insert(QLatin1String(key), value);
        json = text;
    } else {
        text.insert(QStringLiteral("model_type"), QStringLiteral("qwen3_5_text"));
        json = QJsonObject {{"model_type", "qwen3_5"}, {"text_config", text}};
    }
    RunConfig c = hfRunConfig(json, std::string("tiny ") + type + " config.json");
    c.train.precision = Precision::Fp32;
    c.train.seqLen = 32;
    return c;
}

// Every parameter N(0, 0.2); the zero-centred norms' weights too (they scale by 1 + weight), the
// gated norm's 1 + N(0, 0.2); A_log and dt_bias small, so the decay stays in (0, 1).
void randomise(torch::nn::Module &m, uint64_t seed)
{
    torch::NoGradGuard noGrad;
    torch::manual_seed(seed);
    for (auto &item : m.named_parameters()) {
        const bool gatedNorm = item.key().find("linear_attn.norm.") != std::string::npos;
        item.value().copy_(torch::randn_like(item.value()) * 0.2 + (gatedNorm ? 1.0 : 0.0));
    }
}

std::pair<torch::Tensor, torch::Tensor> batch(int64_t vocab, int64_t b, int64_t t)
{
    torch::manual_seed(7);
    const auto tokens = torch::randint(0, vocab, {b, t + 1}, torch::kLong);
    return {tokens.slice(1, 0, t), tokens.slice(1, 1, t + 1)};
}

} // namespace

class TestQwen3Next : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void namesAsTheCheckpoints_data()
    {
        QTest::addColumn<QString>("type");
        QTest::newRow("qwen3_next") << "qwen3_next";
        QTest::newRow("qwen3_5") << "qwen3_5";
    }
    void namesAsTheCheckpoints()
    {
        QFETCH(QString, type);
        const bool next = type == QLatin1String("qwen3_next");
        for (const TrainMode mode : {TrainMode::Full, TrainMode::Lora}) {
            RunConfig c = tinyHybrid(next ? "qwen3_next" : "qwen3_5");
            c.train.mode = mode;
            c.train.lora.rank = 4;
            c.train.lora.targets = {"all-linear"};
            DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
            std::vector<std::string> ours, table;
            int64_t numel = 0;
            for (const auto &item : model->named_parameters()) {
                ours.push_back(item.key());
                numel += item.value().numel();
            }
            for (const auto &p : parameterTable(c))
                table.push_back(p.name);
            QCOMPARE(ours, table); // the same names in the same order
            QCOMPARE(numel, countParameters(c).total);
            const std::set<std::string> names(ours.begin(), ours.end());
            std::vector<std::string> expected {"model.layers.0.linear_attn.conv1d.weight", "model.layers.0.linear_attn.dt_bias", "model.layers.0.linear_attn.A_log",
                                               "model.layers.0.linear_attn.norm.weight", "model.layers.0.linear_attn.out_proj.weight",
                                               "model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.q_norm.weight",
                                               "model.layers.1.self_attn.k_norm.weight", "model.layers.3.self_attn.o_proj.weight", "lm_head.weight"};
            if (next)
                expected.insert(expected.end(), {"model.layers.0.linear_attn.in_proj_qkvz.weight", "model.layers.2.linear_attn.in_proj_ba.weight",
                                                 "model.layers.0.mlp.gate.weight", "model.layers.0.mlp.experts.7.down_proj.weight",
                                                 "model.layers.1.mlp.shared_expert.gate_proj.weight", "model.layers.1.mlp.shared_expert_gate.weight"});
            else
                expected.insert(expected.end(), {"model.layers.0.linear_attn.in_proj_qkv.weight", "model.layers.0.linear_attn.in_proj_z.weight",
                                                 "model.layers.0.linear_attn.in_proj_b.weight", "model.layers.2.linear_attn.in_proj_a.weight",
                                                 "model.layers.0.mlp.gate_proj.weight"});
            if (mode == TrainMode::Lora)
                expected.insert(expected.end(), {next ? "model.layers.0.linear_attn.in_proj_qkvz.lora_A.weight" : "model.layers.0.linear_attn.in_proj_qkv.lora_B.weight",
                                                 "model.layers.0.linear_attn.out_proj.lora_A.weight", "model.layers.1.self_attn.q_proj.lora_B.weight"});
            for (const auto &name : expected)
                QVERIFY2(names.count(name), name.c_str());
            for (const char *name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.1.linear_attn.out_proj.weight", "model.layers.0.linear_attn.conv1d.lora_A.weight"})
                QVERIFY2(!names.count(name), name);
            // The gated q_proj: each head's query and gate.
            QCOMPARE(model->named_parameters()["model.layers.1.self_attn.q_proj.weight"].sizes().vec(), (std::vector<int64_t> {2 * 4 * 16, 32}));
        }
    }

    // One full-attention layer of the dense Qwen3.5 against Qwen3NextAttention's and the decoder's formulas.
    void gatedAttentionMatchesTheFormula_data()
    {
        QTest::addColumn<bool>("fused");
        QTest::newRow("math") << false;
        QTest::newRow("fused attention") << true;
    }
    void gatedAttentionMatchesTheFormula()
    {
        QFETCH(bool, fused);
        RunConfig c = tinyHybrid("qwen3_5", 1, 1);
        c.train.precision = Precision::Fp32;
        const ModelShape &m = c.model;
        QCOMPARE(m.rotaryDim(), qint64(4));
        QVERIFY(!m.linear.linear(0));
        DecoderModel model(c, ModelRuntime {fused, false}, torch::kCPU);
        randomise(*model, 11);
        model->eval();
        std::map<std::string, torch::Tensor> w;
        for (const auto &item : model->named_parameters())
            w[item.key()] = item.value().detach().to(torch::kDouble);
        const auto ids = batch(m.vocabSize, 2, 12).first;
        const int64_t B = ids.size(0), T = ids.size(1), heads = 4, kvHeads = 2, hd = 16, r = 4;
        namespace F = torch::nn::functional;
        // Qwen3NextRMSNorm: x rsqrt(mean x^2 + eps) (1 + weight).
        auto rms = [&](const torch::Tensor &x, const std::string &weight) { return x * torch::rsqrt(x.pow(2).mean(-1, true) + m.normEps) * (1.0 + w.at(weight)); };
        auto linear = [&](const torch::Tensor &x, const std::string &name) { return F::linear(x, w.at(name + ".weight")); };
        const std::string l = "model.layers.0.";
        auto x = w.at("model.embed_tokens.weight").index_select(0, ids.reshape({-1})).view({B, T, -1});
        const auto h = rms(x, l + "input_layernorm.weight");
        const auto qg = linear(h, l + "self_attn.q_proj").view({B, T, heads, 2 * hd}).chunk(2, -1);
        const auto gate = qg[1].reshape({B, T, heads * hd});
        auto q = rms(qg[0], l + "self_attn.q_norm.weight");
        auto k = rms(linear(h, l + "self_attn.k_proj").view({B, T, kvHeads, hd}), l + "self_attn.k_norm.weight");
        auto v = linear(h, l + "self_attn.v_proj").view({B, T, kvHeads, hd});
        const auto inv = 1.0 / torch::pow(10000.0, torch::arange(0, r, 2, torch::kDouble) / static_cast<double>(r));
        const auto angles = torch::arange(T, torch::kDouble).unsqueeze(1) * inv.unsqueeze(0);
        const auto emb = torch::cat({angles, angles}, -1).view({1, T, 1, r});
        auto turn = [&](const torch::Tensor &t) {
            const auto rot = t.narrow(-1, 0, r), pass = t.narrow(-1, r, hd - r);
            const auto half = torch::cat({-rot.narrow(-1, r / 2, r / 2), rot.narrow(-1, 0, r / 2)}, -1);
            return torch::cat({rot * emb.cos() + half * emb.sin(), pass}, -1);
        };
        q = turn(q).transpose(1, 2);
        k = turn(k).transpose(1, 2).repeat_interleave(heads / kvHeads, 1);
        v = v.transpose(1, 2).repeat_interleave(heads / kvHeads, 1);
        const auto causal = torch::ones({T, T}, torch::kBool).triu(1);
        const auto scores = q.matmul(k.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd));
        const auto attended = torch::softmax(scores.masked_fill(causal, -INFINITY), -1).matmul(v).transpose(1, 2).reshape({B, T, heads * hd});
        x = x + linear(attended * torch::sigmoid(gate), l + "self_attn.o_proj");
        const auto h2 = rms(x, l + "post_attention_layernorm.weight");
        x = x + linear(torch::silu(linear(h2, l + "mlp.gate_proj")) * linear(h2, l + "mlp.up_proj"), l + "mlp.down_proj");
        const auto expected = F::linear(rms(x, "model.norm.weight"), w.at("lm_head.weight"));
        torch::NoGradGuard noGrad;
        const auto logits = model->logits(ids).to(torch::kDouble);
        const double e = ((logits - expected).norm() / expected.norm()).item<double>();
        QVERIFY2(e < 1e-5, qPrintable(QStringLiteral("logits off by %1 relative").arg(e)));
        // Without the gate the same weights give other logits.
        RunConfig ungated = c;
        ungated.model.traits.attentionOutputGate = false;
        DecoderModel wrong(ungated, ModelRuntime {fused, false}, torch::kCPU);
        auto params = model->named_parameters();
        for (auto &item : wrong->named_parameters())
            item.value().copy_(item.key().find("q_proj") != std::string::npos ? params[item.key()].narrow(0, 0, item.value().size(0)) : params[item.key()]);
        wrong->eval();
        const double off = ((wrong->logits(ids).to(torch::kDouble) - expected).norm() / expected.norm()).item<double>();
        QVERIFY2(off > 1e-3, qPrintable(QStringLiteral("ungated is only %1 off").arg(off)));
    }

    // A linear layer is the Gated DeltaNet module between the block's residual adds.
    void linearLayerIsTheGatedDeltaNet()
    {
        RunConfig c = tinyHybrid("qwen3_next", 1, 2);
        QVERIFY(c.model.linear.linear(0));
        DecoderModel model(c, ModelRuntime {false, false}, torch::kCPU);
        randomise(*model, 3);
        model->eval();
        auto &block = model->stack->blocks[0];
        QVERIFY(block->linearAttention && !block->attention);
        torch::NoGradGuard noGrad;
        const auto x = torch::randn({2, 70, 32}); // past one chunk of 64
        const auto h = x + block->linearAttention->forward(block->beforeAttention->forward(x));
        const auto expected = h + block->moe->forward(block->beforeMlp->forward(h));
        QVERIFY(torch::allclose(block->forward(x, LayerInputs {}), expected, 1e-6, 1e-6));
    }

    // Weights under the hub's names (Qwen3-Next's per-expert modules; its multi-token-prediction
    // tensors mtp.*, which Transformers leaves unused) load to the same logits.
    void hubCheckpointRoundTrips_data()
    {
        QTest::addColumn<QString>("type");
        QTest::newRow("qwen3_next") << "qwen3_next";
        QTest::newRow("qwen3_5") << "qwen3_5";
    }
    void hubCheckpointRoundTrips()
    {
        QFETCH(QString, type);
        const RunConfig c = tinyHybrid(type == QLatin1String("qwen3_next") ? "qwen3_next" : "qwen3_5");
        DecoderModel source(c, ModelRuntime {false, false}, torch::kCPU);
        randomise(*source, 5);
        std::vector<std::pair<std::string, torch::Tensor>> tensors;
        for (const auto &item : source->named_parameters())
            tensors.emplace_back(item.key(), item.value().detach().contiguous());
        const std::vector<std::pair<std::string, std::vector<int64_t>>> mtp {{"mtp.fc.weight", {32, 64}}, {"mtp.norm.weight", {32}}};
        for (const auto &[name, shape] : mtp)
            tensors.emplace_back(name, torch::randn(shape));
        std::vector<TensorSource> sources;
        for (const auto &[name, t] : tensors) {
            TensorSource s;
            s.name = name;
            s.dtype = "F32";
            s.shape = t.sizes().vec();
            s.bytes = static_cast<int64_t>(t.nbytes());
            s.read = [t = t](int64_t offset, int64_t, uint8_t *) -> const void * { return static_cast<const uint8_t *>(t.data_ptr()) + offset; };
            sources.push_back(std::move(s));
        }
        QTemporaryDir dir;
        writeSafetensorsFiles(dir.path(), {SafetensorsFileJob {"model.safetensors", sources, {}}}, plainChunkBuffer);
        DecoderModel loaded(c, ModelRuntime {false, false}, torch::kCPU);
        loaded->initialise(99);
        const WeightLoadReport report = loadSafetensors(*loaded, dir.path());
        QCOMPARE(report.ignored, int64_t(mtp.size()));
        const auto ids = batch(c.model.vocabSize, 2, 10).first;
        torch::NoGradGuard noGrad;
        source->eval();
        loaded->eval();
        QVERIFY(torch::equal(loaded->logits(ids), source->logits(ids)));
    }

    void trainsAndTheLossFalls_data()
    {
        QTest::addColumn<QString>("type");
        QTest::addColumn<bool>("lora");
        QTest::addColumn<bool>("recompute");
        QTest::newRow("qwen3_next full") << "qwen3_next" << false << false;
        QTest::newRow("qwen3_next full+recompute") << "qwen3_next" << false << true;
        QTest::newRow("qwen3_next lora all-linear") << "qwen3_next" << true << false;
        QTest::newRow("qwen3_next lora+recompute") << "qwen3_next" << true << true;
        QTest::newRow("qwen3_5 full") << "qwen3_5" << false << false;
    }
    void trainsAndTheLossFalls()
    {
        QFETCH(QString, type);
        QFETCH(bool, lora);
        QFETCH(bool, recompute);
        RunConfig c = tinyHybrid(type == QLatin1String("qwen3_next") ? "qwen3_next" : "qwen3_5");
        if (lora) {
            c.train.mode = TrainMode::Lora;
            c.train.lora.rank = 4;
            c.train.lora.targets = {"all-linear"};
        }
        DecoderModel model(c, ModelRuntime {false, recompute}, torch::kCPU);
        model->initialise(1);
        model->train();
        auto optimizer = makeOptimizer(c.train.optimizer, model->trainableParameters());
        const auto [x, y] = batch(c.model.vocabSize, 2, 32);
        std::vector<double> losses;
        // Rank-4 adapters start at B = 0: more steps and a higher rate than full fine-tuning. At this
        // rate Adam's path follows fp32 rounding: 4.153 -> 3.928 in 40 steps with the chunked rule's
        // per-chunk matmuls, 4.153 -> 3.989 with the same maths batched (equal to 7 digits for two
        // steps); the rule's exactness is tst_gated_delta_rule's, in float64. Here: it trains.
        const int steps = lora ? 40 : 12;
        for (int step = 0; step < steps; ++step) {
            auto loss = model->loss(x, y);
            losses.push_back(loss.item<double>());
            QVERIFY2(std::isfinite(losses.back()), qPrintable(QStringLiteral("step %1: loss %2").arg(step).arg(losses.back())));
            loss.backward();
            optimizer->step(lora ? 5e-2 : 1e-2);
            optimizer->zeroGrad();
        }
        QVERIFY2(losses.back() < losses.front() - (lora ? 0.1 : 0.5), qPrintable(QStringLiteral("loss %1 -> %2").arg(losses.front()).arg(losses.back())));
        if (lora) { // the adapters of linear_attn's projections moved
            const auto b = model->named_parameters()["model.layers.0.linear_attn.in_proj_qkvz.lora_B.weight"];
            QVERIFY(b.abs().sum().item<double>() > 0);
        }
    }

    // Recompute gives the same gradients as keeping the activations.
    void recomputeMatches()
    {
        const RunConfig c = tinyHybrid("qwen3_next");
        std::map<std::string, torch::Tensor> grads[2];
        for (int recompute = 0; recompute < 2; ++recompute) {
            DecoderModel model(c, ModelRuntime {false, recompute == 1}, torch::kCPU);
            model->initialise(4);
            model->train();
            const auto [x, y] = batch(c.model.vocabSize, 2, 20);
            model->loss(x, y).backward();
            for (const auto &item : model->named_parameters())
                grads[recompute][item.key()] = item.value().grad().clone();
        }
        for (const auto &[name, g] : grads[0])
            QVERIFY2(torch::allclose(g, grads[1].at(name), 1e-5, 1e-6), name.c_str());
    }
};

QTEST_GUILESS_MAIN(TestQwen3Next)
#include "tst_qwen3_next.moc"
