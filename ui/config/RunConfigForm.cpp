#include "config/RunConfigForm.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QVBoxLayout>

#include <climits>
#include <limits>

namespace pb::ui {
namespace {

template <typename E, size_t N> QStringList enumNames(const E (&values)[N])
{
    QStringList names;
    for (E v : values)
        names << QString::fromLatin1(toString(v));
    return names;
}

const char *kInvalidProperty = "invalidField";

int toInt(int64_t v)
{
    return v > INT_MAX ? INT_MAX : static_cast<int>(v);
}

} // namespace

RunConfigForm::RunConfigForm(QWidget *parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("runConfigForm"));
    auto *outer = new QVBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);

    auto *model = new QGroupBox(tr("Model shape"), this);
    auto *mf = new QFormLayout(model);
    mf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    mf->addRow(tr("Layers"), addSpin(QStringLiteral("model.layers"), 0));
    mf->addRow(tr("Hidden size"), addSpin(QStringLiteral("model.hidden_size"), 0));
    mf->addRow(tr("Attention heads"), addSpin(QStringLiteral("model.attention_heads"), 0));
    mf->addRow(tr("KV heads"), addSpin(QStringLiteral("model.kv_heads"), 0));
    auto *headDim = addSpin(QStringLiteral("model.head_dim"), 0);
    headDim->setSpecialValueText(tr("auto (hidden / heads)"));
    mf->addRow(tr("Head dim"), headDim);
    mf->addRow(tr("Intermediate size"), addSpin(QStringLiteral("model.intermediate_size"), 0));
    mf->addRow(tr("Vocabulary"), addSpin(QStringLiteral("model.vocab_size"), 0));
    mf->addRow(tr("Max positions"), addSpin(QStringLiteral("model.max_positions"), 0));
    m_tie = new QCheckBox(tr("Tie input and output embeddings"), model);
    m_tie->setObjectName(QStringLiteral("model.tie_embeddings"));
    m_fields.insert(m_tie->objectName(), m_tie);
    connect(m_tie, &QCheckBox::toggled, this, &RunConfigForm::onEdited);
    mf->addRow(QString(), m_tie);

    auto *train = new QGroupBox(tr("Training"), this);
    auto *tf = new QFormLayout(train);
    tf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    tf->addRow(tr("Mode"), addCombo(QStringLiteral("train.mode"), enumNames({TrainMode::Full, TrainMode::Lora, TrainMode::Freeze})));
    tf->addRow(tr("LoRA rank"), addSpin(QStringLiteral("train.lora.rank"), 0));
    m_alpha = new QDoubleSpinBox(train);
    m_alpha->setObjectName(QStringLiteral("train.lora.alpha"));
    m_alpha->setRange(0, 1e6);
    m_alpha->setDecimals(2);
    m_fields.insert(m_alpha->objectName(), m_alpha);
    connect(m_alpha, &QDoubleSpinBox::valueChanged, this, &RunConfigForm::onEdited);
    tf->addRow(tr("LoRA alpha"), m_alpha);
    m_targets = new QLineEdit(train);
    m_targets->setObjectName(QStringLiteral("train.lora.targets"));
    m_targets->setPlaceholderText(QStringLiteral("q_proj, k_proj, v_proj, o_proj"));
    m_fields.insert(m_targets->objectName(), m_targets);
    connect(m_targets, &QLineEdit::textEdited, this, &RunConfigForm::onEdited);
    tf->addRow(tr("LoRA targets"), m_targets);
    tf->addRow(tr("Optimizer"), addCombo(QStringLiteral("train.optimizer"), enumNames({OptimizerKind::AdamW, OptimizerKind::Adam, OptimizerKind::Sgd, OptimizerKind::Adagrad,
                                                                                      OptimizerKind::RmsProp, OptimizerKind::AdamW8bit, OptimizerKind::Adafactor})));
    tf->addRow(tr("Precision"), addCombo(QStringLiteral("train.precision"), enumNames({Precision::Fp32, Precision::Bf16Mixed, Precision::Bf16, Precision::Fp16Mixed})));
    tf->addRow(tr("Sequence length"), addSpin(QStringLiteral("train.seq_len"), 0));
    tf->addRow(tr("Micro-batch"), addSpin(QStringLiteral("train.micro_batch"), 0));
    tf->addRow(tr("Grad accumulation"), addSpin(QStringLiteral("train.grad_accum"), 0));
    m_recompute = new QCheckBox(tr("Recompute activations"), train);
    m_recompute->setObjectName(QStringLiteral("train.recompute"));
    m_fields.insert(m_recompute->objectName(), m_recompute);
    connect(m_recompute, &QCheckBox::toggled, this, &RunConfigForm::onEdited);
    tf->addRow(QString(), m_recompute);
    tf->addRow(tr("Attention"), addCombo(QStringLiteral("train.attention"), enumNames({AttentionImpl::Auto, AttentionImpl::Math, AttentionImpl::Flash, AttentionImpl::MemEfficient})));
    m_seed = new QLineEdit(train);
    m_seed->setObjectName(QStringLiteral("seed"));
    m_seed->setMaximumWidth(170);
    m_fields.insert(m_seed->objectName(), m_seed);
    connect(m_seed, &QLineEdit::textEdited, this, &RunConfigForm::onEdited);
    tf->addRow(tr("Seed"), m_seed);

    auto *columns = new QHBoxLayout;
    columns->addWidget(model, 1);
    columns->addWidget(train, 1);
    outer->addLayout(columns);
    m_issueLabel = new QLabel(this);
    m_issueLabel->setObjectName(QStringLiteral("issueLabel"));
    m_issueLabel->setWordWrap(true);
    m_issueLabel->setTextFormat(Qt::PlainText);
    m_issueLabel->setStyleSheet(QStringLiteral("color: #b02020;"));
    outer->addWidget(m_issueLabel);
    outer->addStretch(1);
}

