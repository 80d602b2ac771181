#include "config/RunConfigValidation.h"

#include "config/CheckedParameterCount.h"
#include "config/ConfigChecker.h"
#include "config/ModelShapeValidation.h"
#include "config/ParameterTable.h"
#include "util/Errors.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace pb {
namespace {

using validation::Checker;
using validation::checkedParameterCount;
using validation::checkModel;
using validation::kMaxExact;
using validation::mul;

void checkTrain(Checker &k, const RunConfig &c, bool shapeOk)
{
    const TrainConfig &t = c.train;
    const bool seqOk = k.positive(t.seqLen, "train.seq_len");
    k.positive(t.microBatch, "train.micro_batch");
    k.positive(t.gradAccum, "train.grad_accum");
    if (seqOk && c.model.maxPositions > 0)
        k.require(t.seqLen <= c.model.maxPositions, "train.seq_len", "must not exceed model.max_positions (" + std::to_string(t.seqLen) + " > " + std::to_string(c.model.maxPositions) + ")");

    if (isFp8(t.precision)) {
        k.require(t.mode != TrainMode::Qlora, "train.precision", "fp8 multiplies a 16-bit or fp32 weight in float8; a qlora base is NF4 (use bf16-mixed)");
        k.require(!c.model.moe.enabled(), "train.precision", "fp8 is built for dense models: a mixture's experts see token counts that float8 matmuls (multiples of 16) cannot take");
        k.require(!c.model.linear.enabled(), "train.precision", "fp8 is not modelled for Gated DeltaNet layers (their conv and gated rule run in 16 or 32 bits): use bf16-mixed");
        // Modulo 16 first: the product itself may overflow on absurd input, which validation must survive.
        const auto tokens = mul(t.seqLen, t.microBatch);
        k.require(((t.seqLen % 16) * (t.microBatch % 16)) % 16 == 0, "train.seq_len",
                  "fp8 matmuls take multiples of 16 tokens (seq_len x micro_batch = " +
                      (tokens ? std::to_string(*tokens) : std::to_string(t.seqLen) + " x " + std::to_string(t.microBatch)) + ")");
        if (shapeOk) {
            // Every layer's own shapes where they differ (Gemma 4's global heads, shared layers,
            // double-wide MLPs), and the per-layer input's projections; the first too narrow is named.
            const ModelShape &m = c.model;
            std::vector<ProjectionShape> shapes = denseProjections(m);
            if (m.layerShapesVary() || m.traits.kvSharedLayers > 0 || m.traits.doubleWideMlp)
                for (int64_t layer = 0; layer < std::min<int64_t>(m.layers, kMaxModelLayers); ++layer)
                    for (const auto &p : denseProjections(m, layer))
                        shapes.push_back(p);
            if (const int64_t pli = m.traits.perLayerInput; pli > 0) {
                shapes.push_back({"per_layer_input_gate", m.hiddenSize, pli});
                shapes.push_back({"per_layer_projection", pli, m.hiddenSize});
            }
            for (const auto &p : shapes)
                if (p.in % 16 != 0 || p.out % 16 != 0) {
                    k.require(false, "train.precision", "fp8 matmuls take widths in multiples of 16; " + p.name + " is " + std::to_string(p.out) + " x " + std::to_string(p.in));
                    break;
                }
        }
    }
    if (t.mode == TrainMode::Qlora)
        k.require(t.precision != Precision::Fp32, "train.precision",
                  "must be 16-bit under train.mode = qlora (bf16-mixed, bf16 or fp16-mixed): the NF4 base is dequantised to the compute dtype");
    if (usesAdapters(t.mode)) {
        const bool rankOk = k.positive(t.lora.rank, "train.lora.rank");
        k.range(t.lora.alpha, 0, false, INFINITY, false, "train.lora.alpha");
        k.range(t.lora.dropout, 0, true, 1, false, "train.lora.dropout");
        // The model's own projection names (Phi-3's qkv_proj and gate_up_proj where fused); a
        // sparse model's experts are still targeted as gate_proj, up_proj, down_proj.
        auto dense = denseProjections(c.model);
        if (c.model.traits.perLayerInput > 0) { // Gemma 4's per-layer embeddings' projections (PEFT's all-linear takes them)
            const int64_t h = c.model.hiddenSize, pli = c.model.traits.perLayerInput;
            dense.push_back({"per_layer_input_gate", h, pli, false, false});
            dense.push_back({"per_layer_projection", pli, h, false, false});
            dense.push_back({"per_layer_model_projection", h, c.model.layers * pli, false, false});
        }
        if (c.model.linear.enabled()) { // linear_attn's projections beside the full layers' (out_proj ...)
            const auto linear = linearAttentionProjections(c.model);
            dense.insert(dense.end(), linear.begin(), linear.end());
        }
        std::vector<std::string> names;
        for (const auto &p : dense)
            names.push_back(p.name);
        if (c.model.moe.enabled())
            for (const char *role : {"gate_proj", "up_proj"})
                if (std::find(names.begin(), names.end(), role) == names.end())
                    names.emplace_back(role);
        std::string known;
        for (const auto &n : names)
            known += n + ", ";
        k.require(!t.lora.targets.empty(), "train.lora.targets", "must name at least one projection (" + known + "or all-linear)");
        for (const auto &target : t.lora.targets)
            k.require(target == "all-linear" || std::find(names.begin(), names.end(), target) != names.end(), "train.lora.targets",
                      "unknown projection '" + target + "' for this model (known: " + known + "all-linear)");
        // PEFT's target_modules name nn.Linear modules; stacked experts are 3-D parameters (PEFT's
        // target_parameters), which this engine does not adapt. A model whose only MLPs are such
        // experts (gpt-oss) would train no adapter there: said, not ignored.
        const MoeConfig &moe = c.model.moe;
        bool denseMlp = moe.sharedExpertIntermediateSize > 0;
        for (int64_t layer = 0; layer < c.model.layers && !denseMlp; ++layer)
            denseMlp = !moe.sparse(layer);
        if (moe.stackedExperts && !denseMlp)
            for (const auto &target : t.lora.targets)
                k.require(target != "gate_proj" && target != "up_proj" && target != "down_proj" && target != "gate_up_proj", "train.lora.targets",
                          "'" + target + "' would only reach the experts, which this model stores as 3-D tensors (experts.gate_up_proj, experts.down_proj); "
                          "LoRA on them is not supported: target the attention (q_proj, k_proj, v_proj, o_proj)");
        if (rankOk && shapeOk) {
            for (const auto &p : dense) {
                if (!loraTargets(c, p.name))
                    continue;
                const int64_t width = std::min(p.in, p.out);
                k.require(t.lora.rank <= width, "train.lora.rank",
                          "must not exceed the width of the targeted layer " + p.name + " (" + std::to_string(t.lora.rank) + " > " + std::to_string(width) + ")");
            }
        }
    }
    if (t.mode == TrainMode::Freeze) {
        const bool any = std::any_of(t.trainable.begin(), t.trainable.end(), [](const std::string &s) { return !s.empty(); });
        k.require(any, "train.trainable", "freeze mode needs a non-empty list of parameter-name parts to keep trainable (e.g. [\"lm_head\", \"layers.31.\"])");
    }

    const OptimizerConfig &o = t.optimizer;
    k.range(o.lr, 0, false, INFINITY, false, "train.lr");
    k.range(o.weightDecay, 0, true, INFINITY, false, "train.weight_decay");
    k.range(o.beta1, 0, true, 1, false, "train.beta1");
    k.range(o.beta2, 0, true, 1, false, "train.beta2");
    k.range(o.eps, 0, false, INFINITY, false, "train.eps");
    k.range(o.momentum, 0, true, 1, false, "train.momentum");
    k.range(t.gradClip, 0, true, INFINITY, false, "train.grad_clip");
    k.range(t.lossScale, 0, false, INFINITY, false, "train.loss_scale");
    if (t.cudaGraph) {
        // What a captured step must not do: read host values that change between steps.
        k.require(t.optimizer.kind == OptimizerKind::AdamW, "train.cuda_graph",
                  std::string("a CUDA graph of the step needs optimizer adamw (its fused kernel takes the rate on the device), not ") + toString(t.optimizer.kind));
        k.require(t.precision != Precision::Fp16Mixed, "train.cuda_graph", "fp16-mixed's loss scale skips and halves from the host: use bf16-mixed with a CUDA graph");
    }

    const ScheduleConfig &s = t.schedule;
    k.nonNegative(s.warmupSteps, "train.schedule.warmup_steps");
    k.positive(s.totalSteps, "train.schedule.total_steps");
    k.range(s.minLrRatio, 0, true, 1, true, "train.schedule.min_lr_ratio");
}

void checkRest(Checker &k, const RunConfig &c)
{
    k.nonNegative(c.validation.everySteps, "validation.every_steps");
    k.nonNegative(c.validation.batches, "validation.batches");
    if (c.validation.everySteps > 0)
        k.require(c.validation.batches > 0, "validation.batches", "must be positive when validation.every_steps is set");
    k.nonNegative(c.checkpoint.everySteps, "checkpoint.every_steps");
    k.require(c.seed <= static_cast<uint64_t>(kMaxExact), "seed", "must lie within 0..2^53 so the file reproduces it exactly");

    const DataConfig &d = c.data;
    if (d.kind != DataKind::Synthetic)
        k.require(!d.path.empty(), "data.path", std::string("must name the file for data.kind ") + toString(d.kind));
    if (d.kind == DataKind::TokenFile)
        k.require(d.tokenDtype == "uint16" || d.tokenDtype == "uint32" || d.tokenDtype == "npy", "data.token_dtype", "unknown value '" + d.tokenDtype + "' (expected one of: uint16, uint32, npy)");
    if (d.lengths == LengthDistribution::FromFile)
        k.require(!d.lengthsFile.empty(), "data.lengths_file", "must name a file of lengths when data.lengths is 'file'");
    k.nonNegative(d.minLength, "data.min_length");
    if (d.lengths == LengthDistribution::Uniform && c.train.seqLen > 0)
        k.require(d.minLength <= c.train.seqLen, "data.min_length", "must not exceed train.seq_len (" + std::to_string(d.minLength) + " > " + std::to_string(c.train.seqLen) + ")");
    if (d.kind == DataKind::Synthetic)
        k.positive(d.syntheticSamples, "data.synthetic_samples");
    k.require(d.validationFraction >= 0 && d.validationFraction < 1000, "data.validation_per_mille", "must lie in 0..999, got " + std::to_string(d.validationFraction));

    k.range(c.job.amount, 0, false, INFINITY, false, "job.amount");
    if (c.job.unit == JobUnit::Epochs)
        k.range(c.job.datasetTokens, 0, false, INFINITY, false, "job.dataset_tokens");
    else
        k.range(c.job.datasetTokens, 0, true, INFINITY, false, "job.dataset_tokens");
    if (c.job.deadlineHours)
        k.range(*c.job.deadlineHours, 0, false, INFINITY, false, "job.deadline_hours");
}

// Sizes that are each fine but whose products leave exact integer arithmetic.
void checkOverflow(Checker &k, const RunConfig &c)
{
    const auto count = checkedParameterCount(c);
    k.require(count.has_value(), "model", "the parameter count overflows (beyond 2^53); the sizes are too large");
    const TrainConfig &t = c.train;
    if (t.seqLen <= 0 || t.microBatch <= 0 || t.gradAccum <= 0)
        return;
    const auto tokens = mul(t.seqLen, t.microBatch);
    if (!tokens) {
        k.require(false, "train.micro_batch", "tokens per micro-batch (seq_len * micro_batch) overflow 2^53");
        return;
    }
    k.require(mul(tokens, t.gradAccum).has_value(), "train.grad_accum", "tokens per optimizer step (seq_len * micro_batch * grad_accum) overflow 2^53");
    k.require(mul(tokens, c.model.hiddenSize).has_value(), "train.micro_batch", "activation elements (seq_len * micro_batch * hidden_size) overflow 2^53");
    k.require(mul(tokens, c.model.vocabSize).has_value(), "train.micro_batch", "logit elements (seq_len * micro_batch * vocab_size) overflow 2^53");
    k.require(mul(mul(tokens, t.seqLen), c.model.attentionHeads).has_value(), "train.seq_len", "attention score elements (micro_batch * heads * seq_len^2) overflow 2^53");
}

} // namespace

