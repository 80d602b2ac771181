#pragma once
// Internal to the engine (includes torch): a decoder-only transformer with the shapes and the
// memory behaviour of Hugging Face's Llama/Mistral/Qwen2 implementations: RMSNorm computed in fp32,
// rotary positions, grouped-query attention, SwiGLU, fp32 cross-entropy. Module and parameter
// names follow the Hugging Face checkpoints (model.layers.N.self_attn.q_proj.weight, ...), so
// safetensors and checkpoints load by name.
#include "config/RunConfig.h"
#include "model/Fp8Linear.h"
#include "model/GatedDeltaNet.h"
#include "model/MixedLinear.h"
#include "model/Nf4.h"
#include "model/StackedExperts.h"
#include "model/TiedEmbedding.h"

#include <torch/torch.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace pb {

// Called around the decoder blocks by a strategy that keeps a block's parameters only while the
// block runs (FSDP). `index` counts blocks from 0; outputs may get gradient hooks.
class BlockHooks {
public:
    virtual ~BlockHooks() = default;
    virtual void beforeModel() = 0;
    virtual void beforeBlock(size_t index, const torch::Tensor &input) = 0;
    virtual void afterBlock(size_t index, const torch::Tensor &output) = 0;
};

struct ModelRuntime {
    bool fusedAttention = true;     // scaled_dot_product_attention where the build has it
    bool recompute = false;
    // train.kernels = fused: the residual add folded into the norm after it (fusedAddRmsNorm). Off
    // only in bench_probe_overhead --residual-ab, which times the step both ways in one run.
    bool foldResidualAdd = true;
    // train.kernels = fused under autocast: the projections as model/MixedLinear.h's nodes. Off only
    // in bench_probe_overhead --mixed-linear-ab, which times the step both ways in one run.
    bool mixedLinear = true;
    // And LoRA adapters (their dropout too) inside those nodes. Off only in bench_probe_overhead
    // --lora-node-ab, which times the step both ways in one run.
    bool adaptersInNode = true;
    // train.kernels = fused: sliding layers on flash's own window where it runs (model/WindowedAttention.h).
    // Off only in bench_probe_overhead --window-ab.
    bool windowKernel = true;
    // Tokens a chunk of the fused loss (0: as many as keep a chunk's logits within the estimator's
    // budget, linearCrossEntropyChunkTokens). Set only by bench_probe_overhead --loss-chunk-ab.
    int64_t lossChunkTokens = 0;
};

// The rotary inverse frequencies (rotaryDim / 2 of them, float32 on `device`) with the model's rope
// scaling applied, computed with the operations of Transformers' ROPE_INIT_FUNCTIONS
// (modeling_rope_utils.py), so the tables match its own. `seqLen` picks longrope's short or long
// factors; `attentionFactor` receives the factor yarn and longrope scale cos and sin by (else 1).
torch::Tensor rotaryInverseFrequencies(int64_t rotaryDim, double theta, const RopeScaling &scaling, const torch::Device &device, int64_t seqLen = 0,
                                       double *attentionFactor = nullptr);

// The inputs a decoder block reads besides the residual stream: the rotary tables of its kind of
// layer (undefined for a layer without rotary) and, for a sliding layer or a chunked one (Llama 4,
// when the sequence spans more than one chunk), the boolean mask [T, T] (true: the key is seen),
// one per forward pass shared by every such layer.
// Gemma 4 adds the layer's per-layer input [B, T, P] (model.per_layer_input) and, on a shared layer
// (model.kv_shared_layers), the keys and values [B, kv heads, T, D] of the layer it reads.
struct LayerInputs {
    torch::Tensor cos, sin, windowMask;
    torch::Tensor perLayer, sharedKeys, sharedValues;
};

// A module that only holds `weight` (embed_tokens, lm_head, lora_A, lora_B).
// A parameter's shape, its memory given later in its own dtype by DecoderModel (Transformer.cpp).
torch::Tensor emptyParam(std::vector<int64_t> shape, const torch::TensorOptions &options);

class WeightHolderImpl : public torch::nn::Module {
public:
    explicit WeightHolderImpl(torch::Tensor w) { weight = register_parameter("weight", std::move(w)); }
    torch::Tensor weight;
};
TORCH_MODULE(WeightHolder);

