#include "engine/PilotSteps.h"
#include "result/StepStatistics.h"

#include "checkpoint/Checkpoint.h"
#include "engine/DistributedHooks.h"
#include "engine/Environment.h"
#include "engine/GradClip.h"
#include "engine/LrSchedule.h"
#include "engine/PeakRecorder.h"
#include "engine/Prefetcher.h"
#include "engine/StepGraph.h"
#include "engine/TorchCompat.h"
#include "model/FusedOps.h"
#include "model/WeightLoader.h"
#include "util/Errors.h"

#include <spdlog/spdlog.h>

#include <ATen/CPUGeneratorImpl.h>

#include <array>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>
#include <numeric>

#ifdef PB_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace pb {
namespace {

// Proof tests (PilotOptions::testJitterUlps): -N, 0 or +N units in the last place of each value,
// from a generator of its own seeded by the OS, so neither reproducible nor touching the run's RNG.
void jitterParameters(const std::vector<torch::Tensor> &params, int ulps)
{
    torch::NoGradGuard noGrad;
    std::random_device source;
    auto generator = at::detail::createCPUGenerator((static_cast<uint64_t>(source()) << 32) | source());
    for (const auto &p : params) {
        const int mantissaBits = p.scalar_type() == torch::kDouble ? 52 : p.scalar_type() == torch::kBFloat16 ? 7 : p.scalar_type() == torch::kHalf ? 10 : 23;
        auto factor = torch::randint(-1, 2, p.sizes(), generator, torch::TensorOptions().dtype(torch::kFloat));
        factor.mul_(std::ldexp(static_cast<double>(ulps), -mantissaBits)).add_(1.0);
        p.mul_(factor.to(p.device(), p.scalar_type()));
    }
}

struct CancelledSignal {};

at::ScalarType autocastType(Precision precision)
{
    return precision == Precision::Fp16Mixed ? at::kHalf : at::kBFloat16;
}

bool usesAutocast(Precision precision) { return precision == Precision::Bf16Mixed || precision == Precision::Fp16Mixed || isFp8(precision); }

// Autocast around the forward pass only, as PyTorch recommends (backward runs in the dtypes the
// forward chose).
class AutocastScope {
public:
    AutocastScope(c10::DeviceType device, bool enabled, at::ScalarType dtype) : m_device(device), m_enabled(enabled)
    {
        if (m_enabled)
            compat::setAutocast(m_device, true, dtype);
    }
    ~AutocastScope()
    {
        if (m_enabled)
            compat::setAutocast(m_device, false, at::kBFloat16);
    }

private:
    c10::DeviceType m_device;
    bool m_enabled;
};

// What lives on the device before a step, by part: the peak recorder books these without having
// seen them allocated.
std::vector<std::pair<torch::Tensor, MemoryPart>> residentTensors(TrainingSession &session)
{
    std::vector<std::pair<torch::Tensor, MemoryPart>> out;
    for (const auto &p : session.model->parameters()) {
        out.emplace_back(p, p.requires_grad() ? MemoryPart::TrainableWeights : MemoryPart::FrozenWeights);
        if (p.grad().defined())
            out.emplace_back(p.grad(), MemoryPart::Gradients);
    }
    for (const auto &b : session.model->buffers())
        out.emplace_back(b, MemoryPart::FrozenWeights);
    for (const auto &[name, t] : session.optimizer->state())
        out.emplace_back(t, MemoryPart::Optimizer);
    return out;
}

} // namespace

StepRunner::~StepRunner() = default;

StepRunner::StepRunner(const RunConfig &config, const PilotOptions &options, const torch::Device &device, MemoryProbe &probe, PilotObserver &observer, PilotRun &run)
    : m_config(config), m_options(options), m_device(device), m_probe(probe), m_observer(observer), m_run(run), m_timer(device),
      m_start(std::chrono::steady_clock::now())
{
    m_session.config = config;
    m_session.device = device;
}

double StepRunner::elapsedMs(std::chrono::steady_clock::time_point since) const
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

bool StepRunner::cancelled() const { return m_options.cancel && m_options.cancel->load(std::memory_order_relaxed); }

