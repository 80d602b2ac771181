#pragma once
// What the history stores about a run, and the shapes the views read back (plain values, no SQL).
#include "result/PilotTypes.h"

#include <QDateTime>
#include <QJsonObject>
#include <QJsonValue>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pb {

// Run kinds and statuses as stored (lower-case words, stable across versions).
const QStringList &historyRunKinds(); // pilot, estimate, restore-check, scale, compare, decision

// Everything known when a run starts. The config and environment are stored as given.
struct RunStart {
    QString kind = QStringLiteral("pilot");
    QString name;
    QString model;                   // preset or family, e.g. "llama-3-8b"
    QString device;                  // "cpu", "cuda:0"
    QString card;                    // catalog card id, "" when none
    QJsonObject configJson;
    std::string configHash;
    QJsonObject environmentJson;
    QStringList tags;
    QString notes;
    std::optional<int64_t> planId;
    std::optional<int64_t> parentRunId; // the baseline of a scaling step, for instance
    QDateTime startedAt;             // invalid: now (UTC)
};

struct RunRecord {
    int64_t id = 0;
    QString uuid;                    // stable across machines; import uses it to skip duplicates
    QString kind;
    QString status;                  // running, done
    QString verdict;                 // "" while running; fits, does-not-fit, failed, cancelled
    QDateTime startedAt;
    QDateTime finishedAt;            // invalid while running
    QString name, model, device, card;
    QJsonObject config;
    std::string configHash;
    QJsonObject environment;
    QJsonObject summary;
    QStringList tags;
    QString notes;
    bool pinnedBaseline = false;
    std::optional<int64_t> planId;
    std::optional<int64_t> parentRunId;
    QString originHost;              // set on imported runs: where it was measured
    std::optional<int64_t> originRunId;
    int64_t sampleCount = 0;
};

// Empty fields do not filter. Dates compare with started_at, inclusive.
struct RunFilter {
    QString kind, verdict, model, card, device, tag, status;
    QDateTime startedFrom, startedTo;
    int limit = 0;                   // 0: all, newest first
};

// One run's samples column by column, ready for plotting (bytes and counts as doubles).
struct SampleSeries {
    int64_t runId = 0;
    std::vector<double> step, stepTimeMs, forwardMs, backwardMs, optimizerMs, dataWaitMs;
    std::vector<double> allocatedBytes, reservedBytes, peakAllocatedBytes, deviceUsedBytes;
    std::vector<double> tokens, loss, learningRate, gradNorm;
    std::vector<Phase> phase;
    size_t size() const { return step.size(); }
    void reserve(size_t n);
};

// One differing dotted path ("train.seq_len", "lora.targets[1]"); Undefined where a side lacks it.
struct ConfigDifference {
    QString path;
    QJsonValue left;
    QJsonValue right;
};

} // namespace pb
