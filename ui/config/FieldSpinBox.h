#pragma once
// The run-config form's whole-number field: named by its config path, from `minimum` up, with
// thousands separators, sized for a few digits.
#include <QFormLayout>
#include <QMap>
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

// A form group's whole-number row: the field with its help, registered by config path in `fields`,
// each change signalled as the group's `edited`.
template <typename Group>
QSpinBox *addGroupSpin(Group *group, QFormLayout *form, QMap<QString, QWidget *> &fields, const QString &field, int minimum, const QString &label,
                       const QString &help)
{
    auto *spin = newFieldSpinBox(group, field, minimum);
    spin->setToolTip(help);
    fields.insert(field, spin);
    QObject::connect(spin, &QSpinBox::valueChanged, group, &Group::edited);
    form->addRow(label, spin);
    return spin;
}

} // namespace pb::ui
