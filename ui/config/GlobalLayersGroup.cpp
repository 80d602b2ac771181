#include "config/GlobalLayersGroup.h"
#include "config/FieldSpinBox.h"

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

GlobalLayersGroup::GlobalLayersGroup(QWidget *parent) : QGroupBox(tr("Global layers (Gemma 4)"), parent)
{
    setObjectName(QStringLiteral("globalLayersGroup"));
    m_form = new QFormLayout(this);
    m_form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    m_summary = new QLabel(this);
    m_summary->setObjectName(QStringLiteral("globalLayersSummary"));
    m_summary->setWordWrap(true);
    m_summary->setTextFormat(Qt::PlainText);
    m_form->addRow(m_summary);
    addSpin(QString::fromLatin1(kHeadDim), tr("Head dim"), tr("as sliding layers"),
            tr("Width of a query, key and value head on the layers that keep full attention (global_head_dim: 512 in Gemma 4)"));
    addSpin(QString::fromLatin1(kKvHeads), tr("Key/value heads"), tr("as sliding layers"),
            tr("Key/value heads of the full-attention layers (num_global_key_value_heads, used with attention_k_eq_v)"));
    addCheck(QString::fromLatin1(kValuesFromKeys), tr("Values from k_proj (no v_proj)"),
             tr("The full-attention layers use k_proj's output as values too, through the value norm (attention_k_eq_v: Gemma 4 31B)"));
    addCheck(QString::fromLatin1(kProportional), tr("Proportional rotary"),
             tr("The full-attention layers turn whole heads with the global head's frequencies, those past partial rotary's share zero "
                "(rope_type proportional); the sliding layers turn whole heads at their own base"));
    addCheck(QString::fromLatin1(kValueNorm), tr("Value norm without weight"), tr("Each value head RMS-normalised, in fp32, with no weight (v_norm)"));
    addCheck(QString::fromLatin1(kLayerScalar), tr("Layer scalar"),
             tr("Each layer's output times its layer_scalar, a buffer read from the checkpoint and never trained"));
    setVisible(false);
}

QSpinBox *GlobalLayersGroup::addSpin(const QString &field, const QString &label, const QString &zero, const QString &help)
{
    auto *spin = addGroupSpin(this, m_form, m_fields, field, 0, label, help);
    spin->setSpecialValueText(zero);
    return spin;
}

QCheckBox *GlobalLayersGroup::addCheck(const QString &field, const QString &text, const QString &help)
{
    auto *box = new QCheckBox(text, this);
    box->setObjectName(field);
    box->setToolTip(help);
    m_fields.insert(field, box);
    connect(box, &QCheckBox::toggled, this, &GlobalLayersGroup::edited);
    m_form->addRow(QString(), box);
    return box;
}

void GlobalLayersGroup::setModel(const ModelShape &model)
{
    m_base = model;
    const ModelTraits &t = model.traits;
    auto spin = [this](const char *field, int64_t v) { static_cast<QSpinBox *>(m_fields.value(QString::fromLatin1(field)))->setValue(v > INT_MAX ? INT_MAX : static_cast<int>(v)); };
    auto check = [this](const char *field, bool v) { static_cast<QCheckBox *>(m_fields.value(QString::fromLatin1(field)))->setChecked(v); };
    spin(kHeadDim, t.globalHeadDim);
    spin(kKvHeads, t.globalKvHeads);
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
    auto spin = [this](const char *field) { return static_cast<int64_t>(static_cast<QSpinBox *>(m_fields.value(QString::fromLatin1(field)))->value()); };
    auto check = [this](const char *field) { return static_cast<QCheckBox *>(m_fields.value(QString::fromLatin1(field)))->isChecked(); };
    t.globalHeadDim = spin(kHeadDim);
    t.globalKvHeads = spin(kKvHeads);
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