// A projection in -> out with the adapter train.lora gives its `role` (q_proj ... down_proj; an
// expert's w1 is a gate_proj). Under train.mode = qlora its frozen base is not the parameter
// `weight` but NF4 buffers (weight_nf4, weight_absmax, ...; config/Nf4Format.h), set by setBase.
class LoraLinearImpl : public torch::nn::Module {
public:
    LoraLinearImpl(int64_t in, int64_t out, bool bias, const RunConfig &config, const std::string &role, const torch::TensorOptions &options);
    torch::Tensor forward(const torch::Tensor &x);
    // forward(x) of each projection (q, k, v; gate, up), in their order: under fp8 the input is cast
    // to float8 once for all of them (model/Fp8Linear.h's fp8LinearShared); on the fused path under
    // autocast they are one node whose GEMMs sum the input's gradient (model/MixedLinear.h).
    static std::vector<torch::Tensor> forwardShared(const std::vector<LoraLinearImpl *> &projections, const torch::Tensor &x);
    bool nf4Base() const { return m_nf4; }
    bool float8() const { return m_fp8; }
    // Whether forwardShared would read x once for this projection and others like it: a float8 base
    // (one cast) or the fused path's node under autocast (one node, one input gradient).
    bool readsShared(const torch::Tensor &x) const { return m_fp8 || mixedBase(x); }
    // A bias-free weight read by a plain matmul: no adapter, no NF4 base, no float8 matmul.
    bool plainMatmul() const { return weight.defined() && !bias.defined() && !loraA && !m_nf4 && !m_fp8; }
    void setMixedLinear(bool on, bool adapters) { m_mixed = on; m_adaptersInNode = adapters; } // ModelRuntime::mixedLinear, ::adaptersInNode
    // Off for a routed expert's projections: Transformers 5 keeps routed experts as 3-D parameters,
    // which PEFT adapts through target_parameters, with no input cast.
    void setPeftInputCast(bool on) { m_peftCast = on; }
    // Quantises `w` ([out, in], any floating dtype and device) into the NF4 base.
    void setBase(const torch::Tensor &w);
    torch::Tensor weight, bias;   // weight: undefined under qlora
    WeightHolder loraA {nullptr}, loraB {nullptr};
    Nf4Storage base;              // qlora only

private:
    // The fused path's base under autocast (model/MixedLinear.h): a dense weight, x in autocast's dtype.
    bool mixedBase(const torch::Tensor &x) const;
    // y (the base's output) plus the adapter's product of x, where there is an adapter.
    torch::Tensor withAdapter(const torch::Tensor &x, torch::Tensor y);
    // The adapter for mixedLinearShared to carry (undefined: none, or one withAdapter adds).
    MixedAdapter nodeAdapter() const;
    double m_scaling = 0;
    double m_dropout = 0;
    bool m_nf4 = false;
    bool m_fp8 = false;   // train.precision = fp8-*: the base matmul in float8 (model/Fp8Linear.h)
    Fp8Scaling m_fp8Scaling = Fp8Scaling::Rowwise;
    at::ScalarType m_computeType = at::kBFloat16;
    bool m_addInGemm = false;   // train.kernels = fused: the adapter's product added by its GEMM
    bool m_mixed = true;        // with m_addInGemm, mixedBase may hold
    bool m_adaptersInNode = true; // and the adapter (with its dropout) goes inside the node
    bool m_peftCast = true;     // the eager path: the adapter's input cast to its dtype first (withAdapter)
};
TORCH_MODULE(LoraLinear);

class RmsNormImpl : public torch::nn::Module {
public:
    // `fused`: model/FusedOps.h's fusedRmsNorm (train.kernels = fused: block, final and q/k norms);
    // `traits` give Gemma's (1 + weight) and the fp32 scaling of Gemma and OLMo 2, on either path.
    RmsNormImpl(int64_t dim, double eps, const torch::TensorOptions &options, bool fused = false, const ModelTraits &traits = {});
    torch::Tensor forward(const torch::Tensor &x);
    // The residual add before this norm and the norm: {h, norm(h)} for h = x + branch * scale; the
    // fused path folds the add into the norm (model/FusedOps.h's fusedAddRmsNorm).
    std::pair<torch::Tensor, torch::Tensor> addForward(const torch::Tensor &x, const torch::Tensor &branch, double scale);
    torch::Tensor weight;

private:
    double m_eps;
    bool m_fused;
    bool m_unitOffset, m_scaleInFp32;
};
TORCH_MODULE(RmsNorm);