void StepRunner::synchronize()
{
#ifdef PB_WITH_CUDA
    if (m_device.is_cuda())
        cudaDeviceSynchronize();
#endif
}

void StepRunner::beginPhase(Phase phase)
{
    m_phase = phase;
    m_mark = PhaseMark {};
    m_mark.phase = phase;
    m_mark.step = m_session.step + 1;
    m_mark.startMs = elapsedMs(m_start);
    m_phaseOpen = true;
    m_observer.phaseStarted(phase, m_mark.step);
}

void StepRunner::endPhase()
{
    if (!m_phaseOpen)
        return;
    m_phaseOpen = false;
    const auto reading = m_probe.read();
    m_mark.durationMs = elapsedMs(m_start) - m_mark.startMs;
    m_mark.peakAllocatedBytes = std::max(m_mark.peakAllocatedBytes, reading.peakAllocatedBytes);
    m_mark.peakDeviceUsedBytes = std::max(m_mark.peakDeviceUsedBytes, reading.deviceUsedBytes);
    m_peakAllocated = std::max(m_peakAllocated, m_mark.peakAllocatedBytes);
    m_peakReserved = std::max(m_peakReserved, reading.peakReservedBytes);
    m_peakDeviceUsed = std::max(m_peakDeviceUsed, m_mark.peakDeviceUsedBytes);
    auto &byPhase = m_run.summary.peakAllocatedByPhase[toString(m_mark.phase)];
    byPhase = std::max(byPhase, m_mark.peakAllocatedBytes);
    auto &usedByPhase = m_run.summary.peakDeviceUsedByPhase[toString(m_mark.phase)];
    usedByPhase = std::max(usedByPhase, m_mark.peakDeviceUsedBytes);
    m_run.phases.push_back(m_mark);
    m_observer.phaseFinished(m_mark);
}

