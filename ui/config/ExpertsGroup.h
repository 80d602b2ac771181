#pragma once
// The run-config form's group for the sparse families' routing and latent attention: the shared
// expert, the router's scores, groups and routed scale (rows shown for a model with experts), and
// DeepSeek-V3's latent ranks and head dims (rows shown for a model with latent attention). The
// expert count itself is in the model group; the rest of model.moe comes with the preset or import.
// Values are read back only where the model has them, so a dense config keeps its hash.
#include "config/ConfigGroup.h"
#include "config/RunConfig.h"
#include "config/RunConfigValidation.h"

#include <vector>

namespace pb::ui {

class ExpertsGroup final : public ConfigGroup {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(ExpertsGroup)
public:
    explicit ExpertsGroup(QWidget *parent = nullptr);
    // Shows `model`'s values (base of later edits).
    void setModel(const ModelShape &model);
    // The shown values written over `model`: the routing where `model` has experts (the count
    // edited in the model group), the latent attention where the base model has it.
    void writeTo(ModelShape &model) const;
    // Rows and group shown for a model with `experts` (as edited) or latent attention; the groups'
    // counts enabled for sigmoid scores (or where set).
    void showFor(bool experts);
    // What the group cannot read (the routed scale), as the form's issues.
    std::vector<ValidationIssue> parseIssues() const;

private:
    ModelShape m_base;
};

} // namespace pb::ui
