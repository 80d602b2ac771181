#include "config/ConfigGroup.h"
#include "config/FieldSpinBox.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>

namespace pb::ui {

ConfigGroup::ConfigGroup(const QString &title, const QString &objectName, QWidget *parent) : QGroupBox(title, parent)
{
    setObjectName(objectName);
    m_form = new QFormLayout(this);
    m_form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    setVisible(false);
}

void ConfigGroup::add(const char *field, QWidget *widget, const QString &help)
{
    widget->setObjectName(QString::fromLatin1(field));
    if (!help.isEmpty())
        widget->setToolTip(help);
    m_fields.insert(widget->objectName(), widget);
}

QSpinBox *ConfigGroup::addSpin(const char *field, int minimum, const QString &label, const QString &help)
{
    auto *spin = newFieldSpinBox(this, QString::fromLatin1(field), minimum);
    add(field, spin, help);
    connect(spin, &QSpinBox::valueChanged, this, &ConfigGroup::edited);
    m_form->addRow(label, spin);
    return spin;
}

QComboBox *ConfigGroup::addCombo(const char *field, const QStringList &items, const QString &label, const QString &help)
{
    auto *combo = new QComboBox(this);
    combo->addItems(items);
    combo->setMaximumWidth(170);
    add(field, combo, help);
    connect(combo, &QComboBox::currentIndexChanged, this, &ConfigGroup::edited);
    m_form->addRow(label, combo);
    return combo;
}

QLineEdit *ConfigGroup::addLine(const char *field, const QString &placeholder, const QString &label, const QString &help)
{
    auto *edit = new QLineEdit(this);
    edit->setPlaceholderText(placeholder);
    edit->setMaximumWidth(170);
    add(field, edit, help);
    connect(edit, &QLineEdit::textChanged, this, &ConfigGroup::edited);
    m_form->addRow(label, edit);
    return edit;
}

QCheckBox *ConfigGroup::addCheck(const char *field, const QString &text, const QString &help)
{
    auto *check = new QCheckBox(text, this);
    add(field, check, help);
    connect(check, &QCheckBox::toggled, this, &ConfigGroup::edited);
    m_form->addRow(QString(), check);
    return check;
}

QLabel *ConfigGroup::addSummary(const QString &objectName)
{
    auto *label = new QLabel(this);
    label->setObjectName(objectName);
    label->setWordWrap(true);
    label->setTextFormat(Qt::PlainText);
    m_form->addRow(label);
    return label;
}

QSpinBox *ConfigGroup::spin(const char *name) const
{
    return static_cast<QSpinBox *>(field(name));
}

} // namespace pb::ui