void StepRunner::setup()
{
    beginPhase(Phase::Setup);
    // The peak counters are process-wide: start this run's from what is live now.
    m_probe.resetPeak();
    const auto &train = m_config.train;
    if (train.precision == Precision::Fp16Mixed && !m_device.is_cuda())
        throw InvalidInputError("train.precision", "fp16-mixed needs a CUDA device: CPU autocast supports bf16 only");
    if (isFp8(train.precision) || train.cudaGraph) // callers that record a run have refused these already
        requireRunsHere(m_config, captureEnvironment(m_device.str()));
    if (train.cudaGraph && m_options.distributed)
        throw InvalidInputError("train.cuda_graph", "a scaling run's gradient exchange is driven from the host between backward and optimizer: scale without a CUDA graph");
    if (m_config.deterministic) {
#ifdef PB_WITH_CUDA
        setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
#endif
        // warn_only: ops without a deterministic kernel still run; the restore proof then reports
        // the deviation instead of the run failing.
        at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
    }
    torch::manual_seed(m_config.seed);

    ModelRuntime runtime;
    runtime.fusedAttention = usesFusedAttention(m_config, compat::hasScaledDotProductAttention(), m_device.is_cuda());
    if (m_config.deterministic && m_device.is_cuda() && train.attention != AttentionImpl::Math) {
        if (runtime.fusedAttention)
            spdlog::warn("deterministic: attention {} was asked for; its fused backward may not be deterministic", toString(train.attention));
        else
            spdlog::info("deterministic: attention auto runs the math path (the fused kernels' backward is not deterministic)");
    }
    runtime.recompute = train.recompute;
    m_run.attentionPath = runtime.fusedAttention ? "sdpa" : "math";
    {
        // What the traits change in it: Gemma 2's soft-capped scores take the eager form, or on the
        // fused path of a CUDA device its capped softmax's kernel; a window goes to SDPA as one mask
        // shared by the sliding layers.
        const int64_t sliding = m_config.model.slidingLayers();
        if (m_config.model.traits.attentionSoftcap > 0)
            m_run.attentionPath = train.kernels == KernelPath::Fused && fusedKernelsOn(m_device)
                                      ? "capped softmax kernel between two bmms (soft-capped scores)"
                                      : "eager (soft-capped scores)";
        else if (sliding > 0)
            m_run.attentionPath += "; window mask on " + std::to_string(sliding) + " of " + std::to_string(m_config.model.layers) + " layers";
        // Llama 4's chunks: a mask only where the sequence spans more than one chunk.
        const ModelTraits &traits = m_config.model.traits;
        if (traits.attentionChunk > 0 && train.seqLen > traits.attentionChunk) {
            int64_t chunked = 0;
            for (int64_t i = 0; i < m_config.model.layers; ++i)
                chunked += traits.usesChunks(i) ? 1 : 0;
            m_run.attentionPath += "; chunk mask on " + std::to_string(chunked) + " of " + std::to_string(m_config.model.layers) + " layers";
        }
        // Qwen3-Next / Qwen3.5: the eager path runs Transformers' chunked rule op for op; the fused
        // path runs its chunk loop as one node, on the state-scan kernel where the CUDA kernels are.
        if (m_config.model.linear.enabled()) {
            const int64_t linear = m_config.model.layers - m_config.model.fullAttentionLayers();
            const char *rule = train.kernels == KernelPath::Eager ? "eager chunked rule"
                               : fusedKernelsOn(m_device)         ? "chunk loop on the state-scan kernel"
                                                                  : "chunk loop as one node, LibTorch ops";
            m_run.attentionPath += std::string("; Gated DeltaNet (") + rule + ") on " + std::to_string(linear) + " of " + std::to_string(m_config.model.layers)
                                   + " layers";
        }
    }
    m_run.kernelsPath = train.kernels == KernelPath::Eager ? "eager" : fusedKernelsOn(m_device) ? "fused (CUDA kernels)" : "fused (LibTorch ops)";
    m_run.numericalFormat = toString(train.precision);
    m_session.model = DecoderModel(m_config, runtime, m_device);
    m_session.model->initialise(m_config.seed);
    if (!m_config.model.weightsPath.empty())
        loadSafetensors(*m_session.model, QString::fromStdString(m_config.model.weightsPath));
    m_session.model->train();
    auto trainable = m_session.model->trainableParameters();
    if (m_options.distributed) { // a sharding strategy gives this rank's optimizer only its own part
        m_options.distributed->shardModel(*m_session.model);
        trainable = m_options.distributed->optimizerParameters(std::move(trainable));
    }
    m_session.optimizer = makeOptimizer(train.optimizer, std::move(trainable));
    m_run.optimizerPath = m_session.optimizer->path();
    m_session.scaler.enabled = train.precision == Precision::Fp16Mixed;
    m_session.scaler.scale = train.lossScale;

    m_session.dataset = openDataset(m_config.data, m_config.model.vocabSize, train.seqLen, m_config.seed);
    std::vector<int64_t> trainSamples, validationSamples;
    splitSamples(*m_session.dataset, m_config.validation.everySteps > 0 ? std::max<int64_t>(m_config.data.validationFraction, 1) : 0, m_config.seed,
                 trainSamples, validationSamples);
    m_session.trainBatches = std::make_unique<Batcher>(*m_session.dataset, trainSamples, train.microBatch, m_config.data.longestFirst, m_config.seed);
    if (!validationSamples.empty())
        m_session.validationBatches = std::make_unique<Batcher>(*m_session.dataset, validationSamples, train.microBatch, true, m_config.seed);
    m_session.consumed = m_session.trainBatches->position();
    m_run.dataRevision = m_session.dataset->revision();
    m_run.dataDescription = m_session.dataset->description();

    if (!m_options.resumeFrom.empty()) {
        const auto restoreStart = std::chrono::steady_clock::now();
        restoreCheckpoint(m_session, m_options.resumeFrom, m_options.dropStateOnResume,
                          m_options.resumeVerified ? ContentHashes::AlreadyChecked : ContentHashes::Check, m_options.distributed);
        m_session.trainBatches->seek(m_session.consumed);
        m_run.firstStep = m_session.step + 1;
        synchronize();
        m_run.restoreMs = elapsedMs(restoreStart);
        m_run.resumeDigest = stateDigest(m_session, m_options.distributed);
    }
    if (m_options.distributed) {
        auto params = m_session.model->parameters();
        m_options.distributed->broadcastParameters(params);
    }
    synchronize();
    endPhase();
    m_run.summary.setupMs = m_run.phases.back().durationMs;
}

