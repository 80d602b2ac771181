#pragma once
// How every kind of run enters the history, for both front ends: the same start fields, and a run
// that was begun always ends with a verdict (an error after beginRun records it failed, or
// cancelled, with the message, and the error still reaches the caller).
#include "config/RunConfig.h"
#include "history/HistoryWriter.h"

#include <QJsonObject>
#include <QString>

#include <exception>
#include <string>

namespace pb {

// Name, model (preset or family), device, config and its hash; environment left for the caller.
RunStart runStartFor(const RunConfig &config, const QString &kind, const std::string &device);

// Ends run `runId` as failed (cancelled when the error is a cancellation) with the error's message
// and waits for it to be committed. Never throws: a writer that has failed leaves the run to be
// found interrupted when the history is next opened.
void recordRunError(HistoryWriter &writer, int64_t runId, const std::exception &error);

// Runs `body` for a begun run; an exception ends the run through recordRunError, then propagates.
template <typename Body>
auto guardRun(HistoryWriter &writer, int64_t runId, Body &&body) -> decltype(body())
{
    try {
        return body();
    } catch (const std::exception &e) {
        recordRunError(writer, runId, e);
        throw;
    }
}

} // namespace pb
