#include "dist/FsdpHooks.h"

#include "util/Errors.h"

#include <c10/core/DeviceGuard.h>

#include <chrono>
#include <map>
#include <thread>

namespace pb {
namespace {

// How many handles share each of `tensors`, before a collective takes its own.
std::vector<long> useCounts(const std::vector<torch::Tensor> &tensors)
{
    std::vector<long> counts;
    for (const auto &t : tensors)
        counts.push_back(static_cast<long>(t.use_count()));
    return counts;
}

// Gloo's worker thread lets go of a finished collective, and of its handles on the collective's
// tensors, only after wait() has returned: waits (briefly, bounded) until it has, so a buffer this
// rank drops is freed then and not whenever the worker is next scheduled. Under load the FSDP peak
// otherwise grew by a staged gather buffer (+6.1% and +9.6% over the estimate in e2e_tst_cli_scale's
// lora bf16-mixed row, seen twice in full CTest runs at -j2, passing alone).
void awaitWorkerRelease(const std::vector<torch::Tensor> &tensors, const std::vector<long> &counts)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (size_t i = 0; i < tensors.size(); ++i)
        while (static_cast<long>(tensors[i].use_count()) > counts[i] && std::chrono::steady_clock::now() < deadline)
            std::this_thread::yield();
}

// Frees the memory behind `t` and every view of it without touching the tensors themselves
// (what FSDP's storage resize_(0) does): autograd's saved views stay valid handles.
void releaseStorage(const torch::Tensor &t)
{
    c10::StorageImpl *storage = t.storage().unsafeGetStorageImpl();
    storage->set_data_ptr_noswap(c10::DataPtr(nullptr, t.device()));
    storage->set_nbytes(static_cast<size_t>(0));
}

void allocateStorage(const torch::Tensor &t, int64_t bytes)
{
    // The caching allocator allocates on the current device, which on rank r's main thread is not
    // necessarily cuda:r.
    const c10::DeviceGuard onDevice(t.device());
    c10::StorageImpl *storage = t.storage().unsafeGetStorageImpl();
    storage->set_data_ptr_noswap(storage->allocator()->allocate(static_cast<size_t>(bytes)));
    storage->set_nbytes(static_cast<size_t>(bytes));
}

// One view per tensor of `params` into the flat buffer, shaped like it, in order.
std::vector<torch::Tensor> viewsInto(const torch::Tensor &flat, const std::vector<torch::Tensor> &params)
{
    std::vector<torch::Tensor> views;
    int64_t offset = 0;
    for (const auto &p : params) {
        views.push_back(flat.narrow(0, offset, p.numel()).view(p.sizes()));
        offset += p.numel();
    }
    return views;
}

} // namespace

FsdpHooks::FsdpHooks(c10::intrusive_ptr<compat::CollectiveGroup> group, const Rendezvous &rendezvous, bool nccl, double gradClip, std::string dumpPath)
    : ParallelHooksBase(std::move(group), rendezvous, std::move(dumpPath)), m_nccl(nccl), m_gradClip(gradClip)
{
}

FsdpHooks::~FsdpHooks()
{
    if (m_model && !m_modelAlive.expired())
        m_model->setBlockHooks(nullptr);
}