StepSample StepRunner::trainStep(Phase phase, bool attributePeak, bool graphable)
{
    std::vector<PreparedBatch> popped;
    double waitedMs = 0;
    if (graphable && m_graphEnded.empty()) {
        if (cancelled())
            throw CancelledSignal {};
        for (int64_t micro = 0; micro < m_config.train.gradAccum; ++micro)
            popped.push_back(m_prefetcher->pop(waitedMs));
        if (auto sample = graphStep(phase, popped, waitedMs))
            return *sample;
    }
    return eagerStep(phase, attributePeak, std::move(popped), waitedMs);
}

StepSample StepRunner::eagerStep(Phase phase, bool attributePeak, std::vector<PreparedBatch> popped, double waitedMs)
{
    StepSample sample;
    sample.phase = phase;
    sample.dataWaitMs = waitedMs;
    m_probe.resetPeak();
    std::unique_ptr<PeakRecorder> recorder;
    if (attributePeak)
        recorder = std::make_unique<PeakRecorder>(m_device, m_probe.read().allocatedBytes, residentTensors(m_session));
    auto enter = [&recorder](PeakRecorder::StepPhase p) {
        if (recorder)
            recorder->setPhase(p);
    };
    const auto &train = m_config.train;
    const bool autocast = usesAutocast(train.precision);
    const auto stepStart = std::chrono::steady_clock::now();
    // The phases' boundaries: read after the step's one synchronisation, at its end.
    m_timer.reset();
    std::vector<std::array<size_t, 3>> microMarks;   // forward start, forward end, backward end
    torch::Tensor lossTotal;                         // summed on the device, read once
    for (int64_t micro = 0; micro < train.gradAccum; ++micro) {
        if (cancelled())
            throw CancelledSignal {};
        PreparedBatch batch = static_cast<size_t>(micro) < popped.size() ? std::move(popped[static_cast<size_t>(micro)]) : m_prefetcher->pop(sample.dataWaitMs);
        const auto inputs = batch.inputs.to(m_device, /*non_blocking=*/true);
        const auto targets = batch.targets.to(m_device, /*non_blocking=*/true);
        std::array<size_t, 3> marks {};
        marks[0] = m_timer.mark();
        torch::Tensor loss;
        enter(PeakRecorder::StepPhase::Forward);
        {
            AutocastScope scope(m_device.type(), autocast, autocastType(train.precision));
            loss = m_session.model->loss(inputs, targets);
        }
        marks[1] = m_timer.mark();
        auto scaled = loss / static_cast<double>(train.gradAccum);
        if (m_session.scaler.enabled)
            scaled = scaled * m_session.scaler.scale;
        if (m_options.distributed)
            m_options.distributed->beforeBackward(micro + 1 == train.gradAccum);
        enter(PeakRecorder::StepPhase::Backward);
        scaled.backward();
        if (recorder)
            recorder->noteGradients(m_session.model->parameters());
        marks[2] = m_timer.mark();
        microMarks.push_back(marks);
        lossTotal = micro == 0 ? loss.detach().to(torch::kDouble) : lossTotal + loss.detach().to(torch::kDouble);
        sample.tokens += batch.tokens;
        m_session.consumed = batch.positionAfter;
    }
    if (m_options.distributed) // its time is in stepTimeMs but in none of forward, backward, optimizer
        m_options.distributed->afterBackward(m_session.optimizer->parameters());

    const size_t optimizerStart = m_timer.mark();
    enter(PeakRecorder::StepPhase::Optimizer);
    auto &params = m_session.optimizer->parameters();
    bool finite = true;
    if (m_session.scaler.enabled) {
        torch::NoGradGuard noGrad;
        for (auto &p : params)
            if (p.grad().defined())
                p.grad().mul_(1.0 / m_session.scaler.scale);
    }
    double gradScale = 1.0;
    if (train.gradClip > 0 || m_session.scaler.enabled) {
        sample.gradNorm = totalGradNorm(params);
        finite = std::isfinite(sample.gradNorm);
        if (train.gradClip > 0 && finite)
            gradScale = clipScale(sample.gradNorm, train.gradClip);
    }
    sample.learningRate = learningRateAt(train.optimizer, train.schedule, m_session.step);
    if (finite) {
        if (train.gradClip > 0 && train.kernels == KernelPath::Eager) {
            // Transformers' step (clip_grad_norm_) multiplies every gradient by the clamped
            // coefficient, 1 included, before the optimizer: the eager path makes the same pass
            // (the fused one folds the scale into AdamW's kernel).
            scaleGradients(params, gradScale, /*evenByOne=*/true);
            gradScale = 1.0;
        }
        m_session.optimizer->step(sample.learningRate, gradScale);
        if (m_options.testJitterUlps > 0)
            jitterParameters(params, m_options.testJitterUlps);
        if (m_options.distributed)
            m_options.distributed->afterOptimizerStep();
        if (m_session.scaler.enabled && ++m_session.scaler.goodSteps % LossScaler::kGrowthInterval == 0)
            m_session.scaler.scale *= 2;
    } else if (m_session.scaler.enabled) {
        // fp16 overflow: skip the step and halve the scale, as torch.cuda.amp.GradScaler does.
        m_session.scaler.scale /= 2;
        m_session.scaler.goodSteps = 0;
    }
    m_session.optimizer->zeroGrad();
    const size_t optimizerEnd = m_timer.mark();
    synchronize();
    sample.stepTimeMs = elapsedMs(stepStart);
    for (const auto &marks : microMarks) {
        sample.forwardMs += m_timer.elapsedMs(marks[0], marks[1]);
        sample.backwardMs += m_timer.elapsedMs(marks[1], marks[2]);
    }
    sample.optimizerMs = m_timer.elapsedMs(optimizerStart, optimizerEnd);
    sample.loss = lossTotal.item<double>() / static_cast<double>(train.gradAccum);
    ++m_session.step;
    sample.step = m_session.step;
    const auto reading = readStepMemory(sample);
    if (recorder)
        m_run.summary.memoryAttribution = recorder->finish(m_session.step, reading.peakAllocatedBytes);
    return sample;
}