class SelfAttentionImpl : public torch::nn::Module {
public:
    // `layer`: its index, which gives its head width, key/value heads and values (ModelShape's
    // headDimAt, kvHeadsAt, ModelTraits::valuesFromKeys).
    SelfAttentionImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options, int64_t layer = -1);
    torch::Tensor forward(const torch::Tensor &x, const LayerInputs &in);
    LoraLinear q {nullptr}, k {nullptr}, v {nullptr}, o {nullptr};
    LoraLinear qkv {nullptr};                 // Phi-3's fused projection, in place of q, k, v
    RmsNorm qNorm {nullptr}, kNorm {nullptr}; // model.qk_norm: per head (Qwen3) or over the projection (OLMoE)
    torch::Tensor sinks;                      // model.attention_sinks: gpt-oss's logit per head (model/SinkAttention.h)
    // A layer whose keys and values later shared layers read (model.kv_shared_layers): its last
    // forward's, after the norm and the rotary; the caller takes them (and so releases them here).
    torch::Tensor keptKeys, keptValues;
    // The kept keys and values, released here (undefined where this layer keeps none).
    std::pair<torch::Tensor, torch::Tensor> takeKeptKv() { return {std::exchange(keptKeys, torch::Tensor()), std::exchange(keptValues, torch::Tensor())}; }

private:
    torch::Tensor rotate(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin) const;
    int64_t m_heads, m_kvHeads, m_headDim;
    QkNorm m_qkNorm;
    bool m_fused;
    bool m_fusedRotary;   // train.kernels = fused
    bool m_interleaved;
    double m_scale, m_softcap;
    bool m_rescaled;              // a scale other than 1/sqrt(head_dim)
    double m_temperatureBeta;
    int64_t m_temperatureLength;
    int64_t m_temperatureOffset;
    bool m_temperatureNoRope, m_temperatureFp32;
    bool m_ropeFp32;
    bool m_eagerRotary;           // train.kernels = eager: the tables in the hidden stream's dtype, as Transformers casts them
    double m_normEps;             // Llama 4's L2 q/k norm
    bool m_outputGate;            // model.attention_output_gate: q_proj's second half per head gates the output
    bool m_valueNorm;             // model.value_norm: Gemma 4's weightless RMSNorm of each value head
    bool m_sharedKv = false;      // reads another layer's keys and values (LayerInputs::sharedKeys)
    bool m_keepsKv = false;       // keeps its own for later layers (keptKeys)
    int64_t m_window = 0;         // a sliding layer's window (model.sliding_window), 0 elsewhere
    bool m_windowKernel = false;  // train.kernels = fused: a sliding layer on flash's own window where it runs (model/WindowedAttention.h)
    bool m_cappedKernel = false;  // train.kernels = fused: soft-capped scores on the capped softmax's kernel where it runs (model/FusedOps.h)
};
TORCH_MODULE(SelfAttention);

// An attention other than SelfAttention behind the block's one call: DeepSeek-V3's latent attention
// (model/LatentAttention.h), built by makeLatentAttention.
class BlockAttention : public torch::nn::Module {
public:
    virtual torch::Tensor forward(const torch::Tensor &x, const LayerInputs &in) = 0;
};
std::shared_ptr<BlockAttention> makeLatentAttention(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options);

class MlpImpl : public torch::nn::Module {
public:
    // The dense MLP of `config` (intermediate_size, gate_proj/up_proj/down_proj), or one of
    // `intermediate` width whose projections are named `names` (an expert; LoRA targets still say
    // gate_proj, up_proj, down_proj). `fusedGate`: model/FusedOps.h's fused gated activation
    // (SwiGLU or GeGLU; the dense MLP under train.kernels = fused with separate gate and up
    // projections; experts stay eager).
    // `layer`: the dense MLP of that layer (Gemma 4's double-wide shared layers); -1: the model's width.
    MlpImpl(const RunConfig &config, const torch::TensorOptions &options, int64_t intermediate = 0,
            const std::array<std::string, 3> &names = {"gate_proj", "up_proj", "down_proj"}, bool fusedGate = false, int64_t layer = -1);
    torch::Tensor forward(const torch::Tensor &x);
    LoraLinear gate {nullptr}, up {nullptr}, down {nullptr};
    LoraLinear gateUp {nullptr};   // Phi-3's and GLM-4's gate_up_proj (gate's half first), in place of gate and up
    ActivationKind activation() const { return m_activation; }

private:
    bool m_fusedGate;
    bool m_packedGate;  // the fused gated activation on a fused gate_up_proj's output (fusedGatedActivationPacked)
    ActivationKind m_activation;
};
TORCH_MODULE(Mlp);

