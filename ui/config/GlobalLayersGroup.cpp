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

bool applies(const ModelShape &m)
{
    const ModelTraits &t = m.traits;
    return m.layerShapesVary() || t.ropeProportional || t.valueNorm || t.layerScalar;
}

} // namespace

GlobalLayersGroup::GlobalLayersGroup(QWidget *parent) : ConfigGroup(tr("Global layers (Gemma 4)"), QStringLiteral("globalLayersGroup"), parent)
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
}

void GlobalLayersGroup::showSummary(const ModelShape &model)
{
    const int64_t global = model.layers - model.slidingLayers();
    int64_t anyGlobal = 0;
    while (anyGlobal + 1 < model.layers && model.traits.usesSliding(anyGlobal))
        ++anyGlobal;
    m_summary->setText(tr("%1 of %2 layers global: heads of %3, %4 key/value heads%5; sliding layers: heads of %6, %7 key/value heads")
                           .arg(global)
                           .arg(model.layers)
                           .arg(model.headDimAt(anyGlobal))
                           .arg(model.kvHeadsAt(anyGlobal))
                           .arg(model.traits.valuesFromKeys(anyGlobal) ? tr(", values from k_proj") : QString())
                           .arg(model.effectiveHeadDim())
                           .arg(model.kvHeads));
}

} // namespace pb::ui
