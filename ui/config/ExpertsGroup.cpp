#include "config/ExpertsGroup.h"
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

ExpertsGroup::ExpertsGroup(QWidget *parent) : ConfigGroup(tr("Experts and latent attention"), QStringLiteral("expertsGroup"), parent)
{
    addSpin(kShared, 0, tr("Shared expert width"),
            tr("Width of the expert every token passes through besides the routed ones (DeepSeek-V3: n_shared_experts x moe_intermediate_size)"))
        ->setSpecialValueText(tr("none"));
    addCombo(kScoring, {QString::fromLatin1(toString(RouterScoring::Softmax)), QString::fromLatin1(toString(RouterScoring::Sigmoid))}, tr("Router scores"),
             tr("softmax: over all experts, then top-k; sigmoid: one score per expert, top-k from the best groups (DeepSeek-V3)"));
    addSpin(kGroups, 1, tr("Expert groups"), tr("The experts in this many equal groups (n_group); with sigmoid scores"));
    addSpin(kGroupsPerToken, 1, tr("Groups per token"), tr("A token's experts come from its best this many groups (topk_group)"));
    addLine(kRoutedScale, QStringLiteral("1"), tr("Routed scale"));
    addSpin(kQRank, 0, tr("Query latent rank"))->setSpecialValueText(tr("none (q_proj)"));
    addSpin(kKvRank, 1, tr("Key/value latent rank"));
    addSpin(kNopeDim, 0, tr("Head dim without rotary"));
    addSpin(kRopeDim, 0, tr("Rotary head dim"));
    addSpin(kValueDim, 0, tr("Value head dim"));
}

void ExpertsGroup::setModel(const ModelShape &model)
{
    m_base = model;
    auto set = [this](const char *name, int64_t v) { spin(name)->setValue(v > INT_MAX ? INT_MAX : static_cast<int>(v)); };
    const MoeConfig &e = model.moe;
    set(kShared, e.sharedExpertIntermediateSize);
    auto *scoring = static_cast<QComboBox *>(field(kScoring));
    scoring->setCurrentIndex(scoring->findText(QString::fromLatin1(toString(e.scoring))));
    set(kGroups, e.groups);
    set(kGroupsPerToken, e.groupsPerToken);
    static_cast<QLineEdit *>(field(kRoutedScale))->setText(e.routedScale == 1.0 ? QString() : formatNumber(e.routedScale));
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
        e.sharedExpertIntermediateSize = spin(kShared)->value();
        if (auto v = parseEnum<RouterScoring>(static_cast<QComboBox *>(field(kScoring))->currentText().toStdString()))
            e.scoring = *v;
        e.groups = spin(kGroups)->value();
        e.groupsPerToken = spin(kGroupsPerToken)->value();
        const QString scale = static_cast<QLineEdit *>(field(kRoutedScale))->text();
        if (scale.trimmed().isEmpty())
            e.routedScale = 1.0;
        else if (const auto v = parseNumber(scale)) // the base value kept exactly while it still shows
            e.routedScale = formatNumber(*v) == formatNumber(m_base.moe.routedScale) ? m_base.moe.routedScale : *v;
    }
    if (m_base.latent.enabled()) {
        LatentAttention &l = model.latent;
        l.qLoraRank = spin(kQRank)->value();
        l.kvLoraRank = spin(kKvRank)->value();
        l.qkNopeHeadDim = spin(kNopeDim)->value();
        l.qkRopeHeadDim = spin(kRopeDim)->value();
        l.vHeadDim = spin(kValueDim)->value();
    }
}

void ExpertsGroup::showFor(bool experts)
{
    const bool latent = m_base.latent.enabled();
    for (const char *name : {kShared, kScoring, kGroups, kGroupsPerToken, kRoutedScale})
        m_form->setRowVisible(field(name), experts);
    for (const char *name : {kQRank, kKvRank, kNopeDim, kRopeDim, kValueDim})
        m_form->setRowVisible(field(name), latent);
    setVisible(experts || latent);
    const bool sigmoid = static_cast<QComboBox *>(field(kScoring))->currentText() == QLatin1String(toString(RouterScoring::Sigmoid));
    field(kGroups)->setEnabled(sigmoid || spin(kGroups)->value() > 1);
    field(kGroupsPerToken)->setEnabled(sigmoid || spin(kGroupsPerToken)->value() > 1);
}

std::vector<ValidationIssue> ExpertsGroup::parseIssues() const
{
    const QString text = static_cast<QLineEdit *>(field(kRoutedScale))->text();
    if (text.trimmed().isEmpty() || parseNumber(text))
        return {};
    return {{kRoutedScale, "must be a number, or empty for the default"}};
}

} // namespace pb::ui