// A sparse mixture-of-experts MLP, as Transformers' Mixtral/Qwen2-MoE/Qwen3-MoE/OLMoE blocks: the
// router's softmax in fp32, top-k, optionally renormalised; tokens permuted so each expert runs
// once on its contiguous slice; outputs weighted and added back; a shared expert (with its sigmoid
// gate) on every token where the model has one. Each forward leaves the load-balancing statistics
// of its tokens for the model's auxiliary loss.
class SparseMoeImpl : public torch::nn::Module {
public:
    SparseMoeImpl(const RunConfig &config, const torch::TensorOptions &options);
    torch::Tensor forward(const torch::Tensor &x);
    WeightHolder router {nullptr};                   // "gate": experts x hidden
    torch::Tensor scoreCorrectionBias;               // "gate.e_score_correction_bias" (model.moe.score_correction_bias)
    torch::Tensor routerBias;                        // "<router>.bias" (model.moe.router_bias, gpt-oss)
    torch::nn::ModuleList experts {nullptr};
    std::vector<Mlp> expertList;
    StackedExperts stacked {nullptr};                // "experts" in place of the list (model.moe.stacked_experts)
    Mlp shared {nullptr};
    WeightHolder sharedGate {nullptr};
    // Of the last forward: the routing probabilities summed over its tokens (experts; differentiable),
    // how often each expert was chosen at each of the top-k places (top_k x experts), and the tokens.
    torch::Tensor routerProbabilitySum, expertChoices;
    int64_t tokens = 0;
    // model.moe.scoring = sigmoid (DeepSeek-V3): the router's scores [N, experts], and the experts
    // they choose [N, k] (the bias and the groups applied; no gradient).
    torch::Tensor sigmoidScores(const torch::Tensor &flat) const;
    torch::Tensor sigmoidChoice(const torch::Tensor &scores) const;

private:
    MoeConfig m_moe;
};
TORCH_MODULE(SparseMoe);

class DecoderBlockImpl : public torch::nn::Module {
public:
    // `layer`: its index, which decides whether it is sparse (model.moe).
    DecoderBlockImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options, int64_t layer);
    torch::Tensor forward(const torch::Tensor &x, const LayerInputs &in);
    // The block without its output's residual add, and with its input's given as x + pending (times
    // the residual scale) where `pending` is defined (the previous block's MLP branch): that add is
    // folded into this block's first norm. Returns {h, f}: the stream after attention and the MLP's
    // branch, whose add the next block's first norm (or the final norm) folds in turn; x and
    // `pending` are taken by value and dropped once added (move them in). Only where
    // defersOutputAdd(): the fused path, a first norm, nothing after the output's add.
    std::pair<torch::Tensor, torch::Tensor> forwardDeferred(torch::Tensor x, torch::Tensor pending, const LayerInputs &in);
    bool defersOutputAdd() const;
    // model.norm_placement's norms; null where the placement has none (config/ParameterTable.h's blockNormNames).
    RmsNorm beforeAttention {nullptr}, afterAttention {nullptr}, beforeMlp {nullptr}, afterMlp {nullptr};
    SelfAttention attention {nullptr};
    std::shared_ptr<BlockAttention> latentAttention;  // in place of attention where the model has latent attention
    GatedDeltaNet linearAttention {nullptr};          // in place of attention on a linear layer (model.linear_attention)
    Mlp mlp {nullptr};                 // a dense layer
    SparseMoe moe {nullptr};           // a sparse one
    torch::Tensor layerScalar;         // model.layer_scalar: the buffer the block's output is scaled by (Gemma 4)
    // model.per_layer_input (Gemma 4 E2B/E4B): gate, projection back to the stream and its norm.
    LoraLinear perLayerGate {nullptr}, perLayerProjection {nullptr};
    RmsNorm perLayerNorm {nullptr};

