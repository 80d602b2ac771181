#include "config/RunConfigJson.h"

#include "config/JsonReader.h"
#include "config/ModelTraitsJson.h"
#include "config/RunConfigParse.h"
#include "config/RunConfigValidation.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QCryptographicHash>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pb {
namespace {

QJsonValue str(const std::string &s) { return QString::fromStdString(s); }

QJsonArray strings(const std::vector<std::string> &list)
{
    QJsonArray a;
    for (const auto &s : list)
        a.append(str(s));
    return a;
}

// Integers go into JSON as doubles; up to 2^53 they are exact, and the reader refuses larger ones.
QJsonValue integer(int64_t v) { return static_cast<double>(v); }

void readModel(JsonReader r, ModelShape &m)
{
    r.read("preset", m.preset);
    r.read("family", m.family);
    r.read("revision", m.revision);
    r.read("layers", m.layers);
    r.read("hidden_size", m.hiddenSize);
    r.read("attention_heads", m.attentionHeads);
    r.read("kv_heads", m.kvHeads);
    r.read("head_dim", m.headDim);
    r.read("intermediate_size", m.intermediateSize);
    r.read("vocab_size", m.vocabSize);
    r.read("max_positions", m.maxPositions);
    r.read("tie_embeddings", m.tieEmbeddings);
    r.read("attention_bias", m.attentionBias);
    r.readEnum("norm", m.norm);
    r.readEnum("activation", m.activation);
    r.read("rope_theta", m.ropeTheta);
    if (auto s = r.object("rope_scaling")) {
        s->readEnum("type", m.ropeScaling.type);
        s->read("factor", m.ropeScaling.factor);
        s->read("low_freq_factor", m.ropeScaling.lowFreqFactor);
        s->read("high_freq_factor", m.ropeScaling.highFreqFactor);
        s->read("original_max_positions", m.ropeScaling.originalMaxPositions);
        s->read("beta_fast", m.ropeScaling.betaFast);
        s->read("beta_slow", m.ropeScaling.betaSlow);
        s->read("mscale", m.ropeScaling.mscale);
        s->read("mscale_all_dim", m.ropeScaling.mscaleAllDim);
        s->read("truncate", m.ropeScaling.truncate);
        s->read("attention_factor", m.ropeScaling.attentionFactor);
        s->read("short_factor", m.ropeScaling.shortFactor);
        s->read("long_factor", m.ropeScaling.longFactor);
        s->finish();
    }
    r.read("norm_eps", m.normEps);
    r.readEnum("qk_norm", m.qkNorm);
    readModelTraits(r, m.traits);
    if (auto e = r.object("moe")) {
        MoeConfig &moe = m.moe;
        e->read("experts", moe.experts);
        e->read("experts_per_token", moe.expertsPerToken);
        e->read("expert_intermediate_size", moe.expertIntermediateSize);
        e->read("shared_expert_intermediate_size", moe.sharedExpertIntermediateSize);
        e->read("shared_expert_gate", moe.sharedExpertGate);
        e->read("normalize_top_k", moe.normalizeTopK);
        e->read("sparse_step", moe.sparseStep);
        e->read("dense_layers", moe.denseLayers);
        e->read("aux_loss_weight", moe.auxLossWeight);
        e->read("router_jitter", moe.routerJitter);
        e->readEnum("scoring", moe.scoring);
        e->read("groups", moe.groups);
        e->read("groups_per_token", moe.groupsPerToken);
        e->read("score_correction_bias", moe.scoreCorrectionBias);
        e->read("routed_scale", moe.routedScale);
        e->read("scale_expert_input", moe.scaleExpertInput);
        e->read("router_bias", moe.routerBias);
        e->read("softmax_after_top_k", moe.softmaxAfterTopK);
        e->read("stacked_experts", moe.stackedExperts);
        e->read("interleaved_gate_up", moe.interleavedGateUp);
        e->read("expert_bias", moe.expertBias);
        e->read("swiglu_limit", moe.swigluLimit);
        e->read("swiglu_alpha", moe.swigluAlpha);
        e->finish();
        // An empty or zero-expert section would otherwise train the model dense without a word.
        if (moe.experts < 1)
            throw InvalidInputError(e->fieldPath("experts"), "a model.moe section needs at least 1 expert (leave model.moe out for a dense model)");
    }
    if (auto l = r.object("latent_attention")) {
        LatentAttention &latent = m.latent;
        l->read("q_lora_rank", latent.qLoraRank);
        l->read("kv_lora_rank", latent.kvLoraRank);
        l->read("qk_nope_head_dim", latent.qkNopeHeadDim);
        l->read("qk_rope_head_dim", latent.qkRopeHeadDim);
        l->read("v_head_dim", latent.vHeadDim);
        l->read("rope_interleave", latent.ropeInterleave);
        l->finish();
        // A section without a latent would otherwise run ordinary attention without a word.
        if (latent.kvLoraRank < 1)
            throw InvalidInputError(l->fieldPath("kv_lora_rank"), "a model.latent_attention section needs kv_lora_rank >= 1 (leave the section out for ordinary attention)");
    }
    if (auto l = r.object("linear_attention")) {
        LinearAttention &linear = m.linear;
        if (auto full = l->object("full_layers")) {
            full->read("every", linear.fullLayers.every);
            full->read("layers", linear.fullLayers.layers);
            full->finish();
        }
        l->read("key_heads", linear.keyHeads);
        l->read("value_heads", linear.valueHeads);
        l->read("key_head_dim", linear.keyHeadDim);
        l->read("value_head_dim", linear.valueHeadDim);
        l->read("conv_kernel", linear.convKernel);
        l->readEnum("layout", linear.layout);
        l->finish();
        // A section without key heads would otherwise run full attention on every layer without a word.
        if (linear.keyHeads < 1)
            throw InvalidInputError(l->fieldPath("key_heads"), "a model.linear_attention section needs key_heads >= 1 (leave the section out for full attention on every layer)");
    }
    r.read("weights_path", m.weightsPath);
    r.read("checkpoint_quantization", m.checkpointQuantization);
    r.finish();
}

// Written only when the model has them, so every dense config keeps the hash it had before
// mixtures of experts and query/key norms were part of the definition.
void writeSparseParts(const ModelShape &m, QJsonObject &model)
{
    if (m.qkNorm != QkNorm::None)
        model.insert(QStringLiteral("qk_norm"), QString::fromLatin1(toString(m.qkNorm)));
    if (!m.moe.enabled())
        return;
    QJsonArray dense;
    for (int64_t layer : m.moe.denseLayers)
        dense.append(integer(layer));
    model.insert(QStringLiteral("moe"), QJsonObject {{"experts", integer(m.moe.experts)}, {"experts_per_token", integer(m.moe.expertsPerToken)},
                                                     {"expert_intermediate_size", integer(m.moe.expertIntermediateSize)},
                                                     {"shared_expert_intermediate_size", integer(m.moe.sharedExpertIntermediateSize)},
                                                     {"shared_expert_gate", m.moe.sharedExpertGate}, {"normalize_top_k", m.moe.normalizeTopK},
                                                     {"sparse_step", integer(m.moe.sparseStep)}, {"dense_layers", dense},
                                                     {"aux_loss_weight", m.moe.auxLossWeight}, {"router_jitter", m.moe.routerJitter}});
    // DeepSeek-V3's routing, only where it differs from the softmax router (existing hashes stay).
    const MoeConfig d;
    QJsonObject moe = model.value(QStringLiteral("moe")).toObject();
    if (m.moe.scoring != d.scoring)
        moe.insert(QStringLiteral("scoring"), QString::fromLatin1(toString(m.moe.scoring)));
    if (m.moe.groups != d.groups || m.moe.groupsPerToken != d.groupsPerToken) {
        moe.insert(QStringLiteral("groups"), integer(m.moe.groups));
        moe.insert(QStringLiteral("groups_per_token"), integer(m.moe.groupsPerToken));
    }
    if (m.moe.scoreCorrectionBias)
        moe.insert(QStringLiteral("score_correction_bias"), true);
    if (m.moe.routedScale != d.routedScale)
        moe.insert(QStringLiteral("routed_scale"), m.moe.routedScale);
    if (m.moe.scaleExpertInput) // Llama 4
        moe.insert(QStringLiteral("scale_expert_input"), true);
    // gpt-oss's router and experts (the stacked experts also Llama 4's), likewise only when set.
    if (m.moe.routerBias)
        moe.insert(QStringLiteral("router_bias"), true);
    if (m.moe.softmaxAfterTopK)
        moe.insert(QStringLiteral("softmax_after_top_k"), true);
    if (m.moe.stackedExperts)
        moe.insert(QStringLiteral("stacked_experts"), true);
    if (m.moe.interleavedGateUp)
        moe.insert(QStringLiteral("interleaved_gate_up"), true);
    if (m.moe.expertBias)
        moe.insert(QStringLiteral("expert_bias"), true);
    if (m.moe.swigluLimit != d.swigluLimit)
        moe.insert(QStringLiteral("swiglu_limit"), m.moe.swigluLimit);
    if (m.moe.swigluAlpha != d.swigluAlpha)
        moe.insert(QStringLiteral("swiglu_alpha"), m.moe.swigluAlpha);
    model.insert(QStringLiteral("moe"), moe);
}

// DeepSeek-V3's latent attention, written only when the model has it.
void writeLatentAttention(const LatentAttention &l, QJsonObject &model)
{
    if (!l.enabled())
        return;
    model.insert(QStringLiteral("latent_attention"), QJsonObject {{"q_lora_rank", integer(l.qLoraRank)}, {"kv_lora_rank", integer(l.kvLoraRank)},
                                                                  {"qk_nope_head_dim", integer(l.qkNopeHeadDim)}, {"qk_rope_head_dim", integer(l.qkRopeHeadDim)},
                                                                  {"v_head_dim", integer(l.vHeadDim)}, {"rope_interleave", l.ropeInterleave}});
}

// Qwen3-Next / Qwen3.5's Gated DeltaNet layers, written only when the model has them.
void writeLinearAttention(const LinearAttention &l, QJsonObject &model)
{
    if (!l.enabled())
        return;
    QJsonObject full;
    if (l.fullLayers.every > 0)
        full.insert(QStringLiteral("every"), integer(l.fullLayers.every));
    if (!l.fullLayers.layers.empty()) {
        QJsonArray layers;
        for (int64_t layer : l.fullLayers.layers)
            layers.append(integer(layer));
        full.insert(QStringLiteral("layers"), layers);
    }
    model.insert(QStringLiteral("linear_attention"), QJsonObject {{"full_layers", full}, {"key_heads", integer(l.keyHeads)}, {"value_heads", integer(l.valueHeads)},
                                                                  {"key_head_dim", integer(l.keyHeadDim)}, {"value_head_dim", integer(l.valueHeadDim)},
                                                                  {"conv_kernel", integer(l.convKernel)}, {"layout", toString(l.layout)}});
}

// Written only when the model has one, so every config without it keeps the hash it had before
// rope scaling was part of the definition; only the fields its type uses.
void writeRopeScaling(const RopeScaling &s, QJsonObject &model)
{
    if (s.type == RopeScalingType::None)
        return;
    QJsonObject o {{"type", toString(s.type)}, {"factor", s.factor}};
    if (s.type == RopeScalingType::Llama3) {
        o.insert(QStringLiteral("low_freq_factor"), s.lowFreqFactor);
        o.insert(QStringLiteral("high_freq_factor"), s.highFreqFactor);
    }
    if (s.type == RopeScalingType::Llama3 || s.type == RopeScalingType::Yarn || s.type == RopeScalingType::LongRope)
        o.insert(QStringLiteral("original_max_positions"), integer(s.originalMaxPositions));
    if (s.type == RopeScalingType::Yarn) {
        o.insert(QStringLiteral("beta_fast"), s.betaFast);
        o.insert(QStringLiteral("beta_slow"), s.betaSlow);
        o.insert(QStringLiteral("mscale"), s.mscale);
        o.insert(QStringLiteral("mscale_all_dim"), s.mscaleAllDim);
        o.insert(QStringLiteral("truncate"), s.truncate);
    }
    if (s.type == RopeScalingType::Yarn || s.type == RopeScalingType::LongRope)
        o.insert(QStringLiteral("attention_factor"), s.attentionFactor);
    if (s.type == RopeScalingType::LongRope) {
        QJsonArray shortFactor, longFactor;
        for (double f : s.shortFactor)
            shortFactor.append(f);
        for (double f : s.longFactor)
            longFactor.append(f);
        o.insert(QStringLiteral("short_factor"), shortFactor);
        o.insert(QStringLiteral("long_factor"), longFactor);
    }
    model.insert(QStringLiteral("rope_scaling"), o);
}

void readTrain(JsonReader r, TrainConfig &t)
{
    r.readEnum("mode", t.mode);
    if (auto lora = r.object("lora")) {
        lora->read("rank", t.lora.rank);
        lora->read("alpha", t.lora.alpha);
        lora->read("dropout", t.lora.dropout);
        lora->read("targets", t.lora.targets);
        lora->finish();
    }
    r.read("trainable", t.trainable);
    r.readEnum("optimizer", t.optimizer.kind);
    r.read("lr", t.optimizer.lr);
    r.read("weight_decay", t.optimizer.weightDecay);
    r.read("beta1", t.optimizer.beta1);
    r.read("beta2", t.optimizer.beta2);
    r.read("eps", t.optimizer.eps);
    r.read("momentum", t.optimizer.momentum);
    if (auto s = r.object("schedule")) {
        s->readEnum("kind", t.schedule.kind);
        s->read("warmup_steps", t.schedule.warmupSteps);
        s->read("total_steps", t.schedule.totalSteps);
        s->read("min_lr_ratio", t.schedule.minLrRatio);
        s->finish();
    }
    r.readEnum("precision", t.precision);
    r.read("seq_len", t.seqLen);
    r.read("micro_batch", t.microBatch);
    r.read("grad_accum", t.gradAccum);
    r.read("recompute", t.recompute);
    r.readEnum("attention", t.attention);
    r.read("grad_clip", t.gradClip);
    r.read("loss_scale", t.lossScale);
    r.readEnum("kernels", t.kernels);
    r.read("cuda_graph", t.cudaGraph);
    r.finish();
}

void readData(JsonReader r, DataConfig &d)
{
    r.readEnum("kind", d.kind);
    r.read("path", d.path);
    r.read("token_dtype", d.tokenDtype);
    r.readEnum("lengths", d.lengths);
    r.read("min_length", d.minLength);
    r.read("lengths_file", d.lengthsFile);
    r.read("longest_first", d.longestFirst);
    r.read("learnable", d.learnable);
    r.read("synthetic_samples", d.syntheticSamples);
    r.read("validation_per_mille", d.validationFraction);
    r.finish();
}

// Compact JSON with keys sorted at every level and numbers in one spelling, so the hash depends
// on the content only.
void canonical(const QJsonValue &v, std::string &out)
{
    switch (v.type()) {
    case QJsonValue::Object: {
        const QJsonObject o = v.toObject();
        QStringList keys = o.keys();
        std::sort(keys.begin(), keys.end());
        out += '{';
        for (qsizetype i = 0; i < keys.size(); ++i) {
            if (i)
                out += ',';
            canonical(QJsonValue(keys[i]), out);
            out += ':';
            canonical(o.value(keys[i]), out);
        }
        out += '}';
        break;
    }
    case QJsonValue::Array: {
        const QJsonArray a = v.toArray();
        out += '[';
        for (qsizetype i = 0; i < a.size(); ++i) {
            if (i)
                out += ',';
            canonical(a[i], out);
        }
        out += ']';
        break;
    }
    case QJsonValue::String: {
        // QJsonDocument escapes strings correctly; reuse it through a one-element array.
        const QByteArray doc = QJsonDocument(QJsonArray {v}).toJson(QJsonDocument::Compact);
        out.append(doc.constData() + 1, static_cast<size_t>(doc.size() - 2));
        break;
    }
    case QJsonValue::Double: {
        const double d = v.toDouble();
        char buffer[40];
        if (std::floor(d) == d && std::fabs(d) <= 9007199254740992.0)
            std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(d));
        else
            std::snprintf(buffer, sizeof buffer, "%.17g", d);
        out += buffer;
        break;
    }
    case QJsonValue::Bool: out += v.toBool() ? "true" : "false"; break;
    case QJsonValue::Null:
    case QJsonValue::Undefined: out += "null"; break;
    }
}

} // namespace

