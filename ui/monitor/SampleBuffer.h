#pragma once
// Where the engine's thread leaves what it measured and the GUI's frame timer picks it up
// (PlotJuggler's pattern): producers only append under a short lock, the consumer takes everything
// new in one swap, never one signal per sample.
#include "result/PilotTypes.h"

#include <QtGlobal>

#include <mutex>
#include <vector>

namespace pb::ui {

struct SampleDrain {
    std::vector<StepSample> samples;
    std::vector<PhaseMark> phases;
    Phase currentPhase = Phase::Setup;
    int64_t currentPhaseStep = 0;
};

class SampleBuffer final {
    Q_DISABLE_COPY_MOVE(SampleBuffer)
public:
    SampleBuffer() = default;
    void appendSample(const StepSample &sample);
    void appendPhase(const PhaseMark &mark);
    void setPhase(Phase phase, int64_t step);
    // Everything appended since the last drain, oldest first.
    SampleDrain drain();
    void clear();

private:
    mutable std::mutex m_mutex;
    SampleDrain m_pending;
};

} // namespace pb::ui