MemoryReading StepRunner::readStepMemory(StepSample &sample)
{
    const auto reading = m_probe.read();
    sample.allocatedBytes = reading.allocatedBytes;
    sample.reservedBytes = reading.reservedBytes;
    sample.peakAllocatedBytes = reading.peakAllocatedBytes;
    sample.deviceUsedBytes = reading.deviceUsedBytes;
    m_mark.peakAllocatedBytes = std::max(m_mark.peakAllocatedBytes, reading.peakAllocatedBytes);
    m_mark.peakDeviceUsedBytes = std::max(m_mark.peakDeviceUsedBytes, reading.deviceUsedBytes);
    m_peakReserved = std::max(m_peakReserved, reading.peakReservedBytes);
    return reading;
}

std::optional<StepSample> StepRunner::graphStep(Phase phase, std::vector<PreparedBatch> &popped, double waitedMs)
{
    auto &io = m_graphTensors;
    if (m_graph) {
        for (size_t i = 0; i < popped.size(); ++i)
            if (popped[i].inputs.sizes() != io.inputs[i].sizes()) {
                std::ostringstream why;
                why << "ended at step " << m_session.step + 1 << ": a batch of " << popped[i].inputs.size(0) << " x " << popped[i].inputs.size(1)
                    << " tokens after capturing " << io.inputs[i].size(0) << " x " << io.inputs[i].size(1) << " (the rest of the run stepped eagerly)";
                endGraph(why.str());
                return std::nullopt;
            }
    }
    const auto &train = m_config.train;
    StepSample sample;
    sample.phase = phase;
    sample.dataWaitMs = waitedMs;
    m_probe.resetPeak();
    const auto stepStart = std::chrono::steady_clock::now();
    sample.learningRate = learningRateAt(train.optimizer, train.schedule, m_session.step);
    const auto f64 = torch::TensorOptions().dtype(torch::kDouble).device(m_device);
    if (!m_graph) {
        // The tensors the graph reads and writes, then the capture; its one warm-up on the side
        // stream is this step, run eagerly on these batches.
        io.inputs.clear();
        io.targets.clear();
        for (const auto &batch : popped) {
            io.inputs.push_back(batch.inputs.to(m_device));
            io.targets.push_back(batch.targets.to(m_device));
        }
        io.lr = torch::full({}, sample.learningRate, f64.dtype(torch::kFloat));
        io.loss = torch::zeros({}, f64);
        io.norm = torch::zeros({}, f64);
        auto graph = std::make_unique<StepGraph>(m_device);
        try {
            graph->capture([this] { capturedStep(); }, 1);
            m_graph = std::move(graph);
            m_graphCapturedAt = m_session.step + 1;
        } catch (const StepGraph::CaptureFailed &e) {
            endGraph("not used: the capture at step " + std::to_string(m_session.step + 1) + " failed (" + e.what() + "); the run stepped eagerly");
        }
    } else {
        for (size_t i = 0; i < popped.size(); ++i) {
            io.inputs[i].copy_(popped[i].inputs, /*non_blocking=*/true);
            io.targets[i].copy_(popped[i].targets, /*non_blocking=*/true);
        }
        io.lr.fill_(sample.learningRate);
        m_graph->replay();
        ++m_graphReplays;
    }
    synchronize();
    sample.stepTimeMs = elapsedMs(stepStart);
    sample.loss = io.loss.item<double>();
    bool finite = true;
    if (train.gradClip > 0) {
        sample.gradNorm = io.norm.item<double>();
        finite = std::isfinite(sample.gradNorm);
    }
    if (finite) {
        m_session.optimizer->countStep();
        if (m_options.testJitterUlps > 0)
            jitterParameters(m_session.optimizer->parameters(), m_options.testJitterUlps);
    }
    for (const auto &batch : popped)
        sample.tokens += batch.tokens;
    m_session.consumed = popped.back().positionAfter;
    ++m_session.step;
    sample.step = m_session.step;
    // Forward, backward and optimizer are one launch here: their split is the eager steps'.
    readStepMemory(sample);
    return sample;
}