QJsonObject toJson(const RunConfig &c)
{
    const ModelShape &m = c.model;
    QJsonObject model {
        {"preset", str(m.preset)}, {"family", str(m.family)}, {"revision", str(m.revision)},
        {"layers", integer(m.layers)}, {"hidden_size", integer(m.hiddenSize)},
        {"attention_heads", integer(m.attentionHeads)}, {"kv_heads", integer(m.kvHeads)},
        {"head_dim", integer(m.headDim)}, {"intermediate_size", integer(m.intermediateSize)},
        {"vocab_size", integer(m.vocabSize)}, {"max_positions", integer(m.maxPositions)},
        {"tie_embeddings", m.tieEmbeddings}, {"attention_bias", m.attentionBias},
        {"norm", toString(m.norm)}, {"activation", toString(m.activation)},
        {"rope_theta", m.ropeTheta}, {"norm_eps", m.normEps}, {"weights_path", str(m.weightsPath)},
    };
    writeRopeScaling(m.ropeScaling, model);
    writeModelTraits(m.traits, model);
    writeSparseParts(m, model);
    writeLatentAttention(m.latent, model);
    writeLinearAttention(m.linear, model);
    if (!m.checkpointQuantization.empty()) // written only when set: other configs keep their hashes
        model.insert(QStringLiteral("checkpoint_quantization"), str(m.checkpointQuantization));
    const TrainConfig &t = c.train;
    QJsonObject lora {{"rank", integer(t.lora.rank)}, {"alpha", t.lora.alpha}, {"dropout", t.lora.dropout}, {"targets", strings(t.lora.targets)}};
    QJsonObject schedule {
        {"kind", toString(t.schedule.kind)}, {"warmup_steps", integer(t.schedule.warmupSteps)},
        {"total_steps", integer(t.schedule.totalSteps)}, {"min_lr_ratio", t.schedule.minLrRatio},
    };
    QJsonObject train {
        {"mode", toString(t.mode)}, {"lora", lora}, {"trainable", strings(t.trainable)},
        {"optimizer", toString(t.optimizer.kind)}, {"lr", t.optimizer.lr},
        {"weight_decay", t.optimizer.weightDecay}, {"beta1", t.optimizer.beta1}, {"beta2", t.optimizer.beta2},
        {"eps", t.optimizer.eps}, {"momentum", t.optimizer.momentum}, {"schedule", schedule},
        {"precision", toString(t.precision)}, {"seq_len", integer(t.seqLen)}, {"micro_batch", integer(t.microBatch)},
        {"grad_accum", integer(t.gradAccum)}, {"recompute", t.recompute}, {"attention", toString(t.attention)},
        {"grad_clip", t.gradClip}, {"loss_scale", t.lossScale},
    };
    // Written only when fused, so every config of the eager path keeps its hash.
    if (t.kernels != KernelPath::Eager)
        train.insert(QStringLiteral("kernels"), QString::fromLatin1(toString(t.kernels)));
    if (t.cudaGraph) // likewise
        train.insert(QStringLiteral("cuda_graph"), true);
    const DataConfig &d = c.data;
    QJsonObject data {
        {"kind", toString(d.kind)}, {"path", str(d.path)}, {"token_dtype", str(d.tokenDtype)},
        {"lengths", toString(d.lengths)}, {"min_length", integer(d.minLength)}, {"lengths_file", str(d.lengthsFile)},
        {"longest_first", d.longestFirst}, {"learnable", d.learnable},
        {"synthetic_samples", integer(d.syntheticSamples)}, {"validation_per_mille", integer(d.validationFraction)},
    };
    QJsonObject job {
        {"unit", toString(c.job.unit)}, {"amount", c.job.amount}, {"dataset_tokens", c.job.datasetTokens},
        {"deadline_hours", c.job.deadlineHours ? QJsonValue(*c.job.deadlineHours) : QJsonValue(QJsonValue::Null)},
    };
    return QJsonObject {
        {"schema_version", c.schemaVersion}, {"name", str(c.name)},
        {"seed", static_cast<double>(c.seed)}, {"deterministic", c.deterministic},
        {"model", model}, {"train", train},
        {"validation", QJsonObject {{"every_steps", integer(c.validation.everySteps)}, {"batches", integer(c.validation.batches)}}},
        {"checkpoint", QJsonObject {{"every_steps", integer(c.checkpoint.everySteps)}, {"dir", str(c.checkpoint.dir)}}},
        {"data", data}, {"job", job},
    };
}

