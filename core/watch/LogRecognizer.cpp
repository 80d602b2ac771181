#include "watch/LogRecognizer.h"

#include <QRegularExpression>
#include <QStringList>

#include <algorithm>
#include <array>

namespace pb::watch {
namespace {

// Every pattern here runs on every output line of a long job, and a line can be huge (a dumped
// tensor, a progress bar that never saw a newline). So each one starts on a literal or on a
// lookbehind that fails at once, uses possessive quantifiers where a backtrack could only fail
// again, and bounds the free-text parts; none can go quadratic on a 100 kB line.

// Terminal control sequences: tqdm colours its bar (colour=...) and moves between stacked bars with
// ESC[A; rich and coloured loggers wrap whole lines. CSI, OSC and the two-byte escapes.
const QRegularExpression &ansiEscape()
{
    static const QRegularExpression re(
        QStringLiteral(R"re(\x1b(?:\[[0-?]*+[ -/]*+[@-~]|\][^\x07\x1b]*+(?:\x07|\x1b\\)?|[@-Z\\-_]))re"));
    return re;
}

// tqdm's r_bar, tqdm/std.py format_meter:
//   '| {n_fmt}/{total_fmt} [{elapsed_str}<{remaining_str}, {rate_fmt}{postfix}]'
// and, without a total, '{n_fmt}{unit} [{elapsed_str}, {rate_fmt}{postfix}]'. elapsed and remaining
// are format_interval's [H:]MM:SS (remaining "?" before the first rate). rate_fmt is
// f'{rate:5.2f}' + unit + '/s', or f'{inv_rate:5.2f}s/' + unit once an iteration takes over a
// second, or '?' + unit + '/s'. Only unit "it" is a step: unit_scale turns n into "12.0" or "1.2k"
// and the rate into "1.2kit/s", a custom unit into "10.5 examples/s", and the lookbehind, the
// digits-then-"it/s" shape and the integer counter refuse all of those. Lightning's bar_format uses
// rate_noinv_fmt, always it/s, and its metrics ride in the postfix.
const QRegularExpression &tqdmMeter()
{
    static const QRegularExpression re(QStringLiteral(
        R"re((?<![\d.])(\d++)(?:/(\d++|\?) \[(?:\d++:)?\d\d:\d\d<(?:(?:\d++:)?\d\d:\d\d|\?)|it \[(?:\d++:)?\d\d:\d\d), *+(\?|\d++\.\d++)(it/s|s/it)(?:, ([^\]]{0,1000}+))?\])re"));
    return re;
}

// One entry of a printed Python dict: 'key': value. The value runs to the next comma, which cuts
// "tensor(1.2, device='cuda:0')" after its number, all that is read of it.
const QRegularExpression &dictEntry()
{
    static const QRegularExpression re(QStringLiteral(R"re((['"])([A-Za-z_][\w./-]*+)\1:\s*+([^,{}]*+))re"));
    return re;
}

// Launchers tag each line of a rank's output: torchrun "[rank0]: ", its --tee "[default0]:".
const QRegularExpression &rankTags()
{
    static const QRegularExpression re(QStringLiteral(R"re(^(?:\[[^\]]{0,64}+\]:?\s*+)*+$)re"));
    return re;
}

// Phrases only an out-of-memory report prints, wherever they sit on the line:
// - c10/cuda/CUDACachingAllocator.cpp: "CUDA out of memory. Tried to allocate " (the ROCm build's
//   hipified allocator says "HIP out of memory. Tried to allocate ");
// - c10/cuda/CUDAException.cpp: "CUDA error: " + cudaGetErrorString(cudaErrorMemoryAllocation),
//   which is "out of memory" (HIP the same), and the driver-API check's "CUDA driver error: ";
// - c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator: not enough memory" / "can't allocate memory";
// - mm/oom_kill.c: pr_err("%s: Killed process %d (%s) total-vm:...") with "Out of memory" or
//   "Memory cgroup out of memory"; kernels before 5.1 said "Out of memory: Kill process %d (%s)
//   score ... or sacrifice child" and then "Killed process %d (%s) total-vm:...".
// "Tried to allocate" and "total-vm:" keep a traceback's own source ("if 'CUDA out of memory' in
// str(e):") and a plain "Killed" from counting.
const QRegularExpression &oomPhrase()
{
    static const QRegularExpression re(QStringLiteral(
        R"re(\b(?:CUDA|HIP) out of memory\. Tried to allocate |\b(?:CUDA|HIP)(?: driver)? error: out of memory\b|DefaultCPUAllocator: (?:not enough memory|can't allocate memory)|\b(?:Out of memory|Memory cgroup out of memory): Kill(?:ed)? process \d++ \(|\bKilled process \d++ \([^\n]{1,32}?\),? total-vm:)re"));
    return re;
}

// TrainingArguments.__str__ prints one field per line ("logging_steps=10,"); a ratio of the total
// ("logging_steps=0.1") is not a step count and is not read.
const QRegularExpression &loggingStepsArgument()
{
    static const QRegularExpression re(QStringLiteral(R"re(^(?:\[[^\]]{0,64}+\]:?\s*+)*+logging_steps=(\d++),?$)re"));
    return re;
}

// The last line of a Python traceback names the exception first. Anywhere else on a line the name is
// code ("except torch.cuda.OutOfMemoryError:") or prose, not a raised error.
const QRegularExpression &oomException()
{
    static const QRegularExpression re(
        QStringLiteral(R"re(^(?:\[[^\]]{0,64}+\]:?\s*+)*+torch\.(?:cuda\.)?OutOfMemoryError: \S)re"));
    return re;
}

// What a terminal would show last: the text after tqdm's final \r redraw, without escape codes.
QString visibleText(const QString &line)
{
    QStringView v(line);
    while (!v.isEmpty() && (v.back() == u'\r' || v.back() == u'\n'))
        v.chop(1);
    const qsizetype cr = v.lastIndexOf(u'\r');
    if (cr >= 0)
        v = v.mid(cr + 1);
    QString text = v.toString();
    if (text.contains(QChar(0x1b)))
        text.remove(ansiEscape());
    return text;
}

// A number as Python printed it: a float repr (2.3456, 5e-05, nan, inf), the "{:.4g}" string newer
// Trainer callbacks print ('2.346'), NumPy 2's repr (np.float64(2.31)) or a tensor's.
std::optional<double> pythonNumber(QStringView v)
{
    v = v.trimmed();
    static constexpr std::array<QStringView, 5> wrappers {u"np.float64(", u"np.float32(", u"np.float16(",
                                                           u"numpy.float64(", u"tensor("};
    for (const QStringView w : wrappers) {
        if (v.startsWith(w)) {
            v = v.mid(w.size());
            if (v.endsWith(u')'))
                v.chop(1);
            break;
        }
    }
    if (v.size() >= 2 && (v.front() == u'\'' || v.front() == u'"') && v.back() == v.front())
        v = v.mid(1, v.size() - 2);
    bool ok = false;
    const double d = v.trimmed().toDouble(&ok);
    if (!ok)
        return std::nullopt;
    return d;
}

std::optional<RecognizedLine> trainerLog(QStringView text)
{
    text = text.trimmed();
    if (!text.endsWith(u'}'))
        return std::nullopt;
    const qsizetype open = text.indexOf(u'{');
    if (open < 0 || !rankTags().match(text.left(open).toString()).hasMatch())
        return std::nullopt;
    const QString body = text.mid(open + 1, text.size() - open - 2).toString();
    RecognizedLine r;
    r.kind = RecognizedLine::Kind::TrainerLog;
    // Any printed dict ends in '}'; the Trainer's always carry 'loss' (training) or 'epoch' (all of
    // them while training), which a config or batch dict a script prints usually does not.
    bool fromTrainer = false;
    QRegularExpressionMatchIterator it = dictEntry().globalMatch(body);
    while (it.hasNext()) {
        const QRegularExpressionMatch m = it.next();
        const QStringView key = m.capturedView(2);
        const bool isLoss = key == u"loss";
        const bool isEpoch = key == u"epoch";
        if (!isLoss && !isEpoch && key != u"learning_rate" && key != u"grad_norm")
            continue;
        const std::optional<double> value = pythonNumber(m.capturedView(3));
        if (!value)
            continue;
        if (isLoss)
            r.loss = value;
        else if (isEpoch)
            r.epoch = value;
        else if (key == u"learning_rate")
            r.learningRate = value;
        else
            r.gradNorm = value;
        fromTrainer = fromTrainer || isLoss || isEpoch;
    }
    if (!fromTrainer)
        return std::nullopt;
    return r;
}

// The bar's description: what is left of tqdm's l_bar ('{desc}: {percentage:3.0f}%|{bar}| ', or
// '{desc}:  40% ' with ncols=0, or '{desc}: ' without a total) once the percentage and bar go.
QString barDescription(QStringView prefix)
{
    prefix = prefix.trimmed();
    if (prefix.endsWith(u'|')) {
        prefix.chop(1);
        const qsizetype barStart = prefix.lastIndexOf(u'|');
        if (barStart >= 0)
            prefix = prefix.left(barStart);
    }
    if (prefix.endsWith(u'%')) {
        prefix.chop(1);
        while (!prefix.isEmpty() && prefix.back().isDigit())
            prefix.chop(1);
    }
    prefix = prefix.trimmed();
    if (prefix.endsWith(u':'))
        prefix.chop(1);
    return prefix.trimmed().toString();
}

// tqdm's set_postfix joins "key=value" with ", ". Lightning shows metrics logged with prog_bar=True
// there, a per-step value with a "_step" suffix when the metric is also logged per epoch.
std::optional<double> postfixLoss(QStringView postfix)
{
    static constexpr std::array<QStringView, 4> keys {u"train_loss_step", u"loss_step", u"train_loss", u"loss"};
    const QList<QStringView> items = postfix.split(u',');
    for (const QStringView key : keys) {
        for (const QStringView item : items) {
            const QStringView entry = item.trimmed();
            if (entry.size() > key.size() && entry.startsWith(key) && entry.at(key.size()) == u'=')
                return pythonNumber(entry.mid(key.size() + 1));
        }
    }
    return std::nullopt;
}

std::optional<RecognizedLine> tqdmProgress(const QString &text)
{
    // The last meter on the line is the newest state, should redraws arrive without their \r.
    QRegularExpressionMatch last;
    QRegularExpressionMatchIterator it = tqdmMeter().globalMatch(text);
    while (it.hasNext())
        last = it.next();
    if (!last.hasMatch())
        return std::nullopt;
    bool ok = false;
    const long long counter = last.capturedView(1).toLongLong(&ok);
    if (!ok)
        return std::nullopt;
    RecognizedLine r;
    r.kind = RecognizedLine::Kind::TqdmProgress;
    r.step = counter;
    const QStringView total = last.capturedView(2);
    if (!total.isEmpty() && total != u"?") {
        const long long t = total.toLongLong(&ok);
        if (ok)
            r.total = t;
    }
    const QStringView rate = last.capturedView(3);
    if (rate != u"?") {
        const double value = rate.toDouble(&ok);
        // "0.00it/s" says only that no iteration finished yet, not that one takes forever.
        if (ok && value > 0)
            r.secondsPerStep = last.capturedView(4) == u"s/it" ? value : 1.0 / value;
    }
    if (last.lastCapturedIndex() >= 5)
        r.loss = postfixLoss(last.capturedView(5));
    r.description = barDescription(QStringView(text).left(last.capturedStart(0)));
    return r;
}

} // namespace

