#include "config/RunConfigForm.h"
#include "config/FieldSpinBox.h"

#include "config/ExpertsGroup.h"
#include "config/FormNumbers.h"
#include "config/GlobalLayersGroup.h"
#include "config/LinearAttentionGroup.h"
#include "config/ModelTraitsText.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>

#include <climits>

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
const char *kHelpProperty = "fieldHelp";

int toInt(int64_t v)
{
    return v > INT_MAX ? INT_MAX : static_cast<int>(v);
}

// A spin box shows its value rounded to its decimals. While it still shows the base value, the
// base value is kept exactly, so opening and saving a config leaves it (and its hash) unchanged.
double spinValue(const QDoubleSpinBox *box, double base)
{
    return box->textFromValue(box->value()) == box->textFromValue(base) ? base : box->value();
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
    // A mixture of experts: 0 experts is a dense model (the rest of model.moe comes with the preset
    // or imported config and is kept as it is).
    mf->addRow(tr("Experts (0: dense)"), addSpin(QStringLiteral("model.moe.experts"), 0));
    mf->addRow(tr("Experts per token"), addSpin(QStringLiteral("model.moe.experts_per_token"), 0));
    mf->addRow(tr("Expert width"), addSpin(QStringLiteral("model.moe.expert_intermediate_size"), 0));
    m_tie = new QCheckBox(tr("Tie input and output embeddings"), model);
    m_tie->setObjectName(QStringLiteral("model.tie_embeddings"));
    m_fields.insert(m_tie->objectName(), m_tie);
    connect(m_tie, &QCheckBox::toggled, this, &RunConfigForm::onEdited);
    mf->addRow(QString(), m_tie);
    // The traits that set this family apart from Llama, in words; edited under "Architecture".
    m_traitsSummary = new QLabel(model);
    m_traitsSummary->setObjectName(QStringLiteral("traitsSummary"));
    m_traitsSummary->setWordWrap(true);
    m_traitsSummary->setTextFormat(Qt::PlainText);
    mf->addRow(tr("Architecture"), m_traitsSummary);

    auto *train = new QGroupBox(tr("Training"), this);
    auto *tf = new QFormLayout(train);
    tf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    auto *mode = addCombo(QStringLiteral("train.mode"), enumNames({TrainMode::Full, TrainMode::Lora, TrainMode::Qlora, TrainMode::Freeze}));
    mode->setToolTip(tr("full: every weight trains; lora: adapters over a frozen 16-bit base; qlora: adapters over a frozen base stored in 4-bit NF4 "
                        "(4.127 bits a weight), dequantised for each matmul; freeze: only the parameters named below train"));
    tf->addRow(tr("Mode"), mode);
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
    tf->addRow(tr("Precision"), addCombo(QStringLiteral("train.precision"), enumNames({Precision::Fp32, Precision::Bf16Mixed, Precision::Bf16, Precision::Fp16Mixed, Precision::Fp8Rowwise, Precision::Fp8Tensorwise})));
    tf->addRow(tr("Sequence length"), addSpin(QStringLiteral("train.seq_len"), 0));
    tf->addRow(tr("Micro-batch"), addSpin(QStringLiteral("train.micro_batch"), 0));
    tf->addRow(tr("Grad accumulation"), addSpin(QStringLiteral("train.grad_accum"), 0));
    m_recompute = new QCheckBox(tr("Recompute activations"), train);
    m_recompute->setObjectName(QStringLiteral("train.recompute"));
    m_fields.insert(m_recompute->objectName(), m_recompute);
    connect(m_recompute, &QCheckBox::toggled, this, &RunConfigForm::onEdited);
    tf->addRow(QString(), m_recompute);
    tf->addRow(tr("Attention"), addCombo(QStringLiteral("train.attention"), enumNames({AttentionImpl::Auto, AttentionImpl::Math, AttentionImpl::Flash, AttentionImpl::MemEfficient})));
    auto *kernels = addCombo(QStringLiteral("train.kernels"), enumNames({KernelPath::Eager, KernelPath::Fused}));
    kernels->setToolTip(tr("eager: Transformers' ops; fused: the language-model head and its cross-entropy in chunks of tokens, never the full logits"));
    tf->addRow(tr("Kernels"), kernels);
    m_cudaGraph = new QCheckBox(tr("CUDA graph of the step"), train);
    m_cudaGraph->setObjectName(QStringLiteral("train.cuda_graph"));
    m_cudaGraph->setToolTip(tr("The step captured once and replayed while batches keep its shape (AdamW on a CUDA device); a batch of another shape ends it"));
    m_fields.insert(m_cudaGraph->objectName(), m_cudaGraph);
    connect(m_cudaGraph, &QCheckBox::toggled, this, &RunConfigForm::onEdited);
    tf->addRow(QString(), m_cudaGraph);
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

    m_moreToggle = new QToolButton(this);
    m_moreToggle->setObjectName(QStringLiteral("moreSettingsToggle"));
    m_moreToggle->setText(tr("Schedule, validation, checkpoints, data, job and architecture"));
    m_moreToggle->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_moreToggle->setArrowType(Qt::RightArrow);
    m_moreToggle->setCheckable(true);
    m_moreToggle->setAutoRaise(true);
    outer->addWidget(m_moreToggle);
    m_more = new QWidget(this);
    m_more->setObjectName(QStringLiteral("moreSettings"));

    auto *schedule = new QGroupBox(tr("Learning-rate schedule"), m_more);
    auto *sf = new QFormLayout(schedule);
    sf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    sf->addRow(tr("Kind"), addCombo(QStringLiteral("train.schedule.kind"), enumNames({ScheduleKind::Constant, ScheduleKind::Cosine, ScheduleKind::Linear})));
    sf->addRow(tr("Warmup steps"), addSpin(QStringLiteral("train.schedule.warmup_steps"), 0));
    sf->addRow(tr("Total steps"), addSpin(QStringLiteral("train.schedule.total_steps"), 0));
    m_minLrRatio = new QDoubleSpinBox(schedule);
    m_minLrRatio->setObjectName(QStringLiteral("train.schedule.min_lr_ratio"));
    // Above 1 is refused by the validator, in words, rather than clamped here without a word.
    m_minLrRatio->setRange(0, 1e6);
    m_minLrRatio->setDecimals(4);
    m_minLrRatio->setSingleStep(0.05);
    m_minLrRatio->setMaximumWidth(170);
    m_fields.insert(m_minLrRatio->objectName(), m_minLrRatio);
    connect(m_minLrRatio, &QDoubleSpinBox::valueChanged, this, &RunConfigForm::onEdited);
    sf->addRow(tr("Min LR ratio"), m_minLrRatio);

    auto *runs = new QGroupBox(tr("Validation and checkpoints"), m_more);
    auto *rf = new QFormLayout(runs);
    rf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    auto *validationEvery = addSpin(QStringLiteral("validation.every_steps"), 0);
    validationEvery->setSpecialValueText(tr("never"));
    rf->addRow(tr("Validate every (steps)"), validationEvery);
    rf->addRow(tr("Validation batches"), addSpin(QStringLiteral("validation.batches"), 0));
    auto *checkpointEvery = addSpin(QStringLiteral("checkpoint.every_steps"), 0);
    checkpointEvery->setSpecialValueText(tr("never"));
    rf->addRow(tr("Checkpoint every (steps)"), checkpointEvery);
    rf->addRow(tr("Checkpoint folder"), addPath(QStringLiteral("checkpoint.dir"), tr("none unless the command names one"), true));

    auto *job = new QGroupBox(tr("Job"), m_more);
    auto *jf = new QFormLayout(job);
    jf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    jf->addRow(tr("Unit"), addCombo(QStringLiteral("job.unit"), enumNames({JobUnit::Tokens, JobUnit::Epochs})));
    jf->addRow(tr("Amount (tokens or epochs)"), addNumber(QStringLiteral("job.amount"), QStringLiteral("1e9")));
    jf->addRow(tr("Tokens per epoch"), addNumber(QStringLiteral("job.dataset_tokens"), QStringLiteral("2.5e8")));
    jf->addRow(tr("Deadline (hours)"), addNumber(QStringLiteral("job.deadline_hours"), tr("none")));

    // The model's traits (model.sliding_window, ...): the families' differences from Llama.
    auto *arch = new QGroupBox(tr("Architecture"), m_more);
    auto *af = new QFormLayout(arch);
    auto *window = addSpin(QStringLiteral("model.sliding_window"), 0);
    window->setSpecialValueText(tr("none (full attention)"));
    window->setToolTip(tr("Keys a query sees on sliding layers, itself included"));
    af->addRow(tr("Sliding window"), window);
    auto *globalEvery = addSpin(QStringLiteral("model.global_layers.every"), 0);
    globalEvery->setSpecialValueText(tr("none: every layer slides"));
    globalEvery->setToolTip(tr("With a window: every N-th layer keeps full attention (Gemma 3: 6, Gemma 2: 2)"));
    af->addRow(tr("Full attention every"), globalEvery);
    auto *lastGlobal = addCheck(QStringLiteral("model.last_layer_global"), tr("Last layer keeps full attention"));
    lastGlobal->setToolTip(tr("With a window: the last layer keeps full attention at any depth, as Transformers builds Gemma 4"));
    af->addRow(QString(), lastGlobal);
    af->addRow(tr("Rotated share of head"), addNumber(QStringLiteral("model.partial_rotary"), QStringLiteral("1")));
    af->addRow(tr("Sliding layers' rotary base"), addNumber(QStringLiteral("model.local_rope_theta"), tr("same as full layers")));
    af->addRow(tr("Norm placement"), addCombo(QStringLiteral("model.norm_placement"), enumNames({NormPlacement::Pre, NormPlacement::Post, NormPlacement::Sandwich})));
    af->addRow(QString(), addCheck(QStringLiteral("model.norm_unit_offset"), tr("Norms scale by 1 + weight (Gemma)")));
    af->addRow(tr("Attention logit soft-cap"), addNumber(QStringLiteral("model.attention_softcap"), tr("none")));
    af->addRow(tr("Final logit soft-cap"), addNumber(QStringLiteral("model.final_softcap"), tr("none")));
    af->addRow(tr("Embedding scale"), addNumber(QStringLiteral("model.embedding_scale"), QStringLiteral("1")));
    af->addRow(tr("Residual scale"), addNumber(QStringLiteral("model.residual_scale"), QStringLiteral("1")));
    af->addRow(tr("Logits divisor"), addNumber(QStringLiteral("model.logits_divisor"), QStringLiteral("1")));

    // Routing and latent attention (the sparse families), shown for such a model only.
    m_experts = new ExpertsGroup(m_more);
    for (auto it = m_experts->fields().cbegin(); it != m_experts->fields().cend(); ++it)
        m_fields.insert(it.key(), it.value());
    connect(m_experts, &ExpertsGroup::edited, this, &RunConfigForm::onEdited);
    // A hybrid's Gated DeltaNet layers and gated full attention (Qwen3-Next, Qwen3.5), shown for such a model only.
    m_linear = new LinearAttentionGroup(m_more);
    for (auto it = m_linear->fields().cbegin(); it != m_linear->fields().cend(); ++it)
        m_fields.insert(it.key(), it.value());
    connect(m_linear, &LinearAttentionGroup::edited, this, &RunConfigForm::onEdited);
    // Gemma 4's global layers, shown for such a model only.
    m_global = new GlobalLayersGroup(m_more);
    for (auto it = m_global->fields().cbegin(); it != m_global->fields().cend(); ++it)
        m_fields.insert(it.key(), it.value());
    connect(m_global, &GlobalLayersGroup::edited, this, &RunConfigForm::onEdited);

    auto *data = new QGroupBox(tr("Data"), m_more);
    auto *df = new QFormLayout(data);
    df->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    df->addRow(tr("Kind"), addCombo(QStringLiteral("data.kind"), enumNames({DataKind::Synthetic, DataKind::TokenFile, DataKind::Jsonl})));
    m_dataPathRow = addPath(QStringLiteral("data.path"), tr("token file or JSONL"), false);
    df->addRow(tr("File"), m_dataPathRow);
    // Editable: a file may name a dtype this list lacks, and it must show (in red), not be replaced.
    m_tokenDtype = new QComboBox(data);
    m_tokenDtype->setObjectName(QStringLiteral("data.token_dtype"));
    m_tokenDtype->setEditable(true);
    m_tokenDtype->setInsertPolicy(QComboBox::NoInsert);
    m_tokenDtype->addItems({QStringLiteral("uint16"), QStringLiteral("uint32"), QStringLiteral("npy")});
    m_tokenDtype->setMaximumWidth(170);
    m_fields.insert(m_tokenDtype->objectName(), m_tokenDtype);
    connect(m_tokenDtype, &QComboBox::currentTextChanged, this, &RunConfigForm::onEdited);
    df->addRow(tr("Token dtype"), m_tokenDtype);
    df->addRow(tr("Lengths"), addCombo(QStringLiteral("data.lengths"), enumNames({LengthDistribution::Fixed, LengthDistribution::Uniform, LengthDistribution::FromFile})));
    df->addRow(tr("Min length"), addSpin(QStringLiteral("data.min_length"), 0));
    m_lengthsFileRow = addPath(QStringLiteral("data.lengths_file"), tr("one length per line"), false);
    df->addRow(tr("Lengths file"), m_lengthsFileRow);
    df->addRow(QString(), addCheck(QStringLiteral("data.longest_first"), tr("Longest batch first")));
    df->addRow(QString(), addCheck(QStringLiteral("data.learnable"), tr("Learnable synthetic sequence")));
    df->addRow(tr("Synthetic samples"), addSpin(QStringLiteral("data.synthetic_samples"), 0));
    auto *heldOut = addSpin(QStringLiteral("data.validation_per_mille"), 0);
    heldOut->setSuffix(QStringLiteral(" ‰"));
    df->addRow(tr("Held out for validation"), heldOut);

    // Same two columns as above, so the panel lines up under the model and training groups.
    auto *moreColumns = new QHBoxLayout(m_more);
    moreColumns->setContentsMargins(0, 0, 0, 0);
    auto *left = new QVBoxLayout;
    left->addWidget(schedule);
    left->addWidget(runs);
    left->addWidget(job);
    left->addStretch(1);
    auto *right = new QVBoxLayout;
    right->addWidget(data);
    right->addWidget(arch);
    right->addWidget(m_experts);
    right->addWidget(m_linear);
    right->addWidget(m_global);
    right->addStretch(1);
    moreColumns->addLayout(left, 1);
    moreColumns->addLayout(right, 1);
    outer->addWidget(m_more);
    m_more->setVisible(false);
    connect(m_moreToggle, &QToolButton::toggled, this, [this](bool on) {
        m_more->setVisible(on);
        m_moreToggle->setArrowType(on ? Qt::DownArrow : Qt::RightArrow);
    });
    m_issueLabel = new QLabel(this);
    m_issueLabel->setObjectName(QStringLiteral("issueLabel"));
    m_issueLabel->setWordWrap(true);
    m_issueLabel->setTextFormat(Qt::PlainText);
    m_issueLabel->setStyleSheet(QStringLiteral("color: #b02020;"));
    outer->addWidget(m_issueLabel);
    outer->addStretch(1);
    // Every field says which config path it sets (what --set and the JSON file call it), after
    // its own help where it has one.
    for (auto it = m_fields.cbegin(); it != m_fields.cend(); ++it) {
        const QString help = it.value()->toolTip();
        it.value()->setToolTip((help.isEmpty() ? QString() : help + QStringLiteral("\n")) + tr("Config path: %1").arg(it.key()));
    }
}

