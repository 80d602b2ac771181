#pragma once
// The run-config form's group for Gemma 4's global layers, those its sliding window spares: their
// own head width and key/value heads, values taken from k_proj, the proportional rotary, and the
// layer traits that come with them (the weightless value norm, the layer scalar), and E2B/E4B's
// per-layer input, shared key/value layers and double-wide MLPs. Shown only for a
// model that has one of these traits; its values are read back only there, so any other config
// keeps its values and its hash.
#include "config/ConfigGroup.h"
#include "config/RunConfig.h"

class QLabel;

namespace pb::ui {

class GlobalLayersGroup final : public ConfigGroup {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(GlobalLayersGroup)
public:
    explicit GlobalLayersGroup(QWidget *parent = nullptr);
    // Shows `model`'s values (base of later edits) and shows the group only where it applies.
    void setModel(const ModelShape &model);
    // The shown values written over `model` (where the base model has them).
    void writeTo(ModelShape &model) const;
    // The global layers' shape for `model` (edited values included), under the fields.
    void showSummary(const ModelShape &model);

private:
    // Gemma 4 E2B/E4B's shared keys and values and per-layer input, appended to the summary.
    static QString sharingSummary(const ModelShape &model);
    ModelShape m_base;
    QLabel *m_summary = nullptr;
};

} // namespace pb::ui
