#pragma once
// The events a watched command's probe (resources/python/pilotbench_probe.py) writes as JSON lines
// to the file named by PILOTBENCH_PROBE: "hello" (versions and devices, once per process), "step",
// "validation", "checkpoint", "log" and "end", each with "t" (Unix seconds), "rank" and "pid".
#include "result/PilotTypes.h"

#include <QByteArray>
#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <optional>

namespace pb::watch {

// The environment variable that tells the probe where to write.
inline constexpr const char *kProbeVariable = "PILOTBENCH_PROBE";

struct ProbeEvent {
    enum class Kind { Hello, Step, Validation, Checkpoint, Log, End, Unknown };
    Kind kind = Kind::Unknown;
    int rank = 0;
    double t = 0;                        // Unix seconds, as the job's clock says
    QJsonObject fields;                  // the whole line
};

// nullopt for a line that is not a JSON object with an "event" string (a torn or foreign line).
std::optional<ProbeEvent> parseProbeLine(const QByteArray &line);

// A step event as a pilot's sample: step, times, tokens, loss, learning rate, the step's peaks.
// A loss, learning rate or gradient norm not reported is NaN; other missing figures stay 0. The
// callbacks' forward_backward_ms goes into forwardMs (backwardMs 0). `phase` is Train.
StepSample stepSampleFromProbe(const QJsonObject &fields);
ValidationResult validationFromProbe(const QJsonObject &fields);
CheckpointWrite checkpointFromProbe(const QJsonObject &fields);

// Splits a growing byte stream into complete lines (\n; a trailing \r is dropped), keeping the
// unfinished tail for the next call. tqdm's \r updates inside one line are split too, so the
// newest progress text is seen without waiting for the newline.
class LineSplitter {
public:
    template <typename Sink>
    void feed(const QByteArray &bytes, Sink &&sink)
    {
        m_pending += bytes;
        qsizetype start = 0;
        for (qsizetype i = 0; i < m_pending.size(); ++i) {
            const char c = m_pending.at(i);
            if (c == '\n' || c == '\r') {
                if (i > start)
                    sink(m_pending.mid(start, i - start));
                start = i + 1;
            }
        }
        m_pending.remove(0, start);
        // A line this long is not a log line anyone reads; keep memory bounded.
        if (m_pending.size() > kMaxLine) {
            sink(m_pending.left(kMaxLine));
            m_pending.clear();
        }
    }
    template <typename Sink>
    void flush(Sink &&sink)
    {
        if (!m_pending.isEmpty())
            sink(m_pending);
        m_pending.clear();
    }

private:
    static constexpr qsizetype kMaxLine = 1 << 20;
    QByteArray m_pending;
};

} // namespace pb::watch
