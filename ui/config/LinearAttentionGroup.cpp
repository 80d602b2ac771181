#include "config/LinearAttentionGroup.h"
#include "config/FieldSpinBox.h"

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

LinearAttentionGroup::LinearAttentionGroup(QWidget *parent) : QGroupBox(tr("Linear attention (Gated DeltaNet)"), parent)
{
    setObjectName(QStringLiteral("linearAttentionGroup"));
    m_form = new QFormLayout(this);
    m_form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    m_summary = new QLabel(this);
    m_summary->setObjectName(QStringLiteral("linearAttentionSummary"));
    m_summary->setWordWrap(true);
    m_summary->setTextFormat(Qt::PlainText);
    m_form->addRow(m_summary);

    m_fullEvery = addSpin(QString::fromLatin1(kFullEvery), 0, tr("Full attention every"),
                          tr("Every N-th layer keeps gated full attention (softmax over the sequence, a KV cache); the others run Gated DeltaNet "
                             "(full_attention_interval: 4 in Qwen3-Next and Qwen3.5)"));
    m_fullEvery->setSpecialValueText(tr("none: list only"));
    m_fullLayers = new QLineEdit(this);
    m_fullLayers->setObjectName(QString::fromLatin1(kFullLayers));
    m_fullLayers->setPlaceholderText(tr("none"));
    m_fullLayers->setMaximumWidth(170);
    m_fullLayers->setToolTip(tr("Layers that keep full attention besides every N-th, by index from 0, separated by commas "
                                "(the full_attention entries of layer_types that follow no interval)"));
    m_fields.insert(m_fullLayers->objectName(), m_fullLayers);
    connect(m_fullLayers, &QLineEdit::textChanged, this, &LinearAttentionGroup::edited);
    m_form->addRow(tr("Also full attention on"), m_fullLayers);
    addSpin(QString::fromLatin1(kKeyHeads), 1, tr("Key heads"),
            tr("Query and key heads of a Gated DeltaNet layer (linear_num_key_heads); q and k are L2-normalised and repeated per value head"));
    addSpin(QString::fromLatin1(kValueHeads), 1, tr("Value heads"),
            tr("Value heads (linear_num_value_heads), a multiple of the key heads; each keeps a recurrent state of key head dim x value head dim "
               "instead of the sequence's keys and values"));
    addSpin(QString::fromLatin1(kKeyHeadDim), 1, tr("Key head dim"), tr("Width of a query or key head (linear_key_head_dim)"));
    addSpin(QString::fromLatin1(kValueHeadDim), 1, tr("Value head dim"), tr("Width of a value head, and of the gated RMSNorm on the output (linear_value_head_dim)"));
    addSpin(QString::fromLatin1(kConvKernel), 1, tr("Conv width"),
            tr("Width of the causal depthwise convolution (with SiLU) over q, k and v before the delta rule (linear_conv_kernel_dim)"));
    m_layout = new QComboBox(this);
    m_layout->setObjectName(QString::fromLatin1(kLayout));
    m_layout->addItems({QString::fromLatin1(toString(LinearAttentionLayout::QkvzBa)), QString::fromLatin1(toString(LinearAttentionLayout::QkvZBA))});
    m_layout->setMaximumWidth(170);
    m_layout->setToolTip(tr("How linear_attn stores its input projections, which names its checkpoint tensors and LoRA targets: qkvz_ba, Qwen3-Next's "
                            "in_proj_qkvz + in_proj_ba (grouped per key head); qkv_z_b_a, Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b, in_proj_a"));
    m_fields.insert(m_layout->objectName(), m_layout);
    connect(m_layout, &QComboBox::currentIndexChanged, this, &LinearAttentionGroup::edited);
    m_form->addRow(tr("Projections"), m_layout);
    m_outputGate = new QCheckBox(tr("Gate the full layers' attention output"), this);
    m_outputGate->setObjectName(QString::fromLatin1(kOutputGate));
    m_outputGate->setToolTip(tr("q_proj also yields a gate per head (twice its width); the attended output times sigmoid(gate) before o_proj "
                                "(attn_output_gate of Qwen3-Next and Qwen3.5)"));
    m_fields.insert(m_outputGate->objectName(), m_outputGate);
    connect(m_outputGate, &QCheckBox::toggled, this, &LinearAttentionGroup::edited);
    m_form->addRow(QString(), m_outputGate);
    setVisible(false);
}

QSpinBox *LinearAttentionGroup::addSpin(const QString &field, int minimum, const QString &label, const QString &help)
{
    return addGroupSpin(this, m_form, m_fields, field, minimum, label, help);
}

void LinearAttentionGroup::setModel(const ModelShape &model)
{
    m_base = model;
    const LinearAttention &l = model.linear;
    auto spin = [this](const char *field, int64_t v) { static_cast<QSpinBox *>(m_fields.value(QString::fromLatin1(field)))->setValue(toInt(v)); };
    spin(kFullEvery, l.fullLayers.every);
    m_fullLayers->setText(formatLayers(l.fullLayers.layers));
    // The spin boxes start at 1: a model without linear attention shows 1 there, never read back.
    spin(kKeyHeads, l.keyHeads);
    spin(kValueHeads, l.valueHeads);
    spin(kKeyHeadDim, l.keyHeadDim);
    spin(kValueHeadDim, l.valueHeadDim);
    spin(kConvKernel, l.convKernel);
    m_layout->setCurrentIndex(m_layout->findText(QString::fromLatin1(toString(l.layout))));
    m_outputGate->setChecked(model.traits.attentionOutputGate);
    // The Gated DeltaNet rows with linear attention; the group with it or the gate.
    for (const char *field : {kFullEvery, kFullLayers, kKeyHeads, kValueHeads, kKeyHeadDim, kValueHeadDim, kConvKernel, kLayout})
        m_form->setRowVisible(m_fields.value(QString::fromLatin1(field)), l.enabled());
    m_form->setRowVisible(m_summary, l.enabled());
    setVisible(applies(model));
    showSummary(model);
}

void LinearAttentionGroup::writeTo(ModelShape &model) const
{
    if (m_base.linear.enabled()) {
        LinearAttention &l = model.linear;
        auto spin = [this](const char *field) { return static_cast<int64_t>(static_cast<QSpinBox *>(m_fields.value(QString::fromLatin1(field)))->value()); };
        l.fullLayers.every = spin(kFullEvery);
        // Unreadable: the base list stays (parseIssues() says why).
        if (const auto layers = parseLayers(m_fullLayers->text()))
            l.fullLayers.layers = *layers;
        l.keyHeads = spin(kKeyHeads);
        l.valueHeads = spin(kValueHeads);
        l.keyHeadDim = spin(kKeyHeadDim);
        l.valueHeadDim = spin(kValueHeadDim);
        l.convKernel = spin(kConvKernel);
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
