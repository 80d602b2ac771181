#include "engine/PeakRecorder.h"

#include "engine/TorchCompat.h"

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace pb {
namespace {

const char *phaseName(PeakRecorder::StepPhase phase)
{
    switch (phase) {
    case PeakRecorder::StepPhase::Forward: return "forward";
    case PeakRecorder::StepPhase::Backward: return "backward";
    case PeakRecorder::StepPhase::Optimizer: return "optimizer";
    }
    return "?";
}

// What is running on this thread, innermost last. Names point into the running RecordFunction,
// which outlives its frame.
struct Frame {
    const char *name;
    at::RecordScope scope;
    int64_t seq;
    // The thread that numbered `seq`: an op's own, a backward function's forward's. Each thread
    // counts sequence numbers on its own (a rebuilt block's nodes are numbered on the backward's).
    uint64_t seqThread;
    bool parameterCast;
};
thread_local std::vector<Frame> t_frames;

constexpr const char *kLayerPrefix = "pb.layer.";

// The model's own scope a frame names (RECORD_USER_SCOPE("pb.attention") -> "attention"), or null.
// A decoder block's "pb.layer.<i>" names its layer, not a scope.
const char *modelScope(const Frame &frame)
{
    return frame.scope == at::RecordScope::USER_SCOPE && std::strncmp(frame.name, "pb.", 3) == 0 &&
                   std::strncmp(frame.name, kLayerPrefix, std::strlen(kLayerPrefix)) != 0
               ? frame.name + 3
               : nullptr;
}

// The decoder layer a frame names ("pb.layer.7" -> 7), or -1.
int layerOf(const Frame &frame)
{
    return frame.scope == at::RecordScope::USER_SCOPE && std::strncmp(frame.name, kLayerPrefix, std::strlen(kLayerPrefix)) == 0
               ? std::atoi(frame.name + std::strlen(kLayerPrefix))
               : -1;
}

// Operators that only make storage for the operator around them: the site is that outer operator.
bool allocatesForCaller(const char *name)
{
    static const std::set<std::string> names {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
                                              "aten::new_empty_strided", "aten::resize_", "aten::to", "aten::contiguous"};
    return names.count(name) > 0;
}

constexpr const char *kBackwardPrefix = "autograd::engine::evaluate_function: ";

} // namespace

struct PeakRecorder::State {
    struct Event {
        void *ptr;
        int64_t size;   // negative: a free
        int64_t total;  // the allocator's live bytes right after it
        int label;
    };
    struct Resident {
        MemoryPart part;
        std::string what;
        int64_t bytes;
    };

    torch::Device device;
    int64_t allocatedAtStart;
    std::atomic<StepPhase> phase {StepPhase::Forward};
    std::unordered_set<const void *> parameterData;
    std::unordered_map<const void *, Resident> resident;

    std::mutex mutex; // guards everything below
    std::vector<Event> events;
    struct Label {
        std::string phase, scope, op;
        bool cast;
        int layer;
    };
    struct ForwardPlace {
        std::string scope;
        int layer;
    };
    std::map<std::tuple<std::string, std::string, std::string, bool, int>, int> labelIds;
    std::vector<Label> labels;
    std::map<std::pair<uint64_t, int64_t>, ForwardPlace> forwardPlaceOfSeq; // (thread, sequence number) -> where the node was made
    std::unordered_map<const void *, size_t> liveEvent; // ptr -> index of the allocation holding it now
    std::unordered_set<size_t> gradientEvents;

    State(const torch::Device &d, int64_t start) : device(d), allocatedAtStart(start) {}

    bool sameDevice(const c10::Device &d) const
    {
        return d.type() == device.type() && (device.type() == c10::DeviceType::CPU || !device.has_index() || d.index() == device.index());
    }

    Label currentLabel()
    {
        std::string scope, op, node;
        int64_t nodeSeq = -1;
        uint64_t nodeThread = 0;
        bool cast = false;
        int layer = -1;
        for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it) {
            if (it->scope == at::RecordScope::USER_SCOPE) {
                if (const char *own = modelScope(*it); scope.empty() && own)
                    scope = own;
                if (layer < 0)
                    layer = layerOf(*it);
            } else if (it->scope == at::RecordScope::BACKWARD_FUNCTION) {
                if (nodeSeq < 0) {
                    nodeSeq = it->seq;
                    nodeThread = it->seqThread;
                    node = it->name;
                    if (node.rfind(kBackwardPrefix, 0) == 0)
                        node = node.substr(std::strlen(kBackwardPrefix));
                }
            } else {
                if (op.empty() && !allocatesForCaller(it->name))
                    op = it->name;
                cast = cast || it->parameterCast;
            }
        }
        if ((scope.empty() || layer < 0) && !node.empty()) {
            std::lock_guard lock(mutex);
            const auto found = forwardPlaceOfSeq.find({nodeThread, nodeSeq});
            if (scope.empty())
                scope = found != forwardPlaceOfSeq.end() && !found->second.scope.empty() ? found->second.scope : node;
            if (layer < 0 && found != forwardPlaceOfSeq.end())
                layer = found->second.layer;
        }
        if (op.empty())
            op = node;
        return {phaseName(phase.load()), scope.empty() ? "model" : scope, op, cast, layer};
    }

    void onEvent(void *ptr, int64_t size, int64_t total, const c10::Device &d)
    {
        if (size == 0 || !sameDevice(d))
            return;
        Label label = size > 0 ? currentLabel() : Label {};
        std::lock_guard lock(mutex);
        int id = -1;
        if (size > 0) {
            const auto [it, inserted] = labelIds.emplace(std::make_tuple(label.phase, label.scope, label.op, label.cast, label.layer), static_cast<int>(labels.size()));
            if (inserted)
                labels.push_back(std::move(label));
            id = it->second;
            liveEvent[ptr] = events.size();
        } else {
            liveEvent.erase(ptr);
        }
        events.push_back({ptr, size, total, id});
    }

    // The innermost model scope and decoder layer of this thread's frames (empty, -1 where none).
    static ForwardPlace innermostPlace()
    {
        ForwardPlace place {std::string(), -1};
        for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it) {
            if (const char *own = modelScope(*it); own && place.scope.empty())
                place.scope = own;
            if (place.layer < 0)
                place.layer = layerOf(*it);
        }
        return place;
    }
};