private:
    // forwardDeferred's and forward's bodies, outside the layer's record scope.
    std::pair<torch::Tensor, torch::Tensor> forwardParts(torch::Tensor x, torch::Tensor pending, const LayerInputs &in);
    torch::Tensor forwardWhole(const torch::Tensor &x, const LayerInputs &in);
    double m_residualScale;
    bool m_foldResidualAdd;
    bool m_perLayerErf = false;        // the per-layer gate's GELU exact (hidden_activation gelu), else tanh
    // "pb.layer.<index>": the record scope the block runs in, so the peak recorder can place each
    // live tensor in its layer (engine/PeakRecorder.cpp).
    std::string m_layerScope;
};
TORCH_MODULE(DecoderBlock);

class DecoderStackImpl : public torch::nn::Module {
public:
    DecoderStackImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::TensorOptions &options);
    WeightHolder embedTokens {nullptr};
    // model.per_layer_input: embed_tokens_per_layer, per_layer_model_projection, per_layer_projection_norm.
    WeightHolder embedPerLayer {nullptr};
    LoraLinear perLayerModelProjection {nullptr};
    RmsNorm perLayerProjectionNorm {nullptr};
    torch::nn::ModuleList layers {nullptr};
    RmsNorm norm {nullptr};
    std::vector<DecoderBlock> blocks;
};
TORCH_MODULE(DecoderStack);

class DecoderModelImpl : public torch::nn::Module {
public:
    // Parameters are created on `device` in the dtype the precision and training mode call for
    // (trainable: fp32 master weights except under pure bf16; frozen: the compute dtype).
    DecoderModelImpl(const RunConfig &config, const ModelRuntime &runtime, const torch::Device &device);
    // Mean cross-entropy (fp32) over targets != -100; a mixture of experts adds its load-balancing
    // loss times model.moe.aux_loss_weight, as Transformers does with output_router_logits.
    torch::Tensor loss(const torch::Tensor &inputs, const torch::Tensor &targets);
    // The eager head's logits [B, T, V] as the loss sees them (Granite's division and Gemma 2's
    // soft-cap applied), in the compute dtype.
    torch::Tensor logits(const torch::Tensor &inputs);
    std::vector<torch::Tensor> trainableParameters();
    // Not owned; null: none.
    void setBlockHooks(BlockHooks *hooks) { m_blockHooks = hooks; }
    // Normal(0, 0.02) for matrices, ones for norms, zeros for biases and LoRA B (as PEFT does).
    void initialise(uint64_t seed);

    DecoderStack stack {nullptr};
    WeightHolder lmHead {nullptr}; // null when tied to the embedding

private:
    // `tied`: where the fused loss shares the head's gradient with the embedding's lookup (loss()).
    torch::Tensor hidden(const torch::Tensor &inputs, const c10::intrusive_ptr<TiedHeadGradient> &tied = {});
    // model.per_layer_input: every layer's input [B, T, layers, P] from the tokens and their embedding `h`.
    torch::Tensor perLayerInputs(const torch::Tensor &inputs, const torch::Tensor &h);
    torch::Tensor headLogits(const torch::Tensor &h);
    // Whether every sliding layer runs flash's own window or the capped softmax's kernel on `device`
    // (then no window mask is made).
    bool slidingLayersNeedNoMask(const torch::Device &device) const;
    // The rotary tables [T, rotaryDim] (fp32, attention factor applied) of one base and scaling.
    // `rotaryDim`: the tables' width; `turnedPairs` >= 0: Gemma 4's proportional rotary, only the
    // first that many frequencies non-zero (the other dimensions pass with cos 1, sin 0).
    void rotaryTables(int64_t seqLen, const torch::Device &device, double theta, const RopeScaling &scaling, int64_t rotaryDim, int64_t turnedPairs,
                      torch::Tensor &cos, torch::Tensor &sin) const;
    ModelRuntime m_runtime;
    ModelShape m_shape;
    bool m_inputNeedsGrad = false;
    BlockHooks *m_blockHooks = nullptr;
    MoeConfig m_moe;
    KernelPath m_kernels = KernelPath::Eager;
    torch::Tensor m_auxLoss;          // of the last hidden(); undefined for a dense model
};
TORCH_MODULE(DecoderModel);

} // namespace pb