void StepRunner::capturedStep()
{
    const auto &train = m_config.train;
    auto &io = m_graphTensors;
    m_session.optimizer->zeroGrad(); // on the host only: the backward then writes fresh gradients, in the graph's pool
    torch::Tensor total;
    for (size_t micro = 0; micro < io.inputs.size(); ++micro) {
        torch::Tensor loss;
        {
            AutocastScope scope(m_device.type(), usesAutocast(train.precision), autocastType(train.precision));
            loss = m_session.model->loss(io.inputs[micro], io.targets[micro]);
        }
        (train.gradAccum > 1 ? loss / static_cast<double>(train.gradAccum) : loss).backward();
        total = micro == 0 ? loss.detach().to(torch::kDouble) : total + loss.detach().to(torch::kDouble);
    }
    io.loss.copy_(total / static_cast<double>(train.gradAccum));
    const auto &params = m_session.optimizer->parameters();
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(m_device);
    torch::Tensor divisor = torch::ones({}, f32), skip = torch::zeros({}, f32);
    if (train.gradClip > 0) {
        const auto norm = totalGradNormOnDevice(params);
        io.norm.copy_(norm);
        divisor = clipDivisorOnDevice(norm, train.gradClip);
        skip = norm.isfinite().logical_not().to(torch::kFloat);
    }
    m_session.optimizer->stepOnDevice(io.lr, divisor, skip);
}

void StepRunner::endGraph(const std::string &why)
{
    m_graphEnded = why;
    m_graph.reset();
    m_session.optimizer->zeroGrad(); // the graph's gradients: an eager step makes its own
    spdlog::info("CUDA graph of the step {}", why);
}