namespace {

std::atomic<PeakRecorder::State *> g_active {nullptr};

std::unique_ptr<at::ObserverContext> enterFunction(const at::RecordFunction &fn)
{
    Frame frame {fn.name(), fn.scope(), fn.seqNr(), fn.scope() == at::RecordScope::BACKWARD_FUNCTION ? fn.forwardThreadId() : fn.threadId(), false};
    if (auto *state = g_active.load(std::memory_order_acquire); state && frame.scope == at::RecordScope::FUNCTION) {
        // Autocast casts a weight through aten::_to_copy: the copy is a weight cast, not an activation.
        if (std::strcmp(frame.name, "aten::_to_copy") == 0) {
            const auto inputs = fn.inputs();
            frame.parameterCast = !inputs.empty() && inputs[0].isTensor() && inputs[0].toTensor().defined()
                                  && state->parameterData.count(inputs[0].toTensor().data_ptr()) > 0;
        }
        // The backward node an operator creates carries its sequence number: remember the scope so
        // the node's allocations in the backward pass are booked to the same part of the model. A
        // block rebuilt in the backward (recompute) makes its nodes there, inside its scopes.
        // An op outside every model scope clears the number, so a node it makes is not booked to
        // the last scoped op that peeked the same number.
        if (frame.seq >= 0) {
            auto place = PeakRecorder::State::innermostPlace();
            std::lock_guard lock(state->mutex);
            if (!place.scope.empty() || place.layer >= 0)
                state->forwardPlaceOfSeq[{frame.seqThread, frame.seq}] = std::move(place);
            else
                state->forwardPlaceOfSeq.erase({frame.seqThread, frame.seq});
        }
    }
    t_frames.push_back(frame);
    return nullptr;
}

void exitFunction(const at::RecordFunction &, at::ObserverContext *)
{
    if (!t_frames.empty())
        t_frames.pop_back();
}

// Shares the state: an autograd task's copy of the thread's debug info can outlive the recorder.
struct Reporter final : c10::MemoryReportingInfoBase {
    explicit Reporter(std::shared_ptr<PeakRecorder::State> s) : state(std::move(s)) {}
    // LibTorch 1.13 passes the totals as int64_t, 2.x as size_t: with both defined (no `override`),
    // whichever the installed c10 declares is the override.
    void reportMemoryUsage(void *ptr, int64_t size, int64_t total, int64_t, c10::Device device) { state->onEvent(ptr, size, total, device); }
    void reportMemoryUsage(void *ptr, int64_t size, size_t total, size_t, c10::Device device)
    {
        state->onEvent(ptr, size, static_cast<int64_t>(total), device);
    }
    bool memoryProfilingEnabled() const override { return true; }
    std::shared_ptr<PeakRecorder::State> state;
};

int64_t residentBytes(const torch::Tensor &t)
{
    const int64_t n = static_cast<int64_t>(t.storage().nbytes());
    // The CUDA caching allocator books blocks in multiples of 512 bytes.
    return t.is_cuda() ? (n + 511) / 512 * 512 : n;
}

} // namespace