QSpinBox *RunConfigForm::addSpin(const QString &field, int minimum)
{
    auto *spin = new QSpinBox(this);
    spin->setObjectName(field);
    spin->setRange(minimum, INT_MAX);
    spin->setGroupSeparatorShown(true);
    // The INT_MAX range would otherwise size every box for ten digits.
    spin->setMinimumWidth(90);
    spin->setMaximumWidth(170);
    m_fields.insert(field, spin);
    connect(spin, &QSpinBox::valueChanged, this, &RunConfigForm::onEdited);
    return spin;
}

QComboBox *RunConfigForm::addCombo(const QString &field, const QStringList &names)
{
    auto *combo = new QComboBox(this);
    combo->setObjectName(field);
    combo->addItems(names);
    combo->setMaximumWidth(170);
    m_fields.insert(field, combo);
    connect(combo, &QComboBox::currentIndexChanged, this, &RunConfigForm::onEdited);
    return combo;
}

QWidget *RunConfigForm::fieldWidget(const QString &field) const
{
    return m_fields.value(field, nullptr);
}

void RunConfigForm::setConfig(const RunConfig &config)
{
    m_base = config;
    m_loading = true;
    auto spin = [this](const char *field, int64_t v) { static_cast<QSpinBox *>(m_fields.value(QString::fromLatin1(field)))->setValue(toInt(v)); };
    auto combo = [this](const char *field, const char *name) {
        auto *c = static_cast<QComboBox *>(m_fields.value(QString::fromLatin1(field)));
        c->setCurrentIndex(c->findText(QString::fromLatin1(name)));
    };
    const ModelShape &m = config.model;
    spin("model.layers", m.layers);
    spin("model.hidden_size", m.hiddenSize);
    spin("model.attention_heads", m.attentionHeads);
    spin("model.kv_heads", m.kvHeads);
    spin("model.head_dim", m.headDim);
    spin("model.intermediate_size", m.intermediateSize);
    spin("model.vocab_size", m.vocabSize);
    spin("model.max_positions", m.maxPositions);
    m_tie->setChecked(m.tieEmbeddings);
    const TrainConfig &t = config.train;
    combo("train.mode", toString(t.mode));
    spin("train.lora.rank", t.lora.rank);
    m_alpha->setValue(t.lora.alpha);
    QStringList targets;
    for (const auto &s : t.lora.targets)
        targets << QString::fromStdString(s);
    m_targets->setText(targets.join(QStringLiteral(", ")));
    combo("train.optimizer", toString(t.optimizer.kind));
    combo("train.precision", toString(t.precision));
    spin("train.seq_len", t.seqLen);
    spin("train.micro_batch", t.microBatch);
    spin("train.grad_accum", t.gradAccum);
    m_recompute->setChecked(t.recompute);
    combo("train.attention", toString(t.attention));
    m_seed->setText(QString::number(config.seed));
    m_loading = false;
    onEdited();
}

