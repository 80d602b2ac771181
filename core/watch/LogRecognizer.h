#pragma once
// What a watched command's own output says, for jobs that run without the probe: the Hugging Face
// Trainer's logged dicts ({'loss': 2.31, 'learning_rate': 5e-05, 'epoch': 0.1}), tqdm progress
// ("12/100 [00:03<00:20, 4.21it/s]" or "1.73s/it"), and out-of-memory errors from CUDA, HIP,
// torch.OutOfMemoryError and the kernel's OOM killer. Pure functions over one line of text.
#include <QString>

#include <optional>

namespace pb::watch {

struct RecognizedLine {
    // TrainerLog: a dict the Trainer printed (ProgressCallback / PrinterCallback), either as Python
    // floats ({'loss': 2.3456}) or, since the callbacks format floats with "{:.4g}", as strings
    // ({'loss': '2.346'}). loss, learningRate and gradNorm come only from the keys 'loss',
    // 'learning_rate' and 'grad_norm', so an evaluation dict ({'eval_loss': ...}) and the
    // end-of-training summary ({'train_runtime': ..., 'train_loss': ...}) are TrainerLogs with those
    // unset: eval_loss is a validation figure and train_loss the average over the whole run, neither
    // is the loss of the steps just trained. A TrainerLog is never a step; steps come from tqdm.
    // TqdmProgress: a tqdm bar (the Trainer's own, Lightning's, a plain loop's) counting iterations;
    // bars in other units ("examples/s", unit_scale's "1.2kit/s") are not steps and are not read.
    // TrainerArguments: the line of a printed TrainingArguments that sets logging_steps
    // ("logging_steps=10,"), which says how many steps each Trainer dict with a loss stands for.
    enum class Kind { TrainerLog, TqdmProgress, TrainerArguments };
    Kind kind = Kind::TrainerLog;
    std::optional<double> loss;          // Trainer 'loss'; tqdm: postfix loss / train_loss (Lightning)
    std::optional<double> learningRate;
    std::optional<double> epoch;
    std::optional<double> gradNorm;
    std::optional<long long> step;       // tqdm: the counter before the slash
    std::optional<long long> total;      // tqdm: after the slash; unset for "?" or a bar without total
    std::optional<double> secondsPerStep; // from it/s (inverted) or s/it; unset for "?it/s"
    std::optional<long long> loggingSteps; // TrainerArguments: logging_steps (a whole number of steps)
    // tqdm: the bar's description ("Epoch 0", "Validation DataLoader 0", "Loading checkpoint
    // shards"), empty when it has none (the Trainer's bars), so a caller can tell the training bar
    // from the others that count iterations too.
    QString description;
};

// nullopt for a line that says nothing we read. Tolerates ANSI colour codes and tqdm's \r updates
// (the caller passes the text after the last \r; a line that still holds \r is read after its last
// one). A Trainer dict may follow a launcher's rank tag ("[rank0]: {...}") but no other text.
std::optional<RecognizedLine> recognizeLogLine(const QString &line);

// True when the line reports running out of device (or host) memory: "CUDA out of memory. Tried to
// allocate" and its HIP twin from the caching allocator, a line that starts with (after rank tags)
// "torch.OutOfMemoryError: " or "torch.cuda.OutOfMemoryError: ", "CUDA error: out of memory" /
// "HIP error: out of memory", the CPU allocator's "DefaultCPUAllocator: not enough memory" / "can't
// allocate memory", and the kernel's "Out of memory: Killed process" (also the memory-cgroup and
// older kernels' forms). Case-sensitive and anchored on those exact phrases, so prose that merely
// mentions memory ("checking for out of memory conditions") or source shown in a traceback
// ("except torch.cuda.OutOfMemoryError:") is not a verdict. The reason is the line trimmed.
bool isOutOfMemoryLine(const QString &line);
// The out-of-memory message in `line` (at most 400 characters around it), or "" when there is none.
QString outOfMemoryText(const QString &line);

} // namespace pb::watch