PeakRecorder::PeakRecorder(const torch::Device &device, int64_t allocatedAtStart, const std::vector<std::pair<torch::Tensor, MemoryPart>> &resident)
    : m_state(std::make_shared<State>(device, allocatedAtStart))
{
    for (const auto &[tensor, part] : resident) {
        if (!tensor.defined() || tensor.device() != device || !tensor.has_storage())
            continue;
        const void *data = tensor.storage().data();
        if (part == MemoryPart::TrainableWeights || part == MemoryPart::FrozenWeights)
            m_state->parameterData.insert(tensor.data_ptr());
        const char *what = part == MemoryPart::Gradients ? "gradients" : part == MemoryPart::Optimizer ? "optimizer state"
                         : part == MemoryPart::TrainableWeights                                     ? "trainable parameters"
                                                                                                    : "frozen parameters and buffers";
        m_state->resident.emplace(data, State::Resident {part, what, residentBytes(tensor)});
    }
    State *expected = nullptr;
    TORCH_CHECK(g_active.compare_exchange_strong(expected, m_state.get()), "one peak recorder at a time");
    m_reporter = std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, std::make_shared<Reporter>(m_state));
    m_callback = at::addGlobalCallback(at::RecordFunctionCallback(&enterFunction, &exitFunction).needsInputs(true));
}

PeakRecorder::~PeakRecorder() { uninstall(); }

void PeakRecorder::uninstall()
{
    if (!m_reporter)
        return;
    at::removeCallback(m_callback);
    g_active.store(nullptr, std::memory_order_release);
    m_reporter.reset(); // puts the thread's previous debug info back
}

void PeakRecorder::setPhase(StepPhase phase) { m_state->phase.store(phase); }

void PeakRecorder::noteGradients(const std::vector<torch::Tensor> &parameters)
{
    std::lock_guard lock(m_state->mutex);
    for (const auto &p : parameters) {
        const auto &grad = p.grad();
        if (!grad.defined() || !grad.has_storage())
            continue;
        const auto found = m_state->liveEvent.find(grad.storage().data());
        if (found != m_state->liveEvent.end())
            m_state->gradientEvents.insert(found->second);
    }
}