void StepRunner::validate()
{
    if (!m_session.validationBatches || m_config.validation.batches <= 0)
        return;
    ValidationResult result;
    result.step = m_session.step;
    const auto start = std::chrono::steady_clock::now();
    m_probe.resetPeak();
    m_session.validationBatches->seek(DataPosition {0, 0, m_config.seed});
    m_session.model->eval();
    double sum = 0;
    {
        torch::NoGradGuard noGrad;
        AutocastScope scope(m_device.type(), usesAutocast(m_config.train.precision), autocastType(m_config.train.precision));
        for (int64_t i = 0; i < m_config.validation.batches; ++i) {
            if (cancelled())
                throw CancelledSignal {};
            auto batch = prepareBatch(m_session.validationBatches->next(), false);
            sum += m_session.model->loss(batch.inputs.to(m_device), batch.targets.to(m_device)).item<double>();
            ++result.batches;
        }
    }
    m_session.model->train();
    synchronize();
    result.loss = sum / static_cast<double>(std::max<int64_t>(result.batches, 1));
    result.durationMs = elapsedMs(start);
    m_run.summary.validationMs += result.durationMs;
    const auto reading = m_probe.read();
    m_mark.peakAllocatedBytes = std::max(m_mark.peakAllocatedBytes, reading.peakAllocatedBytes);
    m_observer.validationFinished(result);
}

void StepRunner::checkpoint()
{
    m_probe.resetPeak();
    const auto write = writeCheckpoint(m_session, m_options.checkpointDir, m_options.distributed);
    m_run.checkpointDigest = stateDigest(m_session, m_options.distributed);
    m_run.summary.checkpointWriteMs += write.writeMs;
    m_run.summary.checkpointBytes = write.bytes;
    m_observer.checkpointWritten(write);
}

void StepRunner::execute()
{
    setup();
    const auto *dist = m_options.distributed;
    Prefetcher prefetcher(*m_session.trainBatches, 3, m_device.is_cuda(), dist ? dist->rank() : 0, dist ? dist->worldSize() : 1);
    m_prefetcher = &prefetcher;
    // The peak's attribution costs host time, so it is taken on the last warm-up step (the first
    // measured one when there is no warm-up: its time then counts).
    const int64_t attributed = m_options.attributePeak ? std::max<int64_t>(m_options.warmupSteps - 1, 0) : -1;
    // train.cuda_graph: the step after the warm-ups and the attributed step (those run eagerly, so
    // the peak is the eager step's) is captured, one more warm-up step since the capture costs
    // time; every later step replays the graph.
    const int64_t captured = m_config.train.cudaGraph ? std::max(m_options.warmupSteps, attributed + 1) : -1;
    const int64_t total = m_options.warmupSteps + m_options.steps + (captured >= 0 ? 1 : 0);
    try {
        for (int64_t i = 0; i < total; ++i) {
            const Phase phase = i < m_options.warmupSteps || i == captured ? Phase::Warmup : Phase::Train;
            if (!m_phaseOpen || m_phase != phase) {
                endPhase();
                beginPhase(phase);
            }
            const StepSample sample = trainStep(phase, i == attributed, captured >= 0 && i >= captured);
            m_run.losses.push_back(sample.loss);
            if (phase == Phase::Train)
                m_measured.push_back(sample);
            m_observer.stepFinished(sample);
            // A diverged run is not a working configuration, whatever its memory did.
            if (!std::isfinite(sample.loss))
                throw std::runtime_error("the loss is not finite (" + std::to_string(sample.loss) + ") at step " + std::to_string(sample.step) +
                                         ": the configuration diverges (precision, learning rate or attention path)");
            const bool last = i + 1 == total;
            const auto &v = m_config.validation;
            if (v.everySteps > 0 && m_session.step % v.everySteps == 0) {
                endPhase();
                beginPhase(Phase::Validation);
                validate();
                endPhase();
            }
            const int64_t every = m_config.checkpoint.everySteps;
            if (!m_options.checkpointDir.empty() && ((every > 0 && m_session.step % every == 0) || (last && m_options.checkpointAtEnd))) {
                endPhase();
                beginPhase(Phase::Checkpoint);
                checkpoint();
                endPhase();
            }
        }
        endPhase();
        m_run.summary.verdict = Verdict::Fits;
    } catch (const CancelledSignal &) {
        endPhase();
        m_run.summary.verdict = Verdict::Cancelled;
        m_run.summary.message = "cancelled by the user after " + std::to_string(m_session.step) + " step(s)";
        m_run.summary.failedPhase = toString(m_phase);
        m_run.summary.failedStep = m_session.step + 1;
    }
    m_prefetcher = nullptr;
    if (m_config.train.cudaGraph) {
        std::string graph = m_graphCapturedAt > 0 ? "captured at step " + std::to_string(m_graphCapturedAt) + ", replayed " + std::to_string(m_graphReplays) + " time(s)" : "";
        if (!m_graphEnded.empty())
            graph += (graph.empty() ? "" : "; ") + m_graphEnded;
        m_run.stepGraph = graph.empty() ? "not used: no measured step ran" : graph;
    }
    if (m_options.distributed && m_run.summary.verdict == Verdict::Fits)
        m_options.distributed->trainingFinished(m_session.model->parameters());
    if (m_options.parameterChecksum && m_run.summary.verdict == Verdict::Fits)
        m_run.parameterChecksum = parameterChecksum(*m_session.model);
    if (!m_options.parameterDumpPath.empty() && !m_options.distributed && m_run.summary.verdict == Verdict::Fits)
        writeParameterDump(m_session.model->trainableParameters(), m_options.parameterDumpPath);
    m_finished = true;
}