std::vector<ValidationIssue> validateRunConfig(const RunConfig &config)
{
    Checker k;
    bool shapeOk = false;
    k.require(config.schemaVersion >= 1 && config.schemaVersion <= RunConfig::kSchemaVersion, "schema_version",
              "must lie in 1.." + std::to_string(RunConfig::kSchemaVersion) + ", got " + std::to_string(config.schemaVersion));
    checkModel(k, config, shapeOk);
    checkTrain(k, config, shapeOk);
    checkRest(k, config);
    if (shapeOk)
        checkOverflow(k, config);
    if (shapeOk && k.issues.empty() && config.train.mode == TrainMode::Freeze) {
        // Only now is the table cheap and safe to build: a trainable entry matching nothing is a typo.
        const auto table = parameterTable(config);
        for (const auto &part : config.train.trainable) {
            if (part.empty())
                continue;
            const bool matches = std::any_of(table.begin(), table.end(), [&](const ParameterInfo &p) { return p.name.find(part) != std::string::npos; });
            k.require(matches, "train.trainable", "'" + part + "' matches no parameter name (names look like model.layers.0.mlp.up_proj.weight, lm_head.weight)");
        }
    }
    return k.issues;
}

void requireValid(const RunConfig &config)
{
    const auto issues = validateRunConfig(config);
    if (!issues.empty())
        throw InvalidInputError(issues.front().field, issues.front().message);
}

} // namespace pb
