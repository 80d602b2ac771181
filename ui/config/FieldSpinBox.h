#pragma once
// The run-config form's whole-number field: named by its config path, from `minimum` up, with
// thousands separators, sized for a few digits.
#include <QSpinBox>

#include <climits>

namespace pb::ui {

inline QSpinBox *newFieldSpinBox(QWidget *parent, const QString &field, int minimum)
{
    auto *spin = new QSpinBox(parent);
    spin->setObjectName(field);
    spin->setRange(minimum, INT_MAX);
    spin->setGroupSeparatorShown(true);
    // The INT_MAX range would otherwise size every box for ten digits.
    spin->setMinimumWidth(90);
    spin->setMaximumWidth(170);
    return spin;
}

} // namespace pb::ui