void FsdpHooks::shardModel(DecoderModelImpl &model)
{
    torch::NoGradGuard noGrad;
    m_model = &model;
    m_modelAlive = model.shared_from_this();
    std::vector<std::vector<torch::Tensor>> unitParams;
    for (auto &block : model.stack->blocks)
        unitParams.push_back(block->parameters());
    std::vector<torch::Tensor> rootParams {model.stack->embedTokens->weight, model.stack->norm->weight};
    if (model.stack->embedPerLayer) { // Gemma 4's per-layer embeddings, used beside the embedding
        rootParams.push_back(model.stack->embedPerLayer->weight);
        for (auto &p : model.stack->perLayerModelProjection->parameters())
            rootParams.push_back(p);
        rootParams.push_back(model.stack->perLayerProjectionNorm->weight);
    }
    if (model.lmHead)
        rootParams.push_back(model.lmHead->weight);
    unitParams.push_back(rootParams);

    const int64_t world = m_rendezvous.worldSize;
    const auto start = Clock::now();
    for (auto &params : unitParams) {
        Unit unit;
        // One flat buffer per (dtype, trainable): LoRA mixes fp32 adapters with 16-bit frozen weights.
        std::map<std::pair<int, bool>, size_t> groupOf;
        for (auto &p : params) {
            const auto key = std::make_pair(static_cast<int>(p.scalar_type()), p.requires_grad());
            auto it = groupOf.find(key);
            if (it == groupOf.end()) {
                it = groupOf.emplace(key, unit.groups.size()).first;
                unit.groups.emplace_back();
                unit.groups.back().trainable = p.requires_grad();
            }
            unit.groups[it->second].params.push_back(p);
        }
        for (auto &g : unit.groups) {
            int64_t total = 0;
            for (const auto &p : g.params)
                total += p.numel();
            const int64_t shardSize = (total + world - 1) / world;
            auto full = torch::zeros({shardSize * world}, g.params.front().options().requires_grad(false));
            auto views = viewsInto(full, g.params);
            for (size_t i = 0; i < views.size(); ++i)
                views[i].copy_(g.params[i]);
            // Every rank's shard comes from rank 0's values, as DDP's broadcast makes its replicas.
            if (m_group) {
                std::vector<torch::Tensor> flat {wireTensor(full)};
                c10d::BroadcastOptions options;
                options.rootRank = 0;
                m_group->broadcast(flat, options)->wait();
                if (!flat.front().is_same(full))
                    full.copy_(flat.front());
            }
            for (size_t i = 0; i < views.size(); ++i)
                g.params[i].set_data(views[i]);
            g.full = full;
            g.fullBytes = bytesOf(full);
            g.shard = full.narrow(0, shardSize * m_rendezvous.rank, shardSize).clone();
            if (g.trainable) {
                g.shard.requires_grad_(true);
                m_ownedParameters += shardSize;
            }
        }
        unit.gathered = true;
        m_units.push_back(std::move(unit));
        reshard(m_units.back());
    }
    synchronizeDevice(m_units.front().groups.front().full.device());
    m_broadcastMs = msSince(start);
    model.setBlockHooks(this);
}

std::vector<torch::Tensor> FsdpHooks::optimizerParameters(std::vector<torch::Tensor> /*trainable: now the shards'*/)
{
    std::vector<torch::Tensor> shards;
    for (auto &unit : m_units)
        for (auto &g : unit.groups)
            if (g.trainable)
                shards.push_back(g.shard);
    return shards;
}

void FsdpHooks::gather(Unit &unit)
{
    if (unit.gathered)
        return;
    torch::NoGradGuard noGrad;
    const auto device = unit.groups.front().full.device();
    synchronizeDevice(device);
    const auto start = Clock::now();
    for (auto &g : unit.groups) {
        allocateStorage(g.full, g.fullBytes);
        if (!m_group) {
            g.full.copy_(g.shard.detach());
            continue;
        }
        std::vector<torch::Tensor> input {wireTensor(g.shard.detach())};
        if (m_nccl) {
            m_group->_allgather_base(g.full, input.front())->wait();
        } else {
            const bool staged = input.front().scalar_type() != g.full.scalar_type();
            auto target = staged ? torch::empty({g.full.numel()}, input.front().options()) : g.full;
            std::vector<std::vector<torch::Tensor>> outputs(1);
            for (int r = 0; r < m_rendezvous.worldSize; ++r)
                outputs.front().push_back(target.narrow(0, g.shard.numel() * r, g.shard.numel()));
            const auto inputCounts = useCounts(input), outputCounts = useCounts(outputs.front());
            m_group->allgather(outputs, input)->wait();
            awaitWorkerRelease(input, inputCounts);
            awaitWorkerRelease(outputs.front(), outputCounts);
            if (staged)
                g.full.copy_(target);
        }
    }
    synchronizeDevice(device);
    m_commMs += msSince(start);
    unit.gathered = true;
}

void FsdpHooks::reshard(Unit &unit)
{
    if (!unit.gathered)
        return;
    for (auto &g : unit.groups)
        releaseStorage(g.full);
    unit.gathered = false;
}

// Gradients accumulate straight into one flat buffer (AccumulateGrad adds into a defined grad),
// so the reduce-scatter needs no copy.
void FsdpHooks::expectGradients(Unit &unit)
{
    if (unit.gradientsPending)
        return;
    for (auto &g : unit.groups) {
        if (!g.trainable)
            continue;
        g.gradFull = torch::zeros_like(g.full);
        const auto views = viewsInto(g.gradFull, g.params);
        for (size_t i = 0; i < views.size(); ++i)
            g.params[i].mutable_grad() = views[i];
        unit.gradientsPending = true;
    }
}

