// One row per validation rule: a valid base config (the tiny preset) with one change must be
// refused with an issue naming the field and the rule; the unchanged base must be valid.
#include "config/Presets.h"
#include "config/RunConfigJson.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"

#include <QtTest>

#include <functional>

using Mutation = std::function<void(pb::RunConfig &)>;
Q_DECLARE_METATYPE(Mutation)

namespace {

QString describe(const std::vector<pb::ValidationIssue> &issues)
{
    QString text;
    for (const auto &i : issues)
        text += QString::fromStdString(i.field + ": " + i.message + "\n");
    return text.isEmpty() ? QStringLiteral("<valid>") : text;
}

} // namespace

class TestValidation : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void baseIsValid()
    {
        const pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        QVERIFY2(pb::validateRunConfig(c).empty(), qPrintable(describe(pb::validateRunConfig(c))));
    }
    void rules_data()
    {
        QTest::addColumn<Mutation>("mutate");
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("rule");
        auto row = [](const char *name, Mutation m, const char *field, const char *rule) { QTest::newRow(name) << m << QString::fromLatin1(field) << QString::fromLatin1(rule); };
        // Positive sizes.
        row("layers 0", [](auto &c) { c.model.layers = 0; }, "model.layers", "must be a positive integer, got 0");
        row("hidden negative", [](auto &c) { c.model.hiddenSize = -64; }, "model.hidden_size", "must be a positive integer");
        row("heads 0", [](auto &c) { c.model.attentionHeads = 0; }, "model.attention_heads", "must be a positive integer");
        row("kv heads 0", [](auto &c) { c.model.kvHeads = 0; }, "model.kv_heads", "must be a positive integer");
        row("intermediate 0", [](auto &c) { c.model.intermediateSize = 0; }, "model.intermediate_size", "must be a positive integer");
        row("vocab 0", [](auto &c) { c.model.vocabSize = 0; }, "model.vocab_size", "must be a positive integer");
        row("positions 0", [](auto &c) { c.model.maxPositions = 0; }, "model.max_positions", "must be a positive integer");
        row("head_dim negative", [](auto &c) { c.model.headDim = -1; }, "model.head_dim", "must be 0 or more");
        row("seq_len 0", [](auto &c) { c.train.seqLen = 0; }, "train.seq_len", "must be a positive integer");
        row("micro_batch 0", [](auto &c) { c.train.microBatch = 0; }, "train.micro_batch", "must be a positive integer");
        row("grad_accum negative", [](auto &c) { c.train.gradAccum = -2; }, "train.grad_accum", "must be a positive integer");
        row("lora rank 0", [](auto &c) { c.train.mode = pb::TrainMode::Lora; c.train.lora.rank = 0; }, "train.lora.rank", "must be a positive integer");
        row("qlora in fp32", [](auto &c) { c.train.mode = pb::TrainMode::Qlora; c.train.precision = pb::Precision::Fp32; }, "train.precision", "must be 16-bit under train.mode = qlora");
        row("fp8 with qlora", [](auto &c) { c.train.mode = pb::TrainMode::Qlora; c.train.precision = pb::Precision::Fp8Rowwise; }, "train.precision", "a qlora base is NF4");
        // seq_len x micro_batch past int64: still refused, nothing computed from the overflowed product.
        row("fp8 tokens beyond int64", [](auto &c) { c.train.precision = pb::Precision::Fp8Rowwise; c.train.seqLen = (int64_t(1) << 40) + 1; c.train.microBatch = (int64_t(1) << 40) + 1; }, "train.seq_len", "(seq_len x micro_batch = 1099511627777 x 1099511627777)");
        row("fp8 tokens not a multiple of 16", [](auto &c) { c.train.precision = pb::Precision::Fp8Tensorwise; c.train.seqLen = 60; c.train.microBatch = 1; }, "train.seq_len", "multiples of 16 tokens (seq_len x micro_batch = 60)");
        row("qlora rank 0", [](auto &c) { c.train.mode = pb::TrainMode::Qlora; c.train.precision = pb::Precision::Bf16; c.train.lora.rank = 0; }, "train.lora.rank", "must be a positive integer");
        // Shape rules.
        row("heads do not divide hidden", [](auto &c) { c.model.attentionHeads = 6; c.model.kvHeads = 3; }, "model.attention_heads", "must divide model.hidden_size (64 is not divisible by 6)");
        row("kv heads do not divide heads", [](auto &c) { c.model.kvHeads = 3; }, "model.kv_heads", "must divide model.attention_heads (4 is not divisible by 3)");
        row("seq_len above positions", [](auto &c) { c.train.seqLen = 257; }, "train.seq_len", "must not exceed model.max_positions (257 > 256)");
        row("too many layers", [](auto &c) { c.model.layers = 10001; }, "model.layers", "at most 10000 layers");
        // LoRA: the narrowest targeted layer of tiny is k_proj/v_proj, 64 -> 2 heads * 16 = 32.
        row("lora rank above kv width", [](auto &c) { c.train.mode = pb::TrainMode::Lora; c.train.lora.rank = 33; }, "train.lora.rank", "width of the targeted layer k_proj (33 > 32)");
        row("lora rank above hidden", [](auto &c) { c.train.mode = pb::TrainMode::Lora; c.train.lora.rank = 65; c.train.lora.targets = {"up_proj"}; }, "train.lora.rank", "width of the targeted layer up_proj (65 > 64)");
        row("lora unknown target", [](auto &c) { c.train.mode = pb::TrainMode::Lora; c.train.lora.targets = {"q_proj", "qkv_proj"}; }, "train.lora.targets", "unknown projection 'qkv_proj'");
        row("lora no target", [](auto &c) { c.train.mode = pb::TrainMode::Lora; c.train.lora.targets = {}; }, "train.lora.targets", "at least one projection");
        row("lora alpha 0", [](auto &c) { c.train.mode = pb::TrainMode::Lora; c.train.lora.alpha = 0; }, "train.lora.alpha", "must lie in (0, inf)");
        row("lora dropout 1", [](auto &c) { c.train.mode = pb::TrainMode::Lora; c.train.lora.dropout = 1.0; }, "train.lora.dropout", "must lie in [0, 1)");
        row("freeze empty", [](auto &c) { c.train.mode = pb::TrainMode::Freeze; c.train.trainable = {}; }, "train.trainable", "non-empty list");
        row("freeze blank entry", [](auto &c) { c.train.mode = pb::TrainMode::Freeze; c.train.trainable = {""}; }, "train.trainable", "non-empty list");
        row("freeze matches nothing", [](auto &c) { c.train.mode = pb::TrainMode::Freeze; c.train.trainable = {"lm_haed"}; }, "train.trainable", "'lm_haed' matches no parameter");
        // Optimizer hyper-parameters.
        row("lr 0", [](auto &c) { c.train.optimizer.lr = 0; }, "train.lr", "must lie in (0, inf), got 0");
        row("lr negative", [](auto &c) { c.train.optimizer.lr = -1e-4; }, "train.lr", "must lie in (0, inf)");
        row("lr nan", [](auto &c) { c.train.optimizer.lr = std::nan(""); }, "train.lr", "must lie in (0, inf)");
        row("beta1 1", [](auto &c) { c.train.optimizer.beta1 = 1.0; }, "train.beta1", "must lie in [0, 1), got 1");
        row("beta2 negative", [](auto &c) { c.train.optimizer.beta2 = -0.1; }, "train.beta2", "must lie in [0, 1)");
        row("eps 0", [](auto &c) { c.train.optimizer.eps = 0; }, "train.eps", "must lie in (0, inf)");
        row("momentum 1", [](auto &c) { c.train.optimizer.momentum = 1; }, "train.momentum", "must lie in [0, 1)");
        row("weight decay negative", [](auto &c) { c.train.optimizer.weightDecay = -0.01; }, "train.weight_decay", "must lie in [0, inf)");
        row("grad clip negative", [](auto &c) { c.train.gradClip = -1; }, "train.grad_clip", "must lie in [0, inf)");
        row("loss scale 0", [](auto &c) { c.train.lossScale = 0; }, "train.loss_scale", "must lie in (0, inf)");
        row("total steps 0", [](auto &c) { c.train.schedule.totalSteps = 0; }, "train.schedule.total_steps", "must be a positive integer");
        row("warmup negative", [](auto &c) { c.train.schedule.warmupSteps = -1; }, "train.schedule.warmup_steps", "must be 0 or more");
        row("min lr ratio 2", [](auto &c) { c.train.schedule.minLrRatio = 2; }, "train.schedule.min_lr_ratio", "must lie in [0, 1]");
        // Rope scaling: each field its type needs, none it does not use.
        const auto llama3 = [](pb::RunConfig &c) { c.model.ropeScaling = pb::RopeScaling::llama3(32, 1, 4, 8192); };
        row("rope factor without a type", [](auto &c) { c.model.ropeScaling.factor = 8; }, "model.rope_scaling.factor", "is only used by type llama3, linear, yarn or longrope, not none");
        row("llama3 without factor", [=](auto &c) { llama3(c); c.model.ropeScaling.factor = 0; }, "model.rope_scaling.factor", "is required by type llama3");
        row("llama3 factor below 1", [=](auto &c) { llama3(c); c.model.ropeScaling.factor = 0.5; }, "model.rope_scaling.factor", "must lie in [1, inf), got 0.5");
        row("llama3 without low factor", [=](auto &c) { llama3(c); c.model.ropeScaling.lowFreqFactor = 0; }, "model.rope_scaling.low_freq_factor", "is required by type llama3");
        row("llama3 negative high factor", [=](auto &c) { llama3(c); c.model.ropeScaling.highFreqFactor = -4; }, "model.rope_scaling.high_freq_factor", "must lie in (0, inf)");
        row("llama3 high below low", [=](auto &c) { llama3(c); c.model.ropeScaling.highFreqFactor = 0.5; }, "model.rope_scaling.high_freq_factor", "must not be below model.rope_scaling.low_freq_factor (0.5 < 1)");
        row("llama3 without original context", [=](auto &c) { llama3(c); c.model.ropeScaling.originalMaxPositions = 0; }, "model.rope_scaling.original_max_positions", "is required by type llama3");
        row("llama3 negative original context", [=](auto &c) { llama3(c); c.model.ropeScaling.originalMaxPositions = -8192; }, "model.rope_scaling.original_max_positions", "must be a positive integer");
        row("linear without factor", [](auto &c) { c.model.ropeScaling.type = pb::RopeScalingType::Linear; }, "model.rope_scaling.factor", "is required by type linear");
        row("linear with a llama3 field", [](auto &c) { c.model.ropeScaling = pb::RopeScaling::linear(2); c.model.ropeScaling.highFreqFactor = 4; }, "model.rope_scaling.high_freq_factor", "is only used by type llama3, not linear");
        // Schedules of validation and checkpoints.
        row("validation every negative", [](auto &c) { c.validation.everySteps = -1; }, "validation.every_steps", "must be 0 or more");
        row("validation without batches", [](auto &c) { c.validation.everySteps = 10; c.validation.batches = 0; }, "validation.batches", "must be positive when validation.every_steps is set");
        row("checkpoint every negative", [](auto &c) { c.checkpoint.everySteps = -5; }, "checkpoint.every_steps", "must be 0 or more");
        // Deterministic values: the seed must come back from the file exactly.
        row("seed beyond 2^53", [](auto &c) { c.seed = (uint64_t(1) << 53) + 1; }, "seed", "within 0..2^53");
        // Data and job.
        row("token file without path", [](auto &c) { c.data.kind = pb::DataKind::TokenFile; }, "data.path", "must name the file for data.kind tokens");
        row("token dtype", [](auto &c) { c.data.kind = pb::DataKind::TokenFile; c.data.path = "x.bin"; c.data.tokenDtype = "int8"; }, "data.token_dtype", "unknown value 'int8'");
        row("lengths file missing", [](auto &c) { c.data.lengths = pb::LengthDistribution::FromFile; }, "data.lengths_file", "must name a file of lengths");
        row("uniform min above seq", [](auto &c) { c.data.lengths = pb::LengthDistribution::Uniform; c.data.minLength = 65; }, "data.min_length", "must not exceed train.seq_len (65 > 64)");
        row("synthetic samples 0", [](auto &c) { c.data.syntheticSamples = 0; }, "data.synthetic_samples", "must be a positive integer");
        row("validation per mille", [](auto &c) { c.data.validationFraction = 1000; }, "data.validation_per_mille", "must lie in 0..999");
        row("job amount 0", [](auto &c) { c.job.amount = 0; }, "job.amount", "must lie in (0, inf)");
        row("epochs without dataset", [](auto &c) { c.job.unit = pb::JobUnit::Epochs; c.job.datasetTokens = 0; }, "job.dataset_tokens", "must lie in (0, inf)");
        row("deadline 0", [](auto &c) { c.job.deadlineHours = 0.0; }, "job.deadline_hours", "must lie in (0, inf)");
        // A CUDA graph of the step: only what takes its changing values on the device.
        row("cuda graph with sgd", [](auto &c) { c.train.cudaGraph = true; c.train.optimizer.kind = pb::OptimizerKind::Sgd; }, "train.cuda_graph", "needs optimizer adamw");
        row("cuda graph with fp16 loss scaling", [](auto &c) { c.train.cudaGraph = true; c.train.precision = pb::Precision::Fp16Mixed; }, "train.cuda_graph", "fp16-mixed");
        // Overflow: each size is representable, their products are not; never wrapped.
        // Sizes beyond any model are refused by name before any product is formed.
        row("hidden size beyond any model", [](auto &c) { c.model.hiddenSize = int64_t(1) << 40; c.model.intermediateSize = int64_t(1) << 40; c.model.maxPositions = 1 << 20; }, "model.hidden_size", "at most 1048576 is supported");
        row("vocabulary beyond any model", [](auto &c) { c.model.vocabSize = int64_t(1) << 62; }, "model.vocab_size", "at most 16777216 is supported");
        row("max positions beyond any model", [](auto &c) { c.model.maxPositions = int64_t(1) << 31; }, "model.max_positions", "at most 16777216 is supported");
        row("parameter count overflow", [](auto &c) { c.model.layers = 4096; c.model.hiddenSize = int64_t(1) << 20; c.model.intermediateSize = int64_t(1) << 22; c.model.attentionHeads = 1 << 14; c.model.kvHeads = 1 << 14; }, "model", "parameter count overflows");
        row("tokens per step overflow", [](auto &c) { c.train.microBatch = int64_t(1) << 30; c.train.gradAccum = int64_t(1) << 30; }, "train.grad_accum", "tokens per optimizer step");
        row("tokens per micro-batch overflow", [](auto &c) { c.train.microBatch = int64_t(1) << 50; }, "train.micro_batch", "tokens per micro-batch");
        row("activation overflow", [](auto &c) { c.train.microBatch = int64_t(1) << 42; }, "train.micro_batch", "activation elements");
        row("attention scores overflow", [](auto &c) { c.model.maxPositions = int64_t(1) << 24; c.train.seqLen = int64_t(1) << 24; c.train.microBatch = 64; c.model.vocabSize = 2; }, "train.seq_len", "attention score elements");
    }
    void rules()
    {
        QFETCH(Mutation, mutate);
        QFETCH(QString, field);
        QFETCH(QString, rule);
        pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        mutate(c);
        const auto issues = pb::validateRunConfig(c);
        const bool found = std::any_of(issues.begin(), issues.end(), [&](const pb::ValidationIssue &i) {
            return QString::fromStdString(i.field) == field && QString::fromStdString(i.message).contains(rule);
        });
        QVERIFY2(found, qPrintable(QStringLiteral("expected %1: %2\ngot:\n%3").arg(field, rule, describe(issues))));
        // requireValid throws the first issue, as InvalidInputError (exit code 2), naming a field.
        try {
            pb::requireValid(c);
            QFAIL("requireValid accepted an invalid config");
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(e.code(), pb::ExitCode::InvalidInput);
            QVERIFY(!e.where().empty());
        }
    }
    void headDimLiftsTheDivisionRule()
    {
        pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        c.model.attentionHeads = 6;
        c.model.kvHeads = 3;
        c.model.headDim = 16;
        QVERIFY2(pb::validateRunConfig(c).empty(), qPrintable(describe(pb::validateRunConfig(c))));
    }
    void validLoraAndFreeze()
    {
        pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        c.train.mode = pb::TrainMode::Lora;
        c.train.lora.rank = 32; // equal to the narrowest width is allowed
        c.train.lora.targets = {"all-linear"};
        QVERIFY2(pb::validateRunConfig(c).empty(), qPrintable(describe(pb::validateRunConfig(c))));
        c.train.mode = pb::TrainMode::Freeze;
        c.train.trainable = {"lm_head", "layers.1."};
        QVERIFY2(pb::validateRunConfig(c).empty(), qPrintable(describe(pb::validateRunConfig(c))));
    }
    void validRopeScaling()
    {
        pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        c.model.ropeScaling = pb::RopeScaling::llama3(32, 1, 4, 8192);
        QVERIFY2(pb::validateRunConfig(c).empty(), qPrintable(describe(pb::validateRunConfig(c))));
        c.model.ropeScaling = pb::RopeScaling::linear(2);
        QVERIFY2(pb::validateRunConfig(c).empty(), qPrintable(describe(pb::validateRunConfig(c))));
    }
    void everyIssueIsListed()
    {
        pb::RunConfig c = pb::presetConfig(QStringLiteral("tiny"));
        c.model.layers = 0;
        c.train.optimizer.lr = 0;
        c.validation.everySteps = -1;
        QCOMPARE(pb::validateRunConfig(c).size(), size_t(3));
    }
    void largestPresetIsNotAnOverflow()
    {
        pb::RunConfig c = pb::presetConfig(QStringLiteral("llama-3.1-70b"));
        c.train.seqLen = 131072;
        c.train.microBatch = 64;
        QVERIFY2(pb::validateRunConfig(c).empty(), qPrintable(describe(pb::validateRunConfig(c))));
    }
};

QTEST_GUILESS_MAIN(TestValidation)
#include "tst_validation.moc"
