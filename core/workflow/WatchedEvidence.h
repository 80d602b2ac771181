#pragma once
// The user's own watched runs as evidence for the later stages: two watched runs of the same config,
// one on a single device and one over N ranks, are a scaling step; a watched run that resumed from
// the job's own checkpoint, set beside an uninterrupted watched run of the same config, is a
// restoration proof when the losses of the steps both ran agree.
#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pb {

class HistoryStore;

struct WatchedScaling {
    int64_t singleRunId = 0, scaledRunId = 0;
    int gpus = 0;
    double tokensPerSecondOne = 0, tokensPerSecondN = 0;
    double efficiency = 0;               // tokens/s on N / (N x tokens/s on one)
};

// The newest finished pair for `configHash` (world size 1 and > 1, both with a measured tokens/s).
std::optional<WatchedScaling> watchedScaling(const HistoryStore &store, const std::string &configHash);

struct WatchedRestore {
    bool pass = false;
    int64_t uninterruptedRunId = 0, resumedRunId = 0;
    int64_t firstResumedStep = 0;        // the first step the resumed run reported
    int64_t comparedSteps = 0;           // steps both runs reported from there on
    double maxAbsLossDiff = 0;
    double tolerance = 0;
    // "bitwise" (no tolerance, no reference that varied), "tolerance" (the given one) or "envelope":
    // reference runs (more uninterrupted watched runs) differ from the first by up to
    // referenceMaxAbsLossDiff, and the resumed run passes within envelopeMargin times that (at least
    // times one unit in the last place of the float32 loss, the least variation a loss can show).
    std::string kind = "bitwise";
    std::vector<int64_t> referenceRunIds;
    double referenceMaxAbsLossDiff = 0;
    double envelopeMargin = 4;
    std::string message;
    QJsonObject toJson() const;
};

// Compares the losses of the steps both runs reported, from the resumed run's first step on.
// Throws InvalidInputError naming the option ("--uninterrupted-run", "--resumed-run") when a run is
// not a finished watched run with losses, they are of different configs, or the resumed run did
// not resume (its first step is 1).
// A reference (a finished watched run of the same config) is compared with the uninterrupted run over
// the same steps. Throws InvalidInputError("--reference-run"/"--envelope-margin") for a bad one.
WatchedRestore compareWatchedRestore(const HistoryStore &store, int64_t uninterruptedRunId, int64_t resumedRunId, double tolerance,
                                     const std::vector<int64_t> &referenceRunIds = {}, double envelopeMargin = 4);

// Records the comparison as a run of kind "restore-check" of the resumed run's config; returns its id.
int64_t recordWatchedRestore(const QString &database, const WatchedRestore &restore);

} // namespace pb
