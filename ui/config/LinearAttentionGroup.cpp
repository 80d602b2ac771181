#include "config/LinearAttentionGroup.h"

#include "config/ModelTraitsText.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSpinBox>

#include <climits>
#include <optional>

namespace pb::ui {
namespace {

const char *kFullEvery = "model.linear_attention.full_layers.every";
const char *kFullLayers = "model.linear_attention.full_layers.layers";
const char *kKeyHeads = "model.linear_attention.key_heads";
const char *kValueHeads = "model.linear_attention.value_heads";
const char *kKeyHeadDim = "model.linear_attention.key_head_dim";
const char *kValueHeadDim = "model.linear_attention.value_head_dim";
const char *kConvKernel = "model.linear_attention.conv_kernel";
const char *kLayout = "model.linear_attention.layout";
const char *kOutputGate = "model.attention_output_gate";

int toInt(int64_t v)
{
    return v > INT_MAX ? INT_MAX : static_cast<int>(v);
}

QString formatLayers(const std::vector<int64_t> &layers)
{
    QStringList out;
    for (int64_t layer : layers)
        out << QString::number(layer);
    return out.join(QStringLiteral(", "));
}

// "3, 7 11" -> {3, 7, 11}; nullopt when a part is not a layer index. Empty: no listed layers.
std::optional<std::vector<int64_t>> parseLayers(const QString &text)
{
    static const QRegularExpression separators(QStringLiteral("[,\\s]+"));
    std::vector<int64_t> layers;
    for (const QString &part : text.split(separators, Qt::SkipEmptyParts)) {
        bool ok = false;
        const qlonglong v = part.toLongLong(&ok);
        if (!ok || v < 0)
            return std::nullopt;
        layers.push_back(v);
    }
    return layers;
}

bool applies(const ModelShape &m)
{
    return m.linear.enabled() || m.traits.attentionOutputGate;
}

} // namespace

LinearAttentionGroup::LinearAttentionGroup(QWidget *parent) : ConfigGroup(tr("Linear attention (Gated DeltaNet)"), QStringLiteral("linearAttentionGroup"), parent)
{
    m_summary = addSummary(QStringLiteral("linearAttentionSummary"));
    m_fullEvery = addSpin(kFullEvery, 0, tr("Full attention every"),
                          tr("Every N-th layer keeps gated full attention (softmax over the sequence, a KV cache); the others run Gated DeltaNet "
                             "(full_attention_interval: 4 in Qwen3-Next and Qwen3.5)"));
    m_fullEvery->setSpecialValueText(tr("none: list only"));
    m_fullLayers = addLine(kFullLayers, tr("none"), tr("Also full attention on"),
                           tr("Layers that keep full attention besides every N-th, by index from 0, separated by commas "
                              "(the full_attention entries of layer_types that follow no interval)"));
    addSpin(kKeyHeads, 1, tr("Key heads"),
            tr("Query and key heads of a Gated DeltaNet layer (linear_num_key_heads); q and k are L2-normalised and repeated per value head"));
    addSpin(kValueHeads, 1, tr("Value heads"),
            tr("Value heads (linear_num_value_heads), a multiple of the key heads; each keeps a recurrent state of key head dim x value head dim "
               "instead of the sequence's keys and values"));
    addSpin(kKeyHeadDim, 1, tr("Key head dim"), tr("Width of a query or key head (linear_key_head_dim)"));
    addSpin(kValueHeadDim, 1, tr("Value head dim"), tr("Width of a value head, and of the gated RMSNorm on the output (linear_value_head_dim)"));
    addSpin(kConvKernel, 1, tr("Conv width"), tr("Width of the causal depthwise convolution (with SiLU) over q, k and v before the delta rule (linear_conv_kernel_dim)"));
    m_layout = addCombo(kLayout, {QString::fromLatin1(toString(LinearAttentionLayout::QkvzBa)), QString::fromLatin1(toString(LinearAttentionLayout::QkvZBA))},
                        tr("Projections"),
                        tr("How linear_attn stores its input projections, which names its checkpoint tensors and LoRA targets: qkvz_ba, Qwen3-Next's "
                           "in_proj_qkvz + in_proj_ba (grouped per key head); qkv_z_b_a, Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b, in_proj_a"));
    m_outputGate = addCheck(kOutputGate, tr("Gate the full layers' attention output"),
                            tr("q_proj also yields a gate per head (twice its width); the attended output times sigmoid(gate) before o_proj "
                               "(attn_output_gate of Qwen3-Next and Qwen3.5)"));
}

void LinearAttentionGroup::setModel(const ModelShape &model)
{
    m_base = model;
    const LinearAttention &l = model.linear;
    auto set = [this](const char *name, int64_t v) { spin(name)->setValue(toInt(v)); };
    set(kFullEvery, l.fullLayers.every);
    m_fullLayers->setText(formatLayers(l.fullLayers.layers));
    // The spin boxes start at 1: a model without linear attention shows 1 there, never read back.
    set(kKeyHeads, l.keyHeads);
    set(kValueHeads, l.valueHeads);
    set(kKeyHeadDim, l.keyHeadDim);
    set(kValueHeadDim, l.valueHeadDim);
    set(kConvKernel, l.convKernel);
    m_layout->setCurrentIndex(m_layout->findText(QString::fromLatin1(toString(l.layout))));
    m_outputGate->setChecked(model.traits.attentionOutputGate);
    // The Gated DeltaNet rows with linear attention; the group with it or the gate.
    for (const char *name : {kFullEvery, kFullLayers, kKeyHeads, kValueHeads, kKeyHeadDim, kValueHeadDim, kConvKernel, kLayout})
        m_form->setRowVisible(field(name), l.enabled());
    m_form->setRowVisible(m_summary, l.enabled());
    setVisible(applies(model));
    showSummary(model);
}

void LinearAttentionGroup::writeTo(ModelShape &model) const
{
    if (m_base.linear.enabled()) {
        LinearAttention &l = model.linear;
        auto value = [this](const char *name) { return static_cast<int64_t>(spin(name)->value()); };
        l.fullLayers.every = value(kFullEvery);
        // Unreadable: the base list stays (parseIssues() says why).
        if (const auto layers = parseLayers(m_fullLayers->text()))
            l.fullLayers.layers = *layers;
        l.keyHeads = value(kKeyHeads);
        l.valueHeads = value(kValueHeads);
        l.keyHeadDim = value(kKeyHeadDim);
        l.valueHeadDim = value(kValueHeadDim);
        l.convKernel = value(kConvKernel);
        if (const auto layout = parseEnum<LinearAttentionLayout>(m_layout->currentText().toStdString()))
            l.layout = *layout;
    }
    if (applies(m_base))
        model.traits.attentionOutputGate = m_outputGate->isChecked();
}

std::vector<ValidationIssue> LinearAttentionGroup::parseIssues() const
{
    if (!m_base.linear.enabled() || parseLayers(m_fullLayers->text()))
        return {};
    return {{kFullLayers, "must be layer indices from 0 separated by commas, like 3, 7, 11 (or empty for none)"}};
}

void LinearAttentionGroup::showSummary(const ModelShape &model)
{
    m_summary->setText(QString::fromStdString(describeLinearLayers(model)));
}

} // namespace pb::ui