std::optional<RecognizedLine> recognizeLogLine(const QString &line)
{
    const QString text = visibleText(line);
    if (text.trimmed().isEmpty())
        return std::nullopt;
    if (auto trainer = trainerLog(text))
        return trainer;
    if (text.contains(QLatin1String("logging_steps="))) {
        const QRegularExpressionMatch m = loggingStepsArgument().match(text.trimmed());
        bool ok = false;
        const long long n = m.hasMatch() ? m.capturedView(1).toLongLong(&ok) : 0;
        if (ok && n > 0) {
            RecognizedLine r;
            r.kind = RecognizedLine::Kind::TrainerArguments;
            r.loggingSteps = n;
            return r;
        }
        return std::nullopt;
    }
    return tqdmProgress(text);
}

QString outOfMemoryText(const QString &line)
{
    // The phrases may sit anywhere, even glued to a progress bar that lacked its newline, so they are
    // sought in the whole line; the exception name only counts at the start of what is shown last.
    QString whole = line;
    if (whole.contains(QChar(0x1b)))
        whole.remove(ansiEscape());
    // What is kept is the message itself: in a long line, 400 characters from a little before it.
    if (const QRegularExpressionMatch m = oomPhrase().match(whole); m.hasMatch())
        return whole.mid(std::max<qsizetype>(0, m.capturedStart() - 100), 400).trimmed();
    const QString shown = visibleText(line).trimmed();
    return oomException().match(shown).hasMatch() ? shown.left(400) : QString();
}

bool isOutOfMemoryLine(const QString &line) { return !outOfMemoryText(line).isEmpty(); }

} // namespace pb::watch
