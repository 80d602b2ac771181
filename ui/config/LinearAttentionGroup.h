#pragma once
// The run-config form's group for a hybrid model's linear attention (Qwen3-Next, Qwen3.5): which
// layers keep full attention, the Gated DeltaNet layers' key/value heads and head dims, the conv
// width, the projections' layout, and the attention output gate of the full layers. Shown only for
// a model that has Gated DeltaNet layers or the gate; its values are read back only there, so any
// other config keeps its values and its hash.
#include "config/ConfigGroup.h"
#include "config/RunConfig.h"
#include "config/RunConfigValidation.h"

#include <vector>

namespace pb::ui {

class LinearAttentionGroup final : public ConfigGroup {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(LinearAttentionGroup)
public:
    explicit LinearAttentionGroup(QWidget *parent = nullptr);
    // Shows `model`'s values (base of later edits) and shows the group only where it applies.
    void setModel(const ModelShape &model);
    // The shown values written over `model` (where the base model has them).
    void writeTo(ModelShape &model) const;
    // What the group cannot read (the listed full layers), as the form's issues.
    std::vector<ValidationIssue> parseIssues() const;
    // The layers by kind for `model` (edited values included), under the fields.
    void showSummary(const ModelShape &model);

private:
    ModelShape m_base;
    QSpinBox *m_fullEvery = nullptr;
    QLineEdit *m_fullLayers = nullptr;
    QComboBox *m_layout = nullptr;
    QCheckBox *m_outputGate = nullptr;
    QLabel *m_summary = nullptr;
};

} // namespace pb::ui
