#include "config/GlobalLayersGroup.h"

#include <QCheckBox>
#include <QFormLayout>
#include <QLabel>
#include <QSpinBox>

#include <algorithm>
#include <climits>

namespace pb::ui {
namespace {

const char *kHeadDim = "model.global_head_dim";
const char *kKvHeads = "model.global_kv_heads";
const char *kValuesFromKeys = "model.global_values_from_keys";
const char *kProportional = "model.rope_proportional";
const char *kValueNorm = "model.value_norm";
const char *kLayerScalar = "model.layer_scalar";
const char *kPerLayerInput = "model.per_layer_input";
const char *kPerLayerVocab = "model.per_layer_vocab";
const char *kKvShared = "model.kv_shared_layers";
const char *kDoubleWide = "model.double_wide_mlp";

bool applies(const ModelShape &m)
{
    const ModelTraits &t = m.traits;
    return m.layerShapesVary() || t.ropeProportional || t.valueNorm || t.layerScalar || t.perLayerInput > 0 || t.kvSharedLayers > 0;
}

} // namespace

GlobalLayersGroup::GlobalLayersGroup(QWidget *parent) : ConfigGroup(tr("Gemma 4 layers"), QStringLiteral("globalLayersGroup"), parent)
{
    m_summary = addSummary(QStringLiteral("globalLayersSummary"));
    addSpin(kHeadDim, 0, tr("Head dim"), tr("Width of a query, key and value head on the layers that keep full attention (global_head_dim: 512 in Gemma 4)"))
        ->setSpecialValueText(tr("as sliding layers"));
    addSpin(kKvHeads, 0, tr("Key/value heads"), tr("Key/value heads of the full-attention layers (num_global_key_value_heads, used with attention_k_eq_v)"))
        ->setSpecialValueText(tr("as sliding layers"));
    addCheck(kValuesFromKeys, tr("Values from k_proj (no v_proj)"),
             tr("The full-attention layers use k_proj's output as values too, through the value norm (attention_k_eq_v: Gemma 4 31B)"));
    addCheck(kProportional, tr("Proportional rotary"),
             tr("The full-attention layers turn whole heads with the global head's frequencies, those past partial rotary's share zero "
                "(rope_type proportional); the sliding layers turn whole heads at their own base"));
    addCheck(kValueNorm, tr("Value norm without weight"), tr("Each value head RMS-normalised, in fp32, with no weight (v_norm)"));
    addCheck(kLayerScalar, tr("Layer scalar"), tr("Each layer's output times its layer_scalar, a buffer read from the checkpoint and never trained"));
    addSpin(kPerLayerInput, 0, tr("Per-layer input"),
            tr("Width of each layer's own input, from a second embedding table and a projection of the embedded tokens, gated and added "
               "after the MLP (hidden_size_per_layer_input: 256 in E2B and E4B)"))
        ->setSpecialValueText(tr("none"));
    addSpin(kPerLayerVocab, 0, tr("Per-layer vocabulary"), tr("Rows of the per-layer table (vocab_size_per_layer_input)"))->setSpecialValueText(tr("as the vocabulary"));
    addSpin(kKvShared, 0, tr("Shared key/value layers"),
            tr("The last this many layers compute no keys or values and attend to those of the last earlier layer of their kind "
               "(num_kv_shared_layers: 20 in E2B, 18 in E4B)"))
        ->setSpecialValueText(tr("none"));
    addCheck(kDoubleWide, tr("Double-wide MLP on shared layers"), tr("The shared layers' MLPs twice intermediate_size wide (use_double_wide_mlp: E2B)"));
}

void GlobalLayersGroup::setModel(const ModelShape &model)
{
    m_base = model;
    const ModelTraits &t = model.traits;
    auto set = [this](const char *name, int64_t v) { spin(name)->setValue(v > INT_MAX ? INT_MAX : static_cast<int>(v)); };
    auto check = [this](const char *name, bool v) { static_cast<QCheckBox *>(field(name))->setChecked(v); };
    set(kHeadDim, t.globalHeadDim);
    set(kKvHeads, t.globalKvHeads);
    check(kValuesFromKeys, t.globalValuesFromKeys);
    check(kProportional, t.ropeProportional);
    check(kValueNorm, t.valueNorm);
    check(kLayerScalar, t.layerScalar);
    set(kPerLayerInput, t.perLayerInput);
    set(kPerLayerVocab, t.perLayerVocab);
    set(kKvShared, t.kvSharedLayers);
    check(kDoubleWide, t.doubleWideMlp);
    setVisible(applies(model));
    showSummary(model);
}

void GlobalLayersGroup::writeTo(ModelShape &model) const
{
    if (!applies(m_base))
        return;
    ModelTraits &t = model.traits;
    auto check = [this](const char *name) { return static_cast<QCheckBox *>(field(name))->isChecked(); };
    t.globalHeadDim = spin(kHeadDim)->value();
    t.globalKvHeads = spin(kKvHeads)->value();
    t.globalValuesFromKeys = check(kValuesFromKeys);
    t.ropeProportional = check(kProportional);
    t.valueNorm = check(kValueNorm);
    t.layerScalar = check(kLayerScalar);
    t.perLayerInput = spin(kPerLayerInput)->value();
    t.perLayerVocab = spin(kPerLayerVocab)->value();
    t.kvSharedLayers = spin(kKvShared)->value();
    t.doubleWideMlp = check(kDoubleWide);
}

void GlobalLayersGroup::showSummary(const ModelShape &model)
{
    const int64_t global = model.layers - model.slidingLayers();
    int64_t anyGlobal = 0;
    while (anyGlobal + 1 < model.layers && model.usesSliding(anyGlobal))
        ++anyGlobal;
    m_summary->setText(tr("%1 of %2 layers global: heads of %3, %4 key/value heads%5; sliding layers: heads of %6, %7 key/value heads")
                           .arg(global)
                           .arg(model.layers)
                           .arg(model.headDimAt(anyGlobal))
                           .arg(model.kvHeadsAt(anyGlobal))
                           .arg(model.valuesFromKeys(anyGlobal) ? tr(", values from k_proj") : QString())
                           .arg(model.effectiveHeadDim())
                           .arg(model.kvHeads) +
                       sharingSummary(model));
}

QString GlobalLayersGroup::sharingSummary(const ModelShape &model)
{
    QString text;
    if (model.kvShared(model.layers - 1)) {
        QStringList sources;
        for (int64_t i = model.firstKvSharedLayer(); i < model.layers; ++i) {
            const QString source = QString::number(model.kvSourceLayer(i));
            if (!sources.contains(source))
                sources.append(source);
        }
        text += tr("; layers %1-%2 read the keys and values of layers %3").arg(model.firstKvSharedLayer()).arg(model.layers - 1).arg(sources.join(QStringLiteral(", ")));
        if (model.traits.doubleWideMlp)
            text += tr(", their MLPs %1 wide").arg(model.intermediateAt(model.layers - 1));
    }
    if (model.traits.perLayerInput > 0)
        text += tr("; a per-layer input of %1 in every layer").arg(model.traits.perLayerInput);
    return text;
}

} // namespace pb::ui