MemoryAttribution PeakRecorder::finish(int64_t step, int64_t allocatorPeak)
{
    uninstall();
    State &s = *m_state;
    std::lock_guard lock(s.mutex);
    MemoryAttribution out;
    out.step = step;
    out.device = s.device.str();

    // The peak is the allocator's own highest count; replay the events up to it.
    int64_t peak = s.allocatedAtStart;
    std::optional<size_t> peakAt;
    for (size_t i = 0; i < s.events.size(); ++i)
        if (s.events[i].total > peak) {
            peak = s.events[i].total;
            peakAt = i;
        }
    out.peakAllocatedBytes = std::max(peak, allocatorPeak);

    auto resident = s.resident;
    int64_t unknownResident = s.allocatedAtStart;
    for (const auto &[ptr, r] : resident)
        unknownResident -= r.bytes;
    unknownResident = std::max<int64_t>(unknownResident, 0);
    std::unordered_map<void *, size_t> live;
    const size_t end = peakAt ? *peakAt + 1 : 0;
    for (size_t i = 0; i < end; ++i) {
        const auto &e = s.events[i];
        if (e.size > 0) {
            live[e.ptr] = i;
            resident.erase(e.ptr); // its free went unreported
        } else if (!live.erase(e.ptr) && !resident.erase(e.ptr)) {
            unknownResident = std::max<int64_t>(unknownResident + e.size, 0);
        }
    }

    std::map<std::tuple<std::string, std::string, std::string, int>, MemorySite> sites;
    auto add = [&](const std::string &phase, const std::string &scope, const std::string &op, MemoryPart part, int64_t bytes) {
        auto &site = sites[{phase, scope, op, static_cast<int>(part)}];
        site.phase = phase;
        site.scope = scope;
        site.op = op;
        site.part = part;
        site.bytes += bytes;
        site.blocks += 1;
    };
    for (const auto &[ptr, r] : resident)
        add("before", r.what, "", r.part, r.bytes);
    if (unknownResident > 0)
        add("before", "other tensors", "", MemoryPart::Other, unknownResident);
    auto partOf = [&s](size_t index, const State::Label &label) {
        if (s.gradientEvents.count(index))
            return MemoryPart::Gradients;
        if (label.phase == "optimizer")
            return MemoryPart::Optimizer;
        if (label.cast)
            return MemoryPart::WeightCasts;
        if (label.scope == "head")
            return MemoryPart::Logits;
        return MemoryPart::Activations;
    };
    // In the order made: the live list is that order, the sites' sums do not depend on it.
    std::vector<size_t> liveInOrder;
    liveInOrder.reserve(live.size());
    for (const auto &[ptr, index] : live)
        liveInOrder.push_back(index);
    std::sort(liveInOrder.begin(), liveInOrder.end());
    for (const size_t index : liveInOrder) {
        const auto &e = s.events[index];
        const auto &label = s.labels[static_cast<size_t>(e.label)];
        const MemoryPart part = partOf(index, label);
        add(label.phase, label.scope, label.op, part, e.size);
        out.live.push_back({label.phase, label.scope, label.op, part, e.size, 1, label.layer});
    }
    int64_t attributed = 0;
    for (auto &[key, site] : sites) {
        out.parts[static_cast<size_t>(site.part)] += site.bytes;
        attributed += site.bytes;
        out.sites.push_back(std::move(site));
    }
    // What the events could not place (frees on threads the hook does not see, allocator rounding).
    if (out.peakAllocatedBytes > attributed)
        out.parts[static_cast<size_t>(MemoryPart::Other)] += out.peakAllocatedBytes - attributed;
    std::sort(out.sites.begin(), out.sites.end(), [](const MemorySite &a, const MemorySite &b) { return a.bytes > b.bytes; });
    if (peakAt) {
        const auto &label = s.labels[static_cast<size_t>(s.events[*peakAt].label)];
        out.peakPhase = label.phase;
        out.peakSite = label.scope + " / " + label.op;
    } else {
        out.peakPhase = "before";
        out.peakSite = "tensors live when the step began";
    }
    return out;
}

} // namespace pb
