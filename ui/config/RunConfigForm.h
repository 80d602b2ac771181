#pragma once
// A form over the fields of RunConfig an engineer changes: model shape, the train block and seed
// in view; schedule, validation, checkpoints, data and job in a panel folded away below them, so
// the form still fits a laptop screen. Fields the form does not show are carried through unchanged
// from the config it was given.
// Every change is validated at once: the field turns red and carries the rule as its tooltip, and
// the list of problems sits under the form.
#include "config/RunConfig.h"
#include "config/RunConfigValidation.h"

#include <QMap>
#include <QWidget>

#include <vector>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QGroupBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QToolButton;

namespace pb::ui {

class ExpertsGroup;
class GlobalLayersGroup;
class LinearAttentionGroup;

class RunConfigForm final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(RunConfigForm)
public:
    explicit RunConfigForm(QWidget *parent = nullptr);
    void setConfig(const RunConfig &config);
    // The base config with the form's values written over it. Values the form cannot parse (the
    // seed, the job's numbers) keep the base value; they are listed in issues() all the same.
    RunConfig config() const;
    // Every problem: the form's own parse errors first, then validateRunConfig's.
    const std::vector<ValidationIssue> &issues() const { return m_issues; }
    bool isValid() const { return m_issues.empty(); }
    // The widget showing `field` (a JSON path like "train.seq_len"), or nullptr.
    QWidget *fieldWidget(const QString &field) const;
    // Whether the panel of schedule, validation, checkpoint, data and job fields is open. It opens
    // by itself when one of its fields has a problem.
    bool isExpanded() const;
    void setExpanded(bool expanded);

Q_SIGNALS:
    void changed();

private:
    QSpinBox *addSpin(const QString &field, int minimum);
    QComboBox *addCombo(const QString &field, const QStringList &names);
    QCheckBox *addCheck(const QString &field, const QString &text);
    QLineEdit *addNumber(const QString &field, const QString &placeholder);
    QWidget *addPath(const QString &field, const QString &placeholder, bool directory);
    void onEdited();
    void validate();

    RunConfig m_base;
    QLabel *m_traitsSummary = nullptr;
    bool m_loading = false;
    QMap<QString, QWidget *> m_fields;
    std::vector<ValidationIssue> m_issues;
    QLabel *m_issueLabel = nullptr;
    QLineEdit *m_targets = nullptr;
    QLineEdit *m_seed = nullptr;
    QDoubleSpinBox *m_alpha = nullptr;
    QCheckBox *m_tie = nullptr;
    QCheckBox *m_recompute = nullptr;
    QCheckBox *m_cudaGraph = nullptr;
    QDoubleSpinBox *m_minLrRatio = nullptr;
    QComboBox *m_tokenDtype = nullptr;
    QWidget *m_dataPathRow = nullptr;
    QWidget *m_lengthsFileRow = nullptr;
    QToolButton *m_moreToggle = nullptr;
    QWidget *m_more = nullptr;
    ExpertsGroup *m_experts = nullptr;
    LinearAttentionGroup *m_linear = nullptr;
    GlobalLayersGroup *m_global = nullptr;
};

} // namespace pb::ui
