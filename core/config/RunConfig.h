#pragma once
// The run definition: the single description of a fine-tuning run that the estimator, the engine,
// the history and the report all read. Plain data; loading, saving and validation live beside it
// (RunConfigJson.h, RunConfigValidation.h).
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace pb {

// Qlora: LoRA adapters over a frozen base stored in 4-bit NF4 (config/Nf4Format.h), dequantised
// for each matmul.
enum class TrainMode { Full, Lora, Freeze, Qlora };
// LoRA and QLoRA train adapters (train.lora) and nothing else.
inline bool usesAdapters(TrainMode mode) { return mode == TrainMode::Lora || mode == TrainMode::Qlora; }
enum class OptimizerKind { AdamW, Adam, Sgd, Adagrad, RmsProp, AdamW8bit, Adafactor };
// Fp8Rowwise / Fp8Tensorwise: bf16-mixed with every projection's matmul in float8 (model/Fp8Linear.h):
// e4m3 with a dynamic scale per row, or per tensor (gradients then e5m2).
enum class Precision { Fp32, Bf16Mixed, Bf16, Fp16Mixed, Fp8Rowwise, Fp8Tensorwise };
inline bool isFp8(Precision p) { return p == Precision::Fp8Rowwise || p == Precision::Fp8Tensorwise; }
enum class AttentionImpl { Auto, Math, Flash, MemEfficient };
enum class NormKind { RmsNorm, LayerNorm };
// The MLP: SwiGLU (silu(gate) * up), GeGLU with the tanh-approximated GELU (Gemma's
// gelu_pytorch_tanh) or the exact one (erf), or an ungated GELU.
enum class ActivationKind { SwiGlu, GeGlu, Gelu, GeGluErf };
enum class ScheduleKind { Constant, Cosine, Linear };
enum class DataKind { Synthetic, TokenFile, Jsonl };
enum class LengthDistribution { Fixed, Uniform, FromFile };
enum class JobUnit { Tokens, Epochs };
enum class RopeScalingType { None, Llama3, Linear, Yarn, LongRope };
// Where a decoder block normalises: before each sub-layer (Llama), on each sub-layer's output before
// the residual add (OLMo 2), or both (Gemma 2/3 and GLM-4's four norms per layer).
enum class NormPlacement { Pre, Post, Sandwich };
// RMSNorm of queries and keys before RoPE: per head (Qwen3) or over the whole projection (OLMoE);
// or Llama 4's L2 norm: per head, without a weight, in fp32, after the rotary, on rotary layers only.
enum class QkNorm { None, Head, Full, L2 };
// The loss's kernels: eager (Transformers' ops, today's numerics and memory) or fused (the
// linear head and cross-entropy in chunks of tokens, never the full logits).
enum class KernelPath { Eager, Fused };

// Transformers' `rope_scaling`: how a model stretches its rotary frequencies past the context it was
// pre-trained at. It changes every position the model sees, so weights trained with it must run with
// it. Fields the type does not use stay 0.
struct RopeScaling {
    RopeScalingType type = RopeScalingType::None;
    double factor = 0;                 // llama3, linear
    double lowFreqFactor = 0;          // llama3
    double highFreqFactor = 0;         // llama3
    int64_t originalMaxPositions = 0;  // llama3, yarn, longrope: the pre-training context length
    // yarn: the ramp between the fast and slow wavelengths, mscale terms, and whether the ramp's
    // bounds are truncated to integers; 0 / defaults as Transformers' _compute_yarn_parameters.
    double betaFast = 32, betaSlow = 1, mscale = 0, mscaleAllDim = 0;
    bool truncate = true;
    double attentionFactor = 0;        // yarn, longrope: scales cos and sin; 0: derived from factor
    std::vector<double> shortFactor, longFactor; // longrope: one divisor per frequency

    static RopeScaling linear(double factor)
    {
        RopeScaling s;
        s.type = RopeScalingType::Linear;
        s.factor = factor;
        return s;
    }
    static RopeScaling llama3(double factor, double lowFreqFactor, double highFreqFactor, int64_t originalMaxPositions)
    {
        RopeScaling s = linear(factor);
        s.type = RopeScalingType::Llama3;
        s.lowFreqFactor = lowFreqFactor;
        s.highFreqFactor = highFreqFactor;
        s.originalMaxPositions = originalMaxPositions;
        return s;
    }
};

// Which layers a rule picks: every `every`-th layer (layer + 1 divisible by it) and the listed ones.
struct LayerSelection {
    int64_t every = 0;
    std::vector<int64_t> layers;

    bool empty() const { return every <= 0 && layers.empty(); }
    bool contains(int64_t layer) const
    {
        return (every > 0 && (layer + 1) % every == 0) || std::find(layers.begin(), layers.end(), layer) != layers.end();
    }
    bool operator==(const LayerSelection &o) const { return every == o.every && layers == o.layers; }
};

// The traits in which the dense families differ from Llama. Each default is Llama's, and a trait
// is written to a config only when it differs, so configs without it keep their hashes. The
// engine, the estimator, parameter counting and checkpoint naming read these, never the family.
struct ModelTraits {
    // Attention per layer.
    int64_t slidingWindow = 0;               // 0: full attention; W: a query sees the W keys ending at itself
    LayerSelection globalLayers;             // with a window: the layers that keep full attention (none: all slide)
    bool lastLayerGlobal = false;            // the last layer keeps full attention whatever the pattern (Gemma 4's config forces it)
    LayerSelection noRopeLayers;             // layers without rotary positions (SmolLM3's NoPE layers)
    // Rotary.
    double partialRotary = 1.0;              // share of head_dim rotated (partial_rotary_factor)
    double localRopeTheta = 0;               // sliding layers' base, unscaled (Gemma 3); 0: the global rotary
    bool ropeInterleaved = false;            // pairs (2i, 2i+1) rotate (GLM) instead of (i, i + d/2)
    bool ropeFp32 = false;                   // q and k turned by the fp32 tables, then cast back (OLMo 2/3)
    // Norms.
    NormPlacement normPlacement = NormPlacement::Pre;
    bool normUnitOffset = false;             // RMSNorm scales by (1 + weight), weights start at 0 (Gemma)
    bool normScaleInFp32 = false;            // the weight multiplies in fp32 before the cast back (Gemma, OLMo 2)
    // Attention details.
    double attentionScale = 0;               // 0: 1/sqrt(head_dim); query_pre_attn_scalar^-0.5, Granite's attention_multiplier
    double attentionSoftcap = 0;             // tanh soft-capping of the attention logits (Gemma 2); 0: off
    double finalSoftcap = 0;                 // ... of the final logits; 0: off
    double queryTemperatureBeta = 0;         // Llama 4 / Ministral 3: q x (1 + beta ln(1 + floor((pos + offset) / length))); 0: off
    int64_t queryTemperatureLength = 0;
    // Llama 4's form of it: positions counted from 1 (offset 1), on the layers without rotary only,
    // q times the fp32 scale rounded once (Ministral 3: offset 0, every layer, the scale rounded
    // to q's dtype first).
    int64_t queryTemperatureOffset = 0;
    bool queryTemperatureNoRope = false;
    bool queryTemperatureFp32 = false;
    // Llama 4's chunked attention on the layers with rotary: a query sees the causal keys of its own
    // chunk of this many positions (key j from query i when j <= i and j / C == i / C); 0: off.
    int64_t attentionChunk = 0;
    bool outputBias = false;                 // o_proj bias
    // gpt-oss's attention sinks: a learned logit per head (self_attn.sinks) joins each query's
    // softmax as one more key with no value, so a query may attend to nothing.
    bool attentionSinks = false;
    // Qwen3-Next / Qwen3.5's gated attention: q_proj yields each head's query and then its gate
    // ([query | gate] per head, twice the width); the attended output times sigmoid(gate) before o_proj.
    bool attentionOutputGate = false;
    bool mlpBias = false;                    // biases on the MLP's projections
    // Scales.
    double embeddingScale = 1.0;             // Gemma: sqrt(hidden); Granite: embedding_multiplier
    bool embeddingScaleRounded = false;      // the factor rounded to the embedding's dtype first (Gemma)
    double residualScale = 1.0;              // sub-layer outputs times this before the residual add (Granite)
    double logitsDivisor = 1.0;              // logits divided by this (Granite's logits_scaling)
    // Fused projections (Phi-3: qkv_proj and gate_up_proj; GLM-4: gate_up_proj), named as the family's.
    bool fusedQkv = false;
    bool fusedGateUp = false;
    // Gemma 4's global layers (those a window spares) differ in shape from its sliding ones: their
    // own head width (global_head_dim) and key/value heads (num_global_key_value_heads), values
    // taken from k_proj's output (attention_k_eq_v: no v_proj), and the proportional rotary (the
    // whole head turned by the global head's frequencies, those past partial_rotary's share zero;
    // the sliding layers then turn whole heads at local_rope_theta). 0 / false: as the other layers.
    int64_t globalHeadDim = 0;
    int64_t globalKvHeads = 0;
    bool globalValuesFromKeys = false;
    bool ropeProportional = false;
    bool valueNorm = false;                  // each value head RMS-normalised without a weight (Gemma 4's v_norm)
    bool layerScalar = false;                // each block's output times its layer_scalar, a checkpoint buffer (Gemma 4)
    // Gemma 4's per-layer embeddings (E2B, E4B): every layer reads an input of its own, perLayerInput
    // wide, made from a second table (embed_tokens_per_layer: perLayerVocab x layers * perLayerInput)
    // and a projection of the embedded tokens; after its MLP the block adds
    // post_per_layer_input_norm(per_layer_projection(gelu(per_layer_input_gate(h)) * input)). 0: none.
    int64_t perLayerInput = 0;
    int64_t perLayerVocab = 0;               // 0: vocab_size
    // Gemma 4's shared keys and values: the last kvSharedLayers layers have no k_proj, v_proj or k_norm
    // and attend to the keys and values of the last earlier layer of their kind (sliding or global).
    int64_t kvSharedLayers = 0;
    bool doubleWideMlp = false;              // the shared layers' MLPs twice intermediate_size wide (E2B)

    bool usesRope(int64_t layer) const { return !noRopeLayers.contains(layer); }
    bool usesChunks(int64_t layer) const { return attentionChunk > 0 && usesRope(layer); }
    // Whether a layer's queries are scaled by the temperature at all within `seqLen` positions.
    bool usesQueryTemperature(int64_t layer, int64_t seqLen) const
    {
        return queryTemperatureBeta > 0 && seqLen - 1 + queryTemperatureOffset >= queryTemperatureLength && !(queryTemperatureNoRope && usesRope(layer));
    }
};

// How a router turns its logits into the chosen experts' weights: a softmax over all experts, then
// top-k (Mixtral, Qwen-MoE, OLMoE); or DeepSeek-V3's independent sigmoid per expert, the top-k picked
// from the groups with the best scores (with the correction bias added for the choice only).
enum class RouterScoring { Softmax, Sigmoid };

// A sparse mixture-of-experts MLP in place of the dense one (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE):
// a router picks expertsPerToken of `experts` SwiGLU experts per token; a shared expert, where the
// model has one, sees every token. experts == 0: the model is dense.
struct MoeConfig {
    int64_t experts = 0;
    int64_t expertsPerToken = 0;
    int64_t expertIntermediateSize = 0;
    int64_t sharedExpertIntermediateSize = 0; // 0: no shared expert
    bool sharedExpertGate = false;           // a sigmoid gate on the shared expert's output (Qwen2-MoE)
    bool normalizeTopK = true;               // the chosen experts' weights renormalised to sum to 1
    int64_t sparseStep = 1;                  // every sparseStep-th layer is sparse (Qwen2-MoE's decoder_sparse_step)
    std::vector<int64_t> denseLayers;        // layers kept dense whatever sparseStep says (mlp_only_layers)
    double auxLossWeight = 0.01;             // load-balancing loss, added to the training loss
    double routerJitter = 0.0;               // multiplicative input noise in training (Mixtral)
    // Llama 4: each chosen expert's weight multiplies the expert's input, not its output (with
    // scoring = sigmoid: top-k on the logits, the weight sigmoid(logit) rounded to the logits' dtype).
    bool scaleExpertInput = false;
    // DeepSeek-V3's router (scoring = sigmoid): the experts in `groups` equal groups, a group scored
    // by the sum of its two best scores, the choice limited to the best `groupsPerToken` groups;
    // e_score_correction_bias (a buffer, not trained) added to the scores for the choice only; the
    // chosen weights times routedScale. Defaults: the softmax router, one group, no bias, scale 1.
    RouterScoring scoring = RouterScoring::Softmax;
    int64_t groups = 1;                      // n_group
    int64_t groupsPerToken = 1;              // topk_group
    bool scoreCorrectionBias = false;        // mlp.gate.e_score_correction_bias
    double routedScale = 1.0;                // routed_scaling_factor
    // gpt-oss's router: a bias on the logits (mlp.router.bias), top-k of the logits, then a softmax
    // over the k chosen in the logits' dtype (scoring = softmax; normalize_top_k has nothing to do).
    bool routerBias = false;
    bool softmaxAfterTopK = false;
    // Experts held as gpt-oss and Llama 4 checkpoints store them (model/StackedExperts.h):
    // experts.gate_up_proj [E, H, 2I] and experts.down_proj [E, I, H], not one MLP per expert.
    bool stackedExperts = false;
    bool interleavedGateUp = false;          // stacked: gate and up alternate on the last dimension (gpt-oss); else halves
    bool expertBias = false;                 // stacked: gate_up_proj_bias [E, 2I] and down_proj_bias [E, H] (gpt-oss)
    double swigluLimit = 0;                  // stacked: gpt-oss's clamped SwiGLU (swiglu_limit); 0: silu(gate) * up
    double swigluAlpha = 1.702;              // ... its sigmoid's slope (a constant in Transformers)

    bool enabled() const { return experts > 0; }
    bool sparse(int64_t layer) const
    {
        return enabled() && (layer + 1) % std::max<int64_t>(sparseStep, 1) == 0 &&
               std::find(denseLayers.begin(), denseLayers.end(), layer) == denseLayers.end();
    }
};

// DeepSeek-V3's multi-head latent attention (MLA) in place of q/k/v projections: queries through a
// low-rank latent (q_a_proj, q_a_layernorm, q_b_proj; q_proj when qLoraRank is 0), keys and values
// from one shared latent (kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj) plus a rotary key part
// shared by every head. A head's query and key have qkNopeHeadDim + qkRopeHeadDim dimensions, its
// value vHeadDim. kvLoraRank == 0: the model has ordinary attention.
struct LatentAttention {
    int64_t qLoraRank = 0;
    int64_t kvLoraRank = 0;
    int64_t qkNopeHeadDim = 0;
    int64_t qkRopeHeadDim = 0;
    int64_t vHeadDim = 0;
    bool ropeInterleave = false;             // rope_interleave: the rotary part's pairs are (2i, 2i+1)

    bool enabled() const { return kvLoraRank > 0; }
    int64_t qkHeadDim() const { return qkNopeHeadDim + qkRopeHeadDim; }
};

// How a Gated DeltaNet layer stores its input projections: Qwen3-Next's in_proj_qkvz and in_proj_ba,
// grouped per key head; or Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b and in_proj_a.
enum class LinearAttentionLayout { QkvzBa, QkvZBA };

// Qwen3-Next / Qwen3.5's hybrid: Gated DeltaNet linear attention (model/GatedDeltaNet.h, checkpoint
// module linear_attn) in place of self-attention on every layer but the full-attention ones
// (full_attention_interval: every 4th; or the full_attention entries of layer_types). A linear layer
// keeps a recurrent state per value head instead of the keys and values of the sequence. keyHeads
// == 0: the model has no linear attention.
struct LinearAttention {
    LayerSelection fullLayers;
    int64_t keyHeads = 0;          // linear_num_key_heads
    int64_t valueHeads = 0;        // linear_num_value_heads (a multiple of keyHeads)
    int64_t keyHeadDim = 0;        // linear_key_head_dim
    int64_t valueHeadDim = 0;      // linear_value_head_dim
    int64_t convKernel = 4;        // linear_conv_kernel_dim: the causal depthwise conv's width
    LinearAttentionLayout layout = LinearAttentionLayout::QkvzBa;

    bool enabled() const { return keyHeads > 0; }
    bool linear(int64_t layer) const { return enabled() && !fullLayers.contains(layer); }
    int64_t keyDim() const { return keyHeads * keyHeadDim; }
    int64_t valueDim() const { return valueHeads * valueHeadDim; }
    int64_t convChannels() const { return 2 * keyDim() + valueDim(); }
};

struct ModelShape {
    std::string preset;              // preset name it came from, or "" / "custom" / "hf-import"
    std::string family = "llama";    // llama, mistral, qwen2, ...
    std::string revision;            // model revision (commit hash, tag) as the user knows it
    int64_t layers = 0;
    int64_t hiddenSize = 0;
    int64_t attentionHeads = 0;
    int64_t kvHeads = 0;
    int64_t headDim = 0;             // 0: hiddenSize / attentionHeads
    int64_t intermediateSize = 0;
    int64_t vocabSize = 0;
    int64_t maxPositions = 0;
    bool tieEmbeddings = false;
    bool attentionBias = false;      // q/k/v biases (Qwen2)
    NormKind norm = NormKind::RmsNorm;
    ActivationKind activation = ActivationKind::SwiGlu;
    double ropeTheta = 10000.0;
    RopeScaling ropeScaling;
    double normEps = 1e-5;
    QkNorm qkNorm = QkNorm::None;
    ModelTraits traits;
    MoeConfig moe;
    LatentAttention latent;          // enabled: head_dim is the rotary part's (qk_rope_head_dim), as Transformers sets it
    LinearAttention linear;          // enabled: the layers it does not keep full run Gated DeltaNet
    std::string weightsPath;         // local folder of *.safetensors; empty: random initialisation
    // How the source checkpoint stores some weights that train here in 16 bits (gpt-oss's "mxfp4"
    // experts); empty: as they train. Told, not modelled: memory counts the trained dtype.
    std::string checkpointQuantization;

    int64_t effectiveHeadDim() const { return headDim > 0 ? headDim : (attentionHeads > 0 ? hiddenSize / attentionHeads : 0); }
    // A head's mean width over the scores' product (q.k) and the weighted sum (p.v), for FLOPs:
    // head_dim, or latent attention's (qk_head_dim + v_head_dim) / 2.
    double attentionFlopsHeadDim() const
    {
        return latent.enabled() ? 0.5 * static_cast<double>(latent.qkHeadDim() + latent.vHeadDim) : static_cast<double>(effectiveHeadDim());
    }
    // Whether a layer attends through the sliding window: the shape's, not the traits', since
    // whether the last layer is global (model.last_layer_global) depends on the depth.
    bool usesSliding(int64_t layer) const
    {
        return traits.slidingWindow > 0 && !traits.globalLayers.contains(layer) && !(traits.lastLayerGlobal && layer == layers - 1);
    }
    bool valuesFromKeys(int64_t layer) const { return traits.globalValuesFromKeys && !usesSliding(layer); }
    int64_t slidingLayers() const
    {
        int64_t n = 0;
        for (int64_t i = 0; i < layers; ++i)
            n += usesSliding(i) ? 1 : 0;
        return n;
    }
    // The layers with softmax attention over the sequence (all but the linear-attention ones).
    int64_t fullAttentionLayers() const
    {
        int64_t n = 0;
        for (int64_t i = 0; i < layers; ++i)
            n += linear.linear(i) ? 0 : 1;
        return n;
    }
    // The rotated dimensions of a head: int(head_dim * partial_rotary_factor), as Transformers rounds.
    int64_t rotaryDim() const { return static_cast<int64_t>(static_cast<double>(effectiveHeadDim()) * traits.partialRotary); }
    // A layer's head width, key/value heads and rotary tables' width: Gemma 4's global layers have
    // their own (model.global_head_dim, model.global_kv_heads), and its proportional rotary spans
    // whole heads. Every other model: head_dim, kv_heads, rotaryDim() on every layer.
    int64_t headDimAt(int64_t layer) const { return traits.globalHeadDim > 0 && !usesSliding(layer) ? traits.globalHeadDim : effectiveHeadDim(); }
    int64_t kvHeadsAt(int64_t layer) const { return traits.globalKvHeads > 0 && !usesSliding(layer) ? traits.globalKvHeads : kvHeads; }
    int64_t rotaryDimAt(int64_t layer) const { return traits.ropeProportional ? headDimAt(layer) : rotaryDim(); }
    // Whether some layer's attention differs in shape from the model-wide head_dim and kv_heads.
    bool layerShapesVary() const { return traits.globalHeadDim > 0 || traits.globalKvHeads > 0 || traits.globalValuesFromKeys; }
    // Gemma 4's shared keys and values (model.kv_shared_layers): whether a layer reads another's, and
    // which one (the last layer of its kind before the shared ones; -1: none, or not shared).
    int64_t firstKvSharedLayer() const { return traits.kvSharedLayers > 0 ? layers - traits.kvSharedLayers : layers; }
    bool kvShared(int64_t layer) const { return traits.kvSharedLayers > 0 && firstKvSharedLayer() > 0 && layer >= firstKvSharedLayer(); }
    int64_t kvSourceLayer(int64_t layer) const
    {
        if (!kvShared(layer))
            return -1;
        for (int64_t i = firstKvSharedLayer() - 1; i >= 0; --i)
            if (usesSliding(i) == usesSliding(layer))
                return i;
        return -1;
    }
    // Whether a later shared layer reads this layer's keys and values: it is the last of its kind
    // before the shared ones, and a shared layer is of its kind.
    bool kvSource(int64_t layer) const
    {
        if (layer < 0 || !kvShared(layers - 1) || layer >= firstKvSharedLayer())
            return false;
        for (int64_t i = layer + 1; i < firstKvSharedLayer(); ++i)
            if (usesSliding(i) == usesSliding(layer))
                return false;
        for (int64_t i = firstKvSharedLayer(); i < layers; ++i)
            if (usesSliding(i) == usesSliding(layer))
                return true;
        return false;
    }
    // A dense layer's MLP width: twice intermediate_size on Gemma 4's shared layers under model.double_wide_mlp.
    int64_t intermediateAt(int64_t layer) const { return traits.doubleWideMlp && kvShared(layer) ? 2 * intermediateSize : intermediateSize; }
    int64_t perLayerVocabSize() const { return traits.perLayerVocab > 0 ? traits.perLayerVocab : vocabSize; }
};

struct LoraConfig {
    int64_t rank = 16;
    double alpha = 32.0;
    double dropout = 0.0;
    std::vector<std::string> targets {"q_proj", "k_proj", "v_proj", "o_proj"};
};

struct OptimizerConfig {
    OptimizerKind kind = OptimizerKind::AdamW;
    double lr = 1e-4;
    double weightDecay = 0.0;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double momentum = 0.9;           // SGD, RMSprop
};

struct ScheduleConfig {
    ScheduleKind kind = ScheduleKind::Cosine;
    int64_t warmupSteps = 0;
    int64_t totalSteps = 1000;
    double minLrRatio = 0.1;
};

struct TrainConfig {
    TrainMode mode = TrainMode::Full;
    LoraConfig lora;
    std::vector<std::string> trainable;  // TrainMode::Freeze: parameter-name substrings left trainable
    OptimizerConfig optimizer;
    ScheduleConfig schedule;
    Precision precision = Precision::Bf16Mixed;
    int64_t seqLen = 2048;
    int64_t microBatch = 1;
    int64_t gradAccum = 1;
    bool recompute = false;
    AttentionImpl attention = AttentionImpl::Auto;
    double gradClip = 1.0;               // 0: off
    double lossScale = 65536.0;          // fp16-mixed initial loss scale
    KernelPath kernels = KernelPath::Eager;
    // The step captured once as a CUDA graph and replayed while batches keep its shape (a batch of
    // another shape ends it: the rest of the run steps eagerly). AdamW on a CUDA device only.
    bool cudaGraph = false;
};

struct ValidationConfig {
    int64_t everySteps = 0;              // 0: no validation
    int64_t batches = 0;
};

struct CheckpointConfig {
    int64_t everySteps = 0;              // 0: no periodic checkpoint
    std::string dir;                     // empty: no checkpoints unless the command names a folder
};

struct DataConfig {
    DataKind kind = DataKind::Synthetic;
    std::string path;                    // token file or JSONL
    std::string tokenDtype = "uint16";   // TokenFile: uint16, uint32 or npy
    LengthDistribution lengths = LengthDistribution::Fixed;
    int64_t minLength = 0;               // Uniform: lower bound (upper is train.seqLen)
    std::string lengthsFile;             // FromFile: one length per line
    bool longestFirst = true;            // the longest batch sets the peak
    bool learnable = true;               // synthetic: a predictable sequence, so the loss must fall
    int64_t syntheticSamples = 4096;     // synthetic: number of samples in the data set
    int64_t validationFraction = 0;      // per-mille of samples held out for validation
};

struct JobConfig {
    JobUnit unit = JobUnit::Tokens;
    double amount = 1e9;                 // tokens, or epochs over datasetTokens
    double datasetTokens = 0;            // Epochs: tokens in one epoch
    std::optional<double> deadlineHours; // cheapest configuration that also meets this
};

struct RunConfig {
    static constexpr int kSchemaVersion = 1;
    int schemaVersion = kSchemaVersion;
    std::string name;
    ModelShape model;
    TrainConfig train;
    ValidationConfig validation;
    CheckpointConfig checkpoint;
    DataConfig data;
    JobConfig job;
    uint64_t seed = 1234;
    bool deterministic = false;
};

// Parameter counts computed from the shape, exactly as the engine's model builds it.
struct ParamCounts {
    int64_t total = 0;
    int64_t trainable = 0;
    int64_t embedding = 0;
    int64_t perLayer = 0;
    int64_t head = 0;                    // 0 when tied
    int64_t lora = 0;                    // adapter parameters (included in total and trainable)
    int64_t active = 0;                  // what one token passes through: all but the routed experts, plus experts_per_token of them
};

ParamCounts countParameters(const RunConfig &config);

// Names used in files and on the command line; `parse*` return nullopt for unknown names.
const char *toString(TrainMode v);
const char *toString(OptimizerKind v);
const char *toString(Precision v);
const char *toString(AttentionImpl v);
const char *toString(NormKind v);
const char *toString(ActivationKind v);
const char *toString(ScheduleKind v);
const char *toString(DataKind v);
const char *toString(LengthDistribution v);
const char *toString(JobUnit v);
const char *toString(RopeScalingType v);
const char *toString(QkNorm v);
const char *toString(NormPlacement v);
const char *toString(KernelPath v);
const char *toString(RouterScoring v);
const char *toString(LinearAttentionLayout v);
template <typename E> std::optional<E> parseEnum(const std::string &name);

// Whether attention runs a fused scaled_dot_product_attention kernel, given whether the build has
// one. Deterministic runs on CUDA take the math path under `auto`: the fused kernels' backward
// passes (cuDNN, memory-efficient) are not deterministic, and the restore proof needs bitwise
// repeatable steps. Shared by the engine and the estimator, whose memory depends on it.
inline bool usesFusedAttention(const RunConfig &config, bool fusedAvailable, bool cudaDevice)
{
    if (!fusedAvailable || config.train.attention == AttentionImpl::Math)
        return false;
    return !(config.deterministic && cudaDevice && config.train.attention == AttentionImpl::Auto);
}

// Whether attention scales its scores by 1/sqrt(head_dim): no attention_scale, or one equal to it.
// `headDim`: the layer's (ModelShape::headDimAt); 0: the model-wide head_dim.
inline bool usesDefaultAttentionScale(const ModelShape &model, int64_t headDim = 0)
{
    const double standard = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(headDim > 0 ? headDim : model.effectiveHeadDim(), 1)));
    return model.traits.attentionScale <= 0 || std::abs(model.traits.attentionScale - standard) <= 1e-12 * standard;
}

// Whether a layer's attention runs in Transformers' eager form (scores, fp32 softmax, probabilities)
// rather than a fused kernel: soft-capped scores (Gemma 2), or a window (`slidingLayer`) or another
// scale where no fused kernel runs. Shared by the engine and the estimator, whose memory depends on it.
inline bool usesEagerAttentionForm(double attentionSoftcap, bool fusedAttention, bool slidingLayer, bool rescaled)
{
    return attentionSoftcap > 0 || (!fusedAttention && (slidingLayer || rescaled));
}

// Layer-level names of the projections, as in Hugging Face checkpoints (Phi-3's fused qkv_proj and
// gate_up_proj, DeepSeek-V3's latent attention among them).
inline const std::vector<std::string> &projectionNames()
{
    static const std::vector<std::string> names {"q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj", "gate_proj", "up_proj", "gate_up_proj", "down_proj",
                                                 "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "per_layer_input_gate", "per_layer_projection"};
    return names;
}

} // namespace pb
