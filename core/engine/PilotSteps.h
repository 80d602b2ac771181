#pragma once
// Internal to the engine: the staged loop of one pilot (warm-up, measured steps, validation,
// checkpoints) with its phase timing (engine/StepTimer.h) and memory probes.
#include "engine/MemoryProbe.h"
#include "engine/PilotEngine.h"
#include "engine/StepTimer.h"
#include "engine/TrainingSession.h"

#include <chrono>

namespace pb {

class Prefetcher;

class StepRunner {
public:
    StepRunner(const RunConfig &config, const PilotOptions &options, const torch::Device &device, MemoryProbe &probe, PilotObserver &observer, PilotRun &run);
    void execute();
    void recordOutOfMemory(const std::string &message);
    void recordFailure(const std::string &message);
    void release();            // frees the model, optimizer and data (device memory back)
    void finishSummary();

private:
    void setup();
    StepSample trainStep(Phase phase, bool attributePeak);
    void validate();
    void checkpoint();
    void beginPhase(Phase phase);
    void endPhase();
    void synchronize();
    double elapsedMs(std::chrono::steady_clock::time_point since) const;
    bool cancelled() const;

    const RunConfig &m_config;
    const PilotOptions &m_options;
    torch::Device m_device;
    MemoryProbe &m_probe;
    PilotObserver &m_observer;
    PilotRun &m_run;
    TrainingSession m_session;
    Prefetcher *m_prefetcher = nullptr;   // alive only inside execute()
    StepTimer m_timer;
    std::chrono::steady_clock::time_point m_start;
    Phase m_phase = Phase::Setup;
    PhaseMark m_mark;
    bool m_phaseOpen = false;
    std::vector<StepSample> m_measured;
    int64_t m_peakAllocated = 0, m_peakReserved = 0, m_peakDeviceUsed = 0;
    bool m_finished = false;
};

} // namespace pb
