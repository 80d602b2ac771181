#pragma once
// The run-config form's group for Gemma 4's global layers, those its sliding window spares: their
// own head width and key/value heads, values taken from k_proj, the proportional rotary, and the
// layer traits that come with them (the weightless value norm, the layer scalar). Shown only for a
// model that has one of these traits; its values are read back only there, so any other config
// keeps its values and its hash.
#include "config/RunConfig.h"

#include <QGroupBox>
#include <QMap>

class QCheckBox;
class QFormLayout;
class QLabel;
class QSpinBox;

namespace pb::ui {

class GlobalLayersGroup final : public QGroupBox {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(GlobalLayersGroup)
public:
    explicit GlobalLayersGroup(QWidget *parent = nullptr);
    // Its widgets by config path ("model.global_head_dim", ...), for the form's lookup, its red
    // marks and its "Config path" tooltips.
    const QMap<QString, QWidget *> &fields() const { return m_fields; }
    // Shows `model`'s values (base of later edits) and shows the group only where it applies.
    void setModel(const ModelShape &model);
    // The shown values written over `model` (where the base model has them).
    void writeTo(ModelShape &model) const;
    // The global layers' shape for `model` (edited values included), under the fields.
    void showSummary(const ModelShape &model);

Q_SIGNALS:
    void edited();

private:
    QSpinBox *addSpin(const QString &field, const QString &label, const QString &zero, const QString &help);
    QCheckBox *addCheck(const QString &field, const QString &text, const QString &help);

    ModelShape m_base;
    QMap<QString, QWidget *> m_fields;
    QFormLayout *m_form = nullptr;
    QLabel *m_summary = nullptr;
};

} // namespace pb::ui
