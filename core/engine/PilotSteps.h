#pragma once
// Internal to the engine: the staged loop of one pilot (warm-up, measured steps, validation,
// checkpoints) with its phase timing (engine/StepTimer.h) and memory probes.
#include "engine/MemoryProbe.h"
#include "engine/PilotEngine.h"
#include "engine/Prefetcher.h"
#include "engine/StepTimer.h"
#include "engine/TrainingSession.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pb {

class StepGraph;

class StepRunner {
public:
    StepRunner(const RunConfig &config, const PilotOptions &options, const torch::Device &device, MemoryProbe &probe, PilotObserver &observer, PilotRun &run);
    ~StepRunner();
    void execute();
    void recordOutOfMemory(const std::string &message);
    void recordFailure(const std::string &message);
    void release();            // frees the model, optimizer and data (device memory back)
    void finishSummary();

private:
    void setup();
    // `graphable`: train.cuda_graph's captured step or a later one (graphStep), else eager.
    StepSample trainStep(Phase phase, bool attributePeak, bool graphable);
    // The step run eagerly; `popped` are micro-batches already taken from the loader (a step that
    // could not replay its graph), the rest are popped here.
    StepSample eagerStep(Phase phase, bool attributePeak, std::vector<PreparedBatch> popped, double waitedMs);
    // train.cuda_graph: the step on these micro-batches as a graph replay, or (where there is none
    // yet) the step run once eagerly and then captured; nothing where the graph has ended (a batch
    // of another shape), so the step runs eagerly.
    std::optional<StepSample> graphStep(Phase phase, std::vector<PreparedBatch> &popped, double waitedMs);
    void capturedStep();                     // what the graph holds: forward, backward, clipping, AdamW
    void endGraph(const std::string &why);
    // The probe's reading after a step, into the sample and the phase's and run's peaks.
    MemoryReading readStepMemory(StepSample &sample);
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
    // train.cuda_graph: the graph, the tensors it reads and writes, and what became of it.
    std::unique_ptr<StepGraph> m_graph;
    struct GraphTensors {
        std::vector<torch::Tensor> inputs, targets;  // one per micro-batch, refilled before each replay
        torch::Tensor lr, loss, norm;                // device scalars: the rate in, the step's loss and gradient norm out
    } m_graphTensors;
    int64_t m_graphCapturedAt = 0, m_graphReplays = 0;
    std::string m_graphEnded;                        // why the run went on eagerly, once it did
};

} // namespace pb
