#pragma once
// Shared by the history tests: deterministic samples and file helpers.
#include "result/PilotTypes.h"
#include "history/HistoryTypes.h"

#include <QCryptographicHash>
#include <QFile>
#include <QJsonObject>

namespace pb::test {

// Values exactly representable in binary, different in every column, so a swapped column shows.
inline StepSample sampleAt(int64_t step)
{
    StepSample s;
    s.step = step;
    s.phase = step <= 2 ? Phase::Warmup : Phase::Train;
    s.stepTimeMs = 40.0 + double(step % 7) * 0.25;
    s.forwardMs = 15.5 + double(step % 3);
    s.backwardMs = 20.25;
    s.optimizerMs = 4.0 + double(step % 5) * 0.125;
    s.dataWaitMs = double(step % 2) * 0.5;
    s.allocatedBytes = 1000000 + step;
    s.reservedBytes = 2000000 + 2 * step;
    s.peakAllocatedBytes = 1500000 + 3 * step;
    s.deviceUsedBytes = 3000000000LL + step;
    s.tokens = 1024;
    s.loss = 10.0 - double(step) / 1024.0;
    s.learningRate = 1e-4 * double(step % 11);
    s.gradNorm = 1.0 + double(step % 13) / 8.0;
    return s;
}

inline bool sameSample(const StepSample &a, const StepSample &b)
{
    return a.step == b.step && a.phase == b.phase && a.stepTimeMs == b.stepTimeMs && a.forwardMs == b.forwardMs
        && a.backwardMs == b.backwardMs && a.optimizerMs == b.optimizerMs && a.dataWaitMs == b.dataWaitMs
        && a.allocatedBytes == b.allocatedBytes && a.reservedBytes == b.reservedBytes && a.peakAllocatedBytes == b.peakAllocatedBytes
        && a.deviceUsedBytes == b.deviceUsedBytes && a.tokens == b.tokens && a.loss == b.loss && a.learningRate == b.learningRate
        && a.gradNorm == b.gradNorm;
}

inline RunStart pilotStart(const QString &model, const QString &device, int seqLen)
{
    RunStart s;
    s.kind = QStringLiteral("pilot");
    s.name = QStringLiteral("pilot of ") + model;
    s.model = model;
    s.device = device;
    s.configJson = QJsonObject {{QStringLiteral("model"), QJsonObject {{QStringLiteral("preset"), model}}},
                                {QStringLiteral("train"), QJsonObject {{QStringLiteral("seq_len"), seqLen}, {QStringLiteral("micro_batch"), 4}}}};
    s.configHash = "hash-" + model.toStdString() + "-" + std::to_string(seqLen);
    s.environmentJson = QJsonObject {{QStringLiteral("device"), device}};
    return s;
}

inline QByteArray fileSha256(const QString &path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256).toHex();
}

} // namespace pb::test