void StepRunner::recordOutOfMemory(const std::string &message)
{
    m_prefetcher = nullptr;
    const auto reading = m_probe.read();
    m_run.summary.verdict = Verdict::DoesNotFit;
    m_run.summary.failedPhase = toString(m_phase);
    m_run.summary.failedStep = m_session.step + 1;
    m_run.summary.message = "out of memory in " + std::string(toString(m_phase)) + " at step " + std::to_string(m_session.step + 1) + " with " +
                            std::to_string(reading.allocatedBytes) + " bytes allocated (peak " + std::to_string(reading.peakAllocatedBytes) + "): " + message;
    m_peakAllocated = std::max(m_peakAllocated, reading.peakAllocatedBytes);
    m_peakDeviceUsed = std::max(m_peakDeviceUsed, reading.deviceUsedBytes);
    spdlog::warn("{}", m_run.summary.message);
    endPhase();
}

void StepRunner::recordFailure(const std::string &message)
{
    m_prefetcher = nullptr;
    m_run.summary.verdict = Verdict::Failed;
    m_run.summary.failedPhase = toString(m_phase);
    m_run.summary.failedStep = m_session.step + 1;
    m_run.summary.message = message;
    spdlog::error("pilot failed in {} at step {}: {}", toString(m_phase), m_session.step + 1, message);
    endPhase();
}

void StepRunner::release()
{
    m_session.optimizer.reset();
    m_session.model = DecoderModel(nullptr);
    m_session.trainBatches.reset();
    m_session.validationBatches.reset();
    m_session.dataset.reset();
}

void StepRunner::finishSummary()
{
    auto &s = m_run.summary;
    s.peakAllocatedBytes = m_peakAllocated;
    s.peakReservedBytes = m_peakReserved;
    s.peakDeviceUsedBytes = m_peakDeviceUsed;
    s.totalMs = elapsedMs(m_start);
    if (!m_run.losses.empty())
        s.finalLoss = m_run.losses.back();
    if (m_measured.empty())
        return;
    summarizeSteps(m_measured, s);
    const int64_t tokensPerStep = m_config.train.microBatch * m_config.train.gradAccum * m_config.train.seqLen;
    s.flopsPerStep = modelFlopsPerStep(m_config, tokensPerStep, m_config.train.seqLen);
    if (m_options.devicePeakFlops && *m_options.devicePeakFlops > 0)
        s.mfu = s.flopsPerStep / (s.stepTimeMeanMs / 1000.0) / *m_options.devicePeakFlops;
}

} // namespace pb