QSpinBox *RunConfigForm::addSpin(const QString &field, int minimum)
{
    auto *spin = newFieldSpinBox(this, field, minimum);
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

QCheckBox *RunConfigForm::addCheck(const QString &field, const QString &text)
{
    auto *check = new QCheckBox(text, this);
    check->setObjectName(field);
    m_fields.insert(field, check);
    connect(check, &QCheckBox::toggled, this, &RunConfigForm::onEdited);
    return check;
}

QLineEdit *RunConfigForm::addNumber(const QString &field, const QString &placeholder)
{
    auto *edit = new QLineEdit(this);
    edit->setObjectName(field);
    edit->setPlaceholderText(placeholder);
    edit->setMaximumWidth(170);
    m_fields.insert(field, edit);
    connect(edit, &QLineEdit::textChanged, this, &RunConfigForm::onEdited);
    return edit;
}

QWidget *RunConfigForm::addPath(const QString &field, const QString &placeholder, bool directory)
{
    auto *row = new QWidget(this);
    auto *layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    auto *edit = new QLineEdit(row);
    edit->setObjectName(field);
    edit->setPlaceholderText(placeholder);
    m_fields.insert(field, edit);
    connect(edit, &QLineEdit::textChanged, this, &RunConfigForm::onEdited);
    auto *browse = new QToolButton(row);
    browse->setText(QStringLiteral("…"));
    browse->setToolTip(directory ? tr("Choose a folder") : tr("Choose a file"));
    connect(browse, &QToolButton::clicked, this, [this, edit, directory] {
        const QString start = edit->text().isEmpty() ? QString() : QFileInfo(edit->text()).absolutePath();
        const QString path = directory ? QFileDialog::getExistingDirectory(this, tr("Choose a folder"), edit->text())
                                       : QFileDialog::getOpenFileName(this, tr("Choose a file"), start);
        if (!path.isEmpty())
            edit->setText(path);
    });
    layout->addWidget(edit, 1);
    layout->addWidget(browse);
    return row;
}

QWidget *RunConfigForm::fieldWidget(const QString &field) const
{
    return m_fields.value(field, nullptr);
}

bool RunConfigForm::isExpanded() const
{
    return m_moreToggle->isChecked();
}

void RunConfigForm::setExpanded(bool expanded)
{
    m_moreToggle->setChecked(expanded);
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
    spin("model.moe.experts", m.moe.experts);
    spin("model.moe.experts_per_token", m.moe.expertsPerToken);
    spin("model.moe.expert_intermediate_size", m.moe.expertIntermediateSize);
    m_experts->setModel(m);
    m_linear->setModel(m);
    m_global->setModel(m);
    m_tie->setChecked(m.tieEmbeddings);
    const ModelTraits &mt = m.traits;
    spin("model.sliding_window", mt.slidingWindow);
    spin("model.global_layers.every", mt.globalLayers.every);
    auto number = [this](const char *field, double v, double none) {
        static_cast<QLineEdit *>(m_fields.value(QString::fromLatin1(field)))->setText(v == none ? QString() : formatNumber(v));
    };
    number("model.partial_rotary", mt.partialRotary, 1.0);
    number("model.local_rope_theta", mt.localRopeTheta, 0.0);
    combo("model.norm_placement", toString(mt.normPlacement));
    static_cast<QCheckBox *>(m_fields.value(QStringLiteral("model.norm_unit_offset")))->setChecked(mt.normUnitOffset);
    static_cast<QCheckBox *>(m_fields.value(QStringLiteral("model.last_layer_global")))->setChecked(mt.lastLayerGlobal);
    number("model.attention_softcap", mt.attentionSoftcap, 0.0);
    number("model.final_softcap", mt.finalSoftcap, 0.0);
    number("model.embedding_scale", mt.embeddingScale, 1.0);
    number("model.residual_scale", mt.residualScale, 1.0);
    number("model.logits_divisor", mt.logitsDivisor, 1.0);
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
    m_cudaGraph->setChecked(t.cudaGraph);
    combo("train.attention", toString(t.attention));
    combo("train.kernels", toString(t.kernels));
    m_seed->setText(QString::number(config.seed));

    auto text = [this](const char *field, const QString &v) { static_cast<QLineEdit *>(m_fields.value(QString::fromLatin1(field)))->setText(v); };
    auto check = [this](const char *field, bool v) { static_cast<QCheckBox *>(m_fields.value(QString::fromLatin1(field)))->setChecked(v); };
    combo("train.schedule.kind", toString(t.schedule.kind));
    spin("train.schedule.warmup_steps", t.schedule.warmupSteps);
    spin("train.schedule.total_steps", t.schedule.totalSteps);
    m_minLrRatio->setValue(t.schedule.minLrRatio);
    spin("validation.every_steps", config.validation.everySteps);
    spin("validation.batches", config.validation.batches);
    spin("checkpoint.every_steps", config.checkpoint.everySteps);
    text("checkpoint.dir", QString::fromStdString(config.checkpoint.dir));
    const DataConfig &d = config.data;
    combo("data.kind", toString(d.kind));
    text("data.path", QString::fromStdString(d.path));
    m_tokenDtype->setCurrentText(QString::fromStdString(d.tokenDtype));
    combo("data.lengths", toString(d.lengths));
    spin("data.min_length", d.minLength);
    text("data.lengths_file", QString::fromStdString(d.lengthsFile));
    check("data.longest_first", d.longestFirst);
    check("data.learnable", d.learnable);
    spin("data.synthetic_samples", d.syntheticSamples);
    spin("data.validation_per_mille", d.validationFraction);
    const JobConfig &j = config.job;
    combo("job.unit", toString(j.unit));
    text("job.amount", formatNumber(j.amount));
    text("job.dataset_tokens", formatNumber(j.datasetTokens));
    text("job.deadline_hours", j.deadlineHours ? formatNumber(*j.deadlineHours) : QString());
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
    c.model.moe.experts = spin("model.moe.experts");
    c.model.moe.expertsPerToken = spin("model.moe.experts_per_token");
    c.model.moe.expertIntermediateSize = spin("model.moe.expert_intermediate_size");
    // Routing and latent fields are read back only where the model has them (the group is hidden
    // otherwise), so a dense config keeps its defaults and its hash.
    m_experts->writeTo(c.model);
    m_linear->writeTo(c.model);
    m_global->writeTo(c.model);
    c.model.tieEmbeddings = m_tie->isChecked();
    ModelTraits &mt = c.model.traits;
    mt.slidingWindow = spin("model.sliding_window");
    mt.globalLayers.every = spin("model.global_layers.every");
    // A list of full layers (imported) means nothing without a window and has no widget to clear it.
    if (mt.slidingWindow == 0)
        mt.globalLayers.layers.clear();
    // An empty box is the trait's "none"; an unreadable one keeps the base value (validate() says why).
    auto number = [this](const char *field, double none, double base) {
        const QString text = static_cast<QLineEdit *>(m_fields.value(QString::fromLatin1(field)))->text();
        if (text.trimmed().isEmpty())
            return none;
        const auto v = parseNumber(text);
        return v ? (formatNumber(*v) == formatNumber(base) ? base : *v) : base;
    };
    const ModelTraits &bt = m_base.model.traits;
    mt.partialRotary = number("model.partial_rotary", 1.0, bt.partialRotary);
    mt.localRopeTheta = number("model.local_rope_theta", 0.0, bt.localRopeTheta);
    if (auto v = parseEnum<NormPlacement>(combo("model.norm_placement")))
        mt.normPlacement = *v;
    mt.normUnitOffset = static_cast<QCheckBox *>(m_fields.value(QStringLiteral("model.norm_unit_offset")))->isChecked();
    mt.lastLayerGlobal = static_cast<QCheckBox *>(m_fields.value(QStringLiteral("model.last_layer_global")))->isChecked();
    mt.attentionSoftcap = number("model.attention_softcap", 0.0, bt.attentionSoftcap);
    mt.finalSoftcap = number("model.final_softcap", 0.0, bt.finalSoftcap);
    mt.embeddingScale = number("model.embedding_scale", 1.0, bt.embeddingScale);
    mt.residualScale = number("model.residual_scale", 1.0, bt.residualScale);
    mt.logitsDivisor = number("model.logits_divisor", 1.0, bt.logitsDivisor);
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
    c.train.cudaGraph = m_cudaGraph->isChecked();
    if (auto v = parseEnum<AttentionImpl>(combo("train.attention")))
        c.train.attention = *v;
    if (auto v = parseEnum<KernelPath>(combo("train.kernels")))
        c.train.kernels = *v;
    bool ok = false;
    const qulonglong seed = m_seed->text().trimmed().toULongLong(&ok);
    if (ok)
        c.seed = seed;

    auto text = [this](const char *field) { return static_cast<QLineEdit *>(m_fields.value(QString::fromLatin1(field)))->text(); };
    auto check = [this](const char *field) { return static_cast<QCheckBox *>(m_fields.value(QString::fromLatin1(field)))->isChecked(); };
    ScheduleConfig &s = c.train.schedule;
    if (auto v = parseEnum<ScheduleKind>(combo("train.schedule.kind")))
        s.kind = *v;
    s.warmupSteps = spin("train.schedule.warmup_steps");
    s.totalSteps = spin("train.schedule.total_steps");
    s.minLrRatio = spinValue(m_minLrRatio, m_base.train.schedule.minLrRatio);
    c.validation.everySteps = spin("validation.every_steps");
    c.validation.batches = spin("validation.batches");
    c.checkpoint.everySteps = spin("checkpoint.every_steps");
    c.checkpoint.dir = text("checkpoint.dir").toStdString();
    DataConfig &d = c.data;
    if (auto v = parseEnum<DataKind>(combo("data.kind")))
        d.kind = *v;
    d.path = text("data.path").toStdString();
    d.tokenDtype = m_tokenDtype->currentText().toStdString();
    if (auto v = parseEnum<LengthDistribution>(combo("data.lengths")))
        d.lengths = *v;
    d.minLength = spin("data.min_length");
    d.lengthsFile = text("data.lengths_file").toStdString();
    d.longestFirst = check("data.longest_first");
    d.learnable = check("data.learnable");
    d.syntheticSamples = spin("data.synthetic_samples");
    d.validationFraction = spin("data.validation_per_mille");
    if (auto v = parseEnum<JobUnit>(combo("job.unit")))
        c.job.unit = *v;
    if (auto v = parseNumber(text("job.amount")))
        c.job.amount = *v;
    if (auto v = parseNumber(text("job.dataset_tokens")))
        c.job.datasetTokens = *v;
    const QString deadline = text("job.deadline_hours");
    if (deadline.trimmed().isEmpty())
        c.job.deadlineHours.reset();
    else if (auto v = parseNumber(deadline))
        c.job.deadlineHours = *v;
    return c;
}

void RunConfigForm::onEdited()
{
    if (m_loading)
        return;
    const auto mode = parseEnum<TrainMode>(static_cast<QComboBox *>(m_fields.value(QStringLiteral("train.mode")))->currentText().toStdString());
    const bool lora = mode && usesAdapters(*mode);
    m_fields.value(QStringLiteral("train.lora.rank"))->setEnabled(lora);
    m_alpha->setEnabled(lora);
    m_targets->setEnabled(lora);

    // Fields the current kinds ignore are greyed out, as the LoRA fields are outside LoRA mode.
    // job.dataset_tokens stays open: the validator checks it under either unit, and a greyed field
    // in red could not be put right.
    auto combo = [this](const char *field) { return static_cast<QComboBox *>(m_fields.value(QString::fromLatin1(field)))->currentText().toStdString(); };
    auto field = [this](const char *name) { return m_fields.value(QString::fromLatin1(name)); };
    const auto kind = parseEnum<DataKind>(combo("data.kind"));
    const auto lengths = parseEnum<LengthDistribution>(combo("data.lengths"));
    m_dataPathRow->setEnabled(kind != DataKind::Synthetic);
    m_tokenDtype->setEnabled(kind == DataKind::TokenFile);
    field("data.learnable")->setEnabled(kind == DataKind::Synthetic);
    field("data.synthetic_samples")->setEnabled(kind == DataKind::Synthetic);
    field("data.min_length")->setEnabled(lengths == LengthDistribution::Uniform);
    m_lengthsFileRow->setEnabled(lengths == LengthDistribution::FromFile);
    field("validation.batches")->setEnabled(static_cast<QSpinBox *>(field("validation.every_steps"))->value() > 0);
    const bool sliding = static_cast<QSpinBox *>(field("model.sliding_window"))->value() > 0;
    // Greyed without a window, unless set: a value the validator flags must stay editable.
    field("model.global_layers.every")->setEnabled(sliding || static_cast<QSpinBox *>(field("model.global_layers.every"))->value() > 0);
    field("model.last_layer_global")->setEnabled(sliding || static_cast<QCheckBox *>(field("model.last_layer_global"))->isChecked());
    field("model.local_rope_theta")->setEnabled(sliding || !static_cast<QLineEdit *>(field("model.local_rope_theta"))->text().trimmed().isEmpty());
    // The experts' rows with experts, the latent rows with latent attention, the group with either.
    m_experts->showFor(static_cast<QSpinBox *>(field("model.moe.experts"))->value() > 0);
    const RunConfig current = config();
    m_linear->showSummary(current.model);
    m_global->showSummary(current.model);
    QStringList traits;
    for (const auto &[label, value] : describeModelTraits(current.model))
        traits << QString::fromStdString(label + ": " + value);
    m_traitsSummary->setText(traits.isEmpty() ? tr("Llama's (pre-norm, full attention and rotary)") : traits.join(QLatin1Char('\n')));
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
    auto number = [this](const char *field, bool optional, const char *message) {
        const QString text = static_cast<QLineEdit *>(m_fields.value(QString::fromLatin1(field)))->text();
        if (!(optional && text.trimmed().isEmpty()) && !parseNumber(text))
            m_issues.push_back({field, message});
    };
    number("job.amount", false, "must be a number, like 1e9 or 1000000000");
    number("job.dataset_tokens", false, "must be a number of tokens, like 2.5e8 (0 when the job counts tokens)");
    number("job.deadline_hours", true, "must be a number of hours, or empty for no deadline");
    for (const char *field : {"model.partial_rotary", "model.local_rope_theta", "model.attention_softcap", "model.final_softcap", "model.embedding_scale",
                              "model.residual_scale", "model.logits_divisor"})
        number(field, true, "must be a number, or empty for the default");
    for (auto &issue : m_experts->parseIssues())
        m_issues.push_back(std::move(issue));
    for (auto &issue : m_linear->parseIssues())
        m_issues.push_back(std::move(issue));
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
        // A field's own help (set when the form is built) comes back once its problem is gone.
        if (!w->property(kHelpProperty).isValid())
            w->setProperty(kHelpProperty, w->toolTip());
        const QString help = w->property(kHelpProperty).toString();
        w->setProperty(kInvalidProperty, bad);
        w->setStyleSheet(bad ? QStringLiteral("background-color: #ffd0d0; color: #800000;") : QString());
        w->setToolTip(bad ? messages.value(w).join(QLatin1Char('\n')) + (help.isEmpty() ? QString() : QStringLiteral("\n\n") + help) : help);
    }
    // A problem inside the folded panel must not stay out of sight.
    for (auto it = messages.cbegin(); it != messages.cend(); ++it)
        if (m_more->isAncestorOf(it.key()))
            setExpanded(true);
    m_issueLabel->setText(lines.join(QLatin1Char('\n')));
    m_issueLabel->setVisible(!lines.isEmpty());
}

} // namespace pb::ui
