#include "config/ExpertsGroup.h"
#include "config/FieldSpinBox.h"
#include "config/FormNumbers.h"

#include <QComboBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QSpinBox>

#include <algorithm>
#include <climits>

namespace pb::ui {
namespace {

const char *kShared = "model.moe.shared_expert_intermediate_size";
const char *kScoring = "model.moe.scoring";
const char *kGroups = "model.moe.groups";
const char *kGroupsPerToken = "model.moe.groups_per_token";
const char *kRoutedScale = "model.moe.routed_scale";
const char *kQRank = "model.latent_attention.q_lora_rank";
const char *kKvRank = "model.latent_attention.kv_lora_rank";
const char *kNopeDim = "model.latent_attention.qk_nope_head_dim";
const char *kRopeDim = "model.latent_attention.qk_rope_head_dim";
const char *kValueDim = "model.latent_attention.v_head_dim";

} // namespace

ExpertsGroup::ExpertsGroup(QWidget *parent) : QGroupBox(tr("Experts and latent attention"), parent)
{
    setObjectName(QStringLiteral("expertsGroup"));
    m_form = new QFormLayout(this);
    auto *shared = addGroupSpin(this, m_form, m_fields, QString::fromLatin1(kShared), 0, tr("Shared expert width"),
                                tr("Width of the expert every token passes through besides the routed ones (DeepSeek-V3: n_shared_experts x moe_intermediate_size)"));
    shared->setSpecialValueText(tr("none"));
    auto *scoring = new QComboBox(this);
    scoring->setObjectName(QString::fromLatin1(kScoring));
    scoring->addItems({QString::fromLatin1(toString(RouterScoring::Softmax)), QString::fromLatin1(toString(RouterScoring::Sigmoid))});
    scoring->setMaximumWidth(170);
    scoring->setToolTip(tr("softmax: over all experts, then top-k; sigmoid: one score per expert, top-k from the best groups (DeepSeek-V3)"));
    m_fields.insert(scoring->objectName(), scoring);
    connect(scoring, &QComboBox::currentIndexChanged, this, &ExpertsGroup::edited);
    m_form->addRow(tr("Router scores"), scoring);
    addGroupSpin(this, m_form, m_fields, QString::fromLatin1(kGroups), 1, tr("Expert groups"), tr("The experts in this many equal groups (n_group); with sigmoid scores"));
    addGroupSpin(this, m_form, m_fields, QString::fromLatin1(kGroupsPerToken), 1, tr("Groups per token"),
                 tr("A token's experts come from its best this many groups (topk_group)"));
    auto *scale = new QLineEdit(this);
    scale->setObjectName(QString::fromLatin1(kRoutedScale));
    scale->setPlaceholderText(QStringLiteral("1"));
    scale->setMaximumWidth(170);
    m_fields.insert(scale->objectName(), scale);
    connect(scale, &QLineEdit::textChanged, this, &ExpertsGroup::edited);
    m_form->addRow(tr("Routed scale"), scale);
    auto *qRank = addGroupSpin(this, m_form, m_fields, QString::fromLatin1(kQRank), 0, tr("Query latent rank"), QString());
    qRank->setSpecialValueText(tr("none (q_proj)"));
    addGroupSpin(this, m_form, m_fields, QString::fromLatin1(kKvRank), 1, tr("Key/value latent rank"), QString());
    addGroupSpin(this, m_form, m_fields, QString::fromLatin1(kNopeDim), 0, tr("Head dim without rotary"), QString());
    addGroupSpin(this, m_form, m_fields, QString::fromLatin1(kRopeDim), 0, tr("Rotary head dim"), QString());
    addGroupSpin(this, m_form, m_fields, QString::fromLatin1(kValueDim), 0, tr("Value head dim"), QString());
    setVisible(false);
}

int64_t ExpertsGroup::spin(const char *field) const
{
    return static_cast<QSpinBox *>(m_fields.value(QString::fromLatin1(field)))->value();
}

void ExpertsGroup::setModel(const ModelShape &model)
{
    m_base = model;
    auto set = [this](const char *field, int64_t v) { static_cast<QSpinBox *>(m_fields.value(QString::fromLatin1(field)))->setValue(v > INT_MAX ? INT_MAX : static_cast<int>(v)); };
    const MoeConfig &e = model.moe;
    set(kShared, e.sharedExpertIntermediateSize);
    auto *scoring = static_cast<QComboBox *>(m_fields.value(QString::fromLatin1(kScoring)));
    scoring->setCurrentIndex(scoring->findText(QString::fromLatin1(toString(e.scoring))));
    set(kGroups, e.groups);
    set(kGroupsPerToken, e.groupsPerToken);
    static_cast<QLineEdit *>(m_fields.value(QString::fromLatin1(kRoutedScale)))->setText(e.routedScale == 1.0 ? QString() : formatNumber(e.routedScale));
    const LatentAttention &l = model.latent;
    set(kQRank, l.qLoraRank);
    set(kKvRank, std::max<int64_t>(l.kvLoraRank, 1));
    set(kNopeDim, l.qkNopeHeadDim);
    set(kRopeDim, l.qkRopeHeadDim);
    set(kValueDim, l.vHeadDim);
}

void ExpertsGroup::writeTo(ModelShape &model) const
{
    if (model.moe.enabled()) {
        MoeConfig &e = model.moe;
        e.sharedExpertIntermediateSize = spin(kShared);
        if (auto v = parseEnum<RouterScoring>(static_cast<QComboBox *>(m_fields.value(QString::fromLatin1(kScoring)))->currentText().toStdString()))
            e.scoring = *v;
        e.groups = spin(kGroups);
        e.groupsPerToken = spin(kGroupsPerToken);
        const QString scale = static_cast<QLineEdit *>(m_fields.value(QString::fromLatin1(kRoutedScale)))->text();
        if (scale.trimmed().isEmpty())
            e.routedScale = 1.0;
        else if (const auto v = parseNumber(scale)) // the base value kept exactly while it still shows
            e.routedScale = formatNumber(*v) == formatNumber(m_base.moe.routedScale) ? m_base.moe.routedScale : *v;
    }
    if (m_base.latent.enabled()) {
        LatentAttention &l = model.latent;
        l.qLoraRank = spin(kQRank);
        l.kvLoraRank = spin(kKvRank);
        l.qkNopeHeadDim = spin(kNopeDim);
        l.qkRopeHeadDim = spin(kRopeDim);
        l.vHeadDim = spin(kValueDim);
    }
}

void ExpertsGroup::showFor(bool experts)
{
    const bool latent = m_base.latent.enabled();
    for (const char *name : {kShared, kScoring, kGroups, kGroupsPerToken, kRoutedScale})
        m_form->setRowVisible(m_fields.value(QString::fromLatin1(name)), experts);
    for (const char *name : {kQRank, kKvRank, kNopeDim, kRopeDim, kValueDim})
        m_form->setRowVisible(m_fields.value(QString::fromLatin1(name)), latent);
    setVisible(experts || latent);
    const bool sigmoid = static_cast<QComboBox *>(m_fields.value(QString::fromLatin1(kScoring)))->currentText() == QLatin1String(toString(RouterScoring::Sigmoid));
    m_fields.value(QString::fromLatin1(kGroups))->setEnabled(sigmoid || spin(kGroups) > 1);
    m_fields.value(QString::fromLatin1(kGroupsPerToken))->setEnabled(sigmoid || spin(kGroupsPerToken) > 1);
}

std::vector<ValidationIssue> ExpertsGroup::parseIssues() const
{
    const QString text = static_cast<QLineEdit *>(m_fields.value(QString::fromLatin1(kRoutedScale)))->text();
    if (text.trimmed().isEmpty() || parseNumber(text))
        return {};
    return {{kRoutedScale, "must be a number, or empty for the default"}};
}

} // namespace pb::ui
