#pragma once
// The events a watched command's probe (resources/python/pilotbench_probe.py) writes as JSON lines
// to the pipe named by PILOTBENCH_PROBE_FD (or the file named by PILOTBENCH_PROBE where the pipe
// did not reach: see ProbeChannel.h): "hello" (versions and devices, once per process), "step",
// "validation", "checkpoint", "log" and "end", each with "t" (Unix seconds), "rank" and "pid".
// They come from the job, so they are checked like any input: a figure must be a finite number
// inside its bounds, or the whole event is refused with the field and the reason.
#include "result/PilotTypes.h"

#include <QByteArray>
#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <optional>
#include <string>

namespace pb::watch {

// The environment variable that tells the probe where to write.
inline constexpr const char *kProbeVariable = "PILOTBENCH_PROBE";

// Bounds of an accepted event's figures: far above any real job, far below where a sum or a
// product of them loses meaning in a double or overflows an int64.
inline constexpr double kMaxProbeTokens = 1099511627776.0;        // 2^40 tokens in one step
inline constexpr double kMaxProbeDurationMs = 86400000.0;         // a day
inline constexpr double kMaxProbeBytes = 1125899906842624.0;      // 1 PiB
inline constexpr double kMaxProbeStep = 1099511627776.0;          // 2^40 steps
inline constexpr int kMaxProbeRanks = 1 << 20;                    // ranks and world size
// A probe line longer than this is refused unread (the probe's own lines are under 4096 bytes).
inline constexpr qsizetype kMaxProbeLineBytes = 1 << 16;

struct ProbeEvent {
    enum class Kind { Hello, Step, Validation, Checkpoint, Log, End, Unknown };
    Kind kind = Kind::Unknown;
    int rank = 0;
    double t = 0;                        // Unix seconds, as the job's clock says
    QJsonObject fields;                  // the whole line
};

// A probe line read: the event, or why it was refused ("step event: step_time_ms: -50 is negative").
struct ProbeLine {
    std::optional<ProbeEvent> event;
    std::string rejection;               // set when event is not
};

// An event whose every known figure is a finite number inside the bounds above (null or absent:
// not reported), or the first field that is not. A line that is not a JSON object with an "event"
// string is refused too; an event kind this reader does not know is accepted as Unknown.
ProbeLine readProbeLine(const QByteArray &line);

// The conversions below take the fields of an event readProbeLine accepted.
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
        // A line this long is not a log line anyone reads, but an error inside it still counts:
        // it goes on in pieces of kMaxLine, each overlapping the one before by kOverlap bytes so
        // that a message cut at a boundary ("CUDA out of memory. Tried to allocate") is whole in
        // one of them; memory stays bounded.
        while (m_pending.size() > kMaxLine) {
            sink(m_pending.left(kMaxLine));
            m_pending.remove(0, kMaxLine - kOverlap);
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
    static constexpr qsizetype kOverlap = 512;
    QByteArray m_pending;
};

// Splits the probe channel's bytes into lines (\n) of at most kMaxProbeLineBytes. A longer line is
// never buffered whole: it is reported once to `tooLong` and skipped up to its newline.
class ProbeLineSplitter {
public:
    template <typename Sink, typename TooLong>
    void feed(const char *data, qsizetype size, Sink &&sink, TooLong &&tooLong)
    {
        qsizetype start = 0;
        for (qsizetype i = 0; i < size; ++i) {
            if (data[i] != '\n')
                continue;
            if (m_skipping)
                m_skipping = false;
            else if (m_pending.size() + (i - start) > kMaxProbeLineBytes)
                tooLong();
            else {
                m_pending.append(data + start, i - start);
                if (!m_pending.isEmpty())
                    sink(m_pending);
            }
            m_pending.clear();
            start = i + 1;
        }
        if (m_skipping || start == size)
            return;
        if (m_pending.size() + (size - start) > kMaxProbeLineBytes) {
            tooLong();
            m_pending.clear();
            m_skipping = true;
            return;
        }
        m_pending.append(data + start, size - start);
    }
    // The channel ended: an unfinished last line is still a line (a job killed mid-write tears it).
    template <typename Sink>
    void flush(Sink &&sink)
    {
        if (!m_skipping && !m_pending.isEmpty())
            sink(m_pending);
        m_pending.clear();
        m_skipping = false;
    }

private:
    QByteArray m_pending;
    bool m_skipping = false;             // inside a line already reported too long
};

} // namespace pb::watch