RunConfig RunConfigForm::config() const
{
    RunConfig c = m_base;
    auto spin = [this](const char *field) { return static_cast<int64_t>(static_cast<QSpinBox *>(m_fields.value(QString::fromLatin1(field)))->value()); };
    auto combo = [this](const char *field) { return static_cast<QComboBox *>(m_fields.value(QString::fromLatin1(field)))->currentText().toStdString(); };
    c.model.layers = spin("model.layers");
    c.model.hiddenSize = spin("model.hidden_size");
    c.model.attentionHeads = spin("model.attention_heads");
    c.model.kvHeads = spin("model.kv_heads");
    c.model.headDim = spin("model.head_dim");
    c.model.intermediateSize = spin("model.intermediate_size");
    c.model.vocabSize = spin("model.vocab_size");
    c.model.maxPositions = spin("model.max_positions");
    c.model.tieEmbeddings = m_tie->isChecked();
    if (auto v = parseEnum<TrainMode>(combo("train.mode")))
        c.train.mode = *v;
    c.train.lora.rank = spin("train.lora.rank");
    c.train.lora.alpha = m_alpha->value();
    c.train.lora.targets.clear();
    for (const QString &s : m_targets->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
        if (!s.trimmed().isEmpty())
            c.train.lora.targets.push_back(s.trimmed().toStdString());
    if (auto v = parseEnum<OptimizerKind>(combo("train.optimizer")))
        c.train.optimizer.kind = *v;
    if (auto v = parseEnum<Precision>(combo("train.precision")))
        c.train.precision = *v;
    c.train.seqLen = spin("train.seq_len");
    c.train.microBatch = spin("train.micro_batch");
    c.train.gradAccum = spin("train.grad_accum");
    c.train.recompute = m_recompute->isChecked();
    if (auto v = parseEnum<AttentionImpl>(combo("train.attention")))
        c.train.attention = *v;
    bool ok = false;
    const qulonglong seed = m_seed->text().trimmed().toULongLong(&ok);
    if (ok)
        c.seed = seed;
    return c;
}

void RunConfigForm::onEdited()
{
    if (m_loading)
        return;
    const bool lora = static_cast<QComboBox *>(m_fields.value(QStringLiteral("train.mode")))->currentText() == QLatin1String(toString(TrainMode::Lora));
    m_fields.value(QStringLiteral("train.lora.rank"))->setEnabled(lora);
    m_alpha->setEnabled(lora);
    m_targets->setEnabled(lora);
    validate();
    Q_EMIT changed();
}

void RunConfigForm::validate()
{
    m_issues.clear();
    bool seedOk = false;
    m_seed->text().trimmed().toULongLong(&seedOk);
    if (!seedOk)
        m_issues.push_back({"seed", "must be a whole number from 0 to 18446744073709551615"});
    for (auto &issue : validateRunConfig(config()))
        m_issues.push_back(std::move(issue));

    QMap<QWidget *, QStringList> messages;
    QStringList lines;
    for (const auto &issue : m_issues) {
        const QString field = QString::fromStdString(issue.field);
        const QString message = QString::fromStdString(issue.message);
        lines << field + QStringLiteral(": ") + message;
        // "train.lora.targets[2]" belongs to the targets field.
        for (auto it = m_fields.cbegin(); it != m_fields.cend(); ++it)
            if (field == it.key() || field.startsWith(it.key() + QLatin1Char('[')) || field.startsWith(it.key() + QLatin1Char('.')))
                messages[it.value()] << message;
    }
    for (QWidget *w : std::as_const(m_fields)) {
        const bool bad = messages.contains(w);
        if (w->property(kInvalidProperty).toBool() == bad && !bad)
            continue;
        w->setProperty(kInvalidProperty, bad);
        w->setStyleSheet(bad ? QStringLiteral("background-color: #ffd0d0; color: #800000;") : QString());
        w->setToolTip(bad ? messages.value(w).join(QLatin1Char('\n')) : QString());
    }
    m_issueLabel->setText(lines.join(QLatin1Char('\n')));
    m_issueLabel->setVisible(!lines.isEmpty());
}

} // namespace pb::ui