RunConfig parseRunConfigJson(const QJsonObject &json)
{
    RunConfig c;
    JsonReader r(json, "");
    int version = RunConfig::kSchemaVersion;
    r.read("schema_version", version);
    if (version > RunConfig::kSchemaVersion)
        throw InvalidInputError("schema_version", "this file has schema version " + std::to_string(version) + ", written by a newer PilotBench; this build reads up to version " + std::to_string(RunConfig::kSchemaVersion) + ". Update PilotBench to read it");
    if (version < 1)
        throw InvalidInputError("schema_version", "must be at least 1, got " + std::to_string(version));
    // Older versions are read with today's defaults for keys they lack, then carry today's version.
    c.schemaVersion = RunConfig::kSchemaVersion;
    r.read("name", c.name);
    r.read("seed", c.seed);
    r.read("deterministic", c.deterministic);
    if (auto m = r.object("model"))
        readModel(*m, c.model);
    if (auto t = r.object("train"))
        readTrain(*t, c.train);
    if (auto v = r.object("validation")) {
        v->read("every_steps", c.validation.everySteps);
        v->read("batches", c.validation.batches);
        v->finish();
    }
    if (auto k = r.object("checkpoint")) {
        k->read("every_steps", c.checkpoint.everySteps);
        k->read("dir", c.checkpoint.dir);
        k->finish();
    }
    if (auto d = r.object("data"))
        readData(*d, c.data);
    if (auto j = r.object("job")) {
        j->readEnum("unit", c.job.unit);
        j->read("amount", c.job.amount);
        j->read("dataset_tokens", c.job.datasetTokens);
        j->read("deadline_hours", c.job.deadlineHours);
        j->finish();
    }
    r.finish();
    return c;
}

RunConfig runConfigFromJson(const QJsonObject &json)
{
    RunConfig c = parseRunConfigJson(json);
    requireValid(c);
    return c;
}

RunConfig loadRunConfig(const QString &spec, const QStringList &overrides)
{
    RunConfig c = parseRunConfigSpec(spec, overrides);
    const auto issues = validateRunConfig(c);
    if (!issues.empty())
        throw InvalidInputError(issues.front().field, issues.front().message + " (in " + spec.toStdString() + ")");
    return c;
}

void saveRunConfig(const RunConfig &config, const QString &path)
{
    writeFileAtomically(path, formatRunConfig(config));
}

std::string configHash(const RunConfig &config)
{
    std::string text;
    canonical(toJson(config), text);
    return QCryptographicHash::hash(QByteArray::fromStdString(text), QCryptographicHash::Sha256).toHex().toStdString();
}

} // namespace pb