void FsdpHooks::reduceGradients(Unit &unit)
{
    if (!unit.gradientsPending)
        return;
    torch::NoGradGuard noGrad;
    const auto device = unit.groups.front().full.device();
    synchronizeDevice(device);
    const auto start = Clock::now();
    for (auto &g : unit.groups) {
        if (!g.trainable)
            continue;
        for (auto &p : g.params)
            p.mutable_grad() = torch::Tensor();
        torch::Tensor mine;
        if (!m_group) {
            mine = g.gradFull;
        } else if (m_nccl) {
            mine = torch::empty_like(g.shard);
            m_group->_reduce_scatter_base(mine, g.gradFull)->wait();
        } else {
            // Gloo has no reduce-scatter in every LibTorch this builds against: the all-reduce
            // gives the same sums, and this rank keeps its slice.
            std::vector<torch::Tensor> flat {wireTensor(g.gradFull)};
            const auto counts = useCounts(flat);
            m_group->allreduce(flat)->wait();
            awaitWorkerRelease(flat, counts);
            mine = flat.front().narrow(0, g.shard.numel() * m_rendezvous.rank, g.shard.numel()).to(g.shard.scalar_type(), false, /*copy=*/true);
        }
        g.gradFull = torch::Tensor();
        mine.mul_(1.0 / m_rendezvous.worldSize);
        auto &grad = g.shard.mutable_grad();
        if (grad.defined())
            grad.add_(mine);
        else
            grad = mine;
    }
    synchronizeDevice(device);
    m_commMs += msSince(start);
    unit.gradientsPending = false;
}

void FsdpHooks::finishBlock(size_t index)
{
    Unit &unit = m_units[index];
    reduceGradients(unit);
    reshard(unit);
}

void FsdpHooks::beforeModel()
{
    std::lock_guard lock(m_mutex);
    // Blocks whose backward ended without a hook firing (no gradient reached their input) are
    // reduced before the next micro-batch can add to their gradients.
    for (size_t i = 0; i + 1 < m_units.size(); ++i)
        if (m_units[i].gradientsPending)
            finishBlock(i);
    gather(root());
    if (torch::GradMode::is_enabled() && m_model->is_training())
        expectGradients(root());
}

void FsdpHooks::beforeBlock(size_t index, const torch::Tensor &input)
{
    std::lock_guard lock(m_mutex);
    gather(m_units[index]);
    // The first block's input gradient is the last thing its backward makes.
    if (index == 0 && input.requires_grad())
        input.register_hook([this](const torch::Tensor &) {
            std::lock_guard lock(m_mutex);
            finishBlock(0);
        });
}

void FsdpHooks::afterBlock(size_t index, const torch::Tensor &output)
{
    std::lock_guard lock(m_mutex);
    reshard(m_units[index]);
    if (!output.requires_grad())
        return;
    // The gradient of this block's output exists before any of the block's backward runs (and
    // after all of the next block's): reduce that one, gather this one.
    output.register_hook([this, index](const torch::Tensor &) {
        std::lock_guard lock(m_mutex);
        if (index + 2 < m_units.size())
            finishBlock(index + 1);
        gather(m_units[index]);
        expectGradients(m_units[index]);
    });
}

void FsdpHooks::afterBackward(std::vector<torch::Tensor> & /*params: the shards*/)
{
    std::lock_guard lock(m_mutex);
    for (size_t i = 0; i + 1 < m_units.size(); ++i)
        if (m_units[i].gradientsPending)
            finishBlock(i);
    reduceGradients(root());
    reshard(root());
    std::vector<torch::Tensor> grads;
    m_gradientBytes = 0;
    for (auto &unit : m_units)
        for (auto &g : unit.groups)
            if (g.trainable) {
                if (!g.shard.grad().defined()) // a unit this rank's batch did not reach
                    g.shard.mutable_grad() = torch::zeros_like(g.shard);
                grads.push_back(g.shard.grad());
                m_gradientBytes += g.fullBytes;
            }
    if (!grads.empty()) {
        const auto start = Clock::now();
        clipShardedGradients(grads, m_gradClip, grads.front().device());
        m_commMs += msSince(start);
    }
    m_stepCommMs.push_back(m_commMs);
    m_commMs = 0;
}

void FsdpHooks::trainingFinished(const std::vector<torch::Tensor> &params)
{
    for (auto &unit : m_units)
        gather(unit);
    ParallelHooksBase::trainingFinished(params);
}

std::vector<std::pair<std::string, torch::Tensor>> FsdpHooks::modelShards()
{
    std::vector<std::pair<std::string, torch::Tensor>> shards;
    for (size_t u = 0; u < m_units.size(); ++u)
        for (size_t g = 0; g < m_units[u].groups.size(); ++g)
            shards.emplace_back("unit" + std::to_string(u) + ".group" + std::to_string(g), m_units[u].groups[g].shard);
    return shards;
}

} // namespace pb
