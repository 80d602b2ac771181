#pragma once
// A group of the run-config form shown only for the models it applies to (experts, linear
// attention, Gemma 4's global layers): its rows, each a widget named by its config path and
// registered in fields() for the form's lookup, red marks and "Config path" tooltips; any edit is
// signalled as edited().
#include <QGroupBox>
#include <QMap>
#include <QStringList>

class QCheckBox;
class QComboBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace pb::ui {

class ConfigGroup : public QGroupBox {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(ConfigGroup)
public:
    const QMap<QString, QWidget *> &fields() const { return m_fields; }

Q_SIGNALS:
    void edited();

protected:
    ConfigGroup(const QString &title, const QString &objectName, QWidget *parent);
    // A row per field; `help` is its tooltip.
    QSpinBox *addSpin(const char *field, int minimum, const QString &label, const QString &help = {});
    QComboBox *addCombo(const char *field, const QStringList &items, const QString &label, const QString &help = {});
    QLineEdit *addLine(const char *field, const QString &placeholder, const QString &label, const QString &help = {});
    QCheckBox *addCheck(const char *field, const QString &text, const QString &help = {});
    // A word-wrapped line of plain text across the group, first.
    QLabel *addSummary(const QString &objectName);
    QWidget *field(const char *name) const { return m_fields.value(QString::fromLatin1(name)); }
    QSpinBox *spin(const char *name) const;

    QFormLayout *m_form = nullptr;

private:
    void add(const char *field, QWidget *widget, const QString &help);

    QMap<QString, QWidget *> m_fields;
};

} // namespace pb::ui
