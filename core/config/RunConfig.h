#pragma once
// The run definition: the single description of a fine-tuning run that the estimator, the engine,
// the history and the report all read. Plain data; loading, saving and validation live beside it
// (RunConfigJson.h, RunConfigValidation.h).
#include <cstdint>
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace pb {

enum class TrainMode { Full, Lora, Freeze };
enum class OptimizerKind { AdamW, Adam, Sgd, Adagrad, RmsProp, AdamW8bit, Adafactor };
enum class Precision { Fp32, Bf16Mixed, Bf16, Fp16Mixed };
enum class AttentionImpl { Auto, Math, Flash, MemEfficient };
enum class NormKind { RmsNorm, LayerNorm };
enum class ActivationKind { SwiGlu, GeGlu, Gelu };
enum class ScheduleKind { Constant, Cosine, Linear };
enum class DataKind { Synthetic, TokenFile, Jsonl };
enum class LengthDistribution { Fixed, Uniform, FromFile };
enum class JobUnit { Tokens, Epochs };
enum class RopeScalingType { None, Llama3, Linear };
// RMSNorm of queries and keys before RoPE: per head (Qwen3) or over the whole projection (OLMoE).
enum class QkNorm { None, Head, Full };
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
    int64_t originalMaxPositions = 0;  // llama3: the pre-training context length
};

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

    bool enabled() const { return experts > 0; }
    bool sparse(int64_t layer) const
    {
        return enabled() && (layer + 1) % std::max<int64_t>(sparseStep, 1) == 0 &&
               std::find(denseLayers.begin(), denseLayers.end(), layer) == denseLayers.end();
    }
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
    MoeConfig moe;
    std::string weightsPath;         // local folder of *.safetensors; empty: random initialisation

    int64_t effectiveHeadDim() const { return headDim > 0 ? headDim : (attentionHeads > 0 ? hiddenSize / attentionHeads : 0); }
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
const char *toString(KernelPath v);
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

// Layer-level names of the projections, as in Hugging Face checkpoints.
inline const std::vector<std::string> &projectionNames()
{
    static const std::vector<std::string> names {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    return names;
}

} // namespace pb
