#include "dist/DataParallelHooks.h"

#include "util/Errors.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <map>

namespace pb {

DataParallelHooks::DataParallelHooks(c10::intrusive_ptr<compat::CollectiveGroup> group, const Rendezvous &rendezvous, DataParallelStrategy strategy,
                                     double gradClip, int64_t bucketBytes, bool overlap, std::string dumpPath)
    : ParallelHooksBase(std::move(group), rendezvous, std::move(dumpPath)), m_strategy(strategy), m_gradClip(gradClip), m_bucketBytes(bucketBytes),
      m_overlap(overlap)
{
}

std::vector<torch::Tensor> DataParallelHooks::optimizerParameters(std::vector<torch::Tensor> trainable)
{
    m_trainable = trainable;
    if (m_strategy == DataParallelStrategy::Ddp) {
        for (const auto &p : trainable)
            m_ownedParameters += p.numel();
        if (m_group && m_overlap && !trainable.empty())
            makeBuckets();
        return trainable;
    }
    // Largest first to the least-loaded rank: every rank computes the same assignment. Parameters
    // sharing one storage (a layer's pooled experts, whose gradients are views of one allocation
    // too) go to one owner together, or every rank would keep the whole pool's gradient alive.
    std::vector<std::vector<size_t>> groups;
    std::vector<int64_t> groupNumel;
    std::map<const void *, size_t> groupOf;
    for (size_t i = 0; i < trainable.size(); ++i) {
        const auto [it, fresh] = groupOf.emplace(trainable[i].storage().unsafeGetStorageImpl(), groups.size());
        if (fresh) {
            groups.emplace_back();
            groupNumel.push_back(0);
        }
        groups[it->second].push_back(i);
        groupNumel[it->second] += trainable[i].numel();
    }
    std::vector<size_t> order(groups.size());
    for (size_t g = 0; g < order.size(); ++g)
        order[g] = g;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groupNumel[a] > groupNumel[b]; });
    std::vector<int64_t> load(static_cast<size_t>(m_rendezvous.worldSize), 0);
    m_owner.assign(trainable.size(), 0);
    for (size_t g : order) {
        const auto least = std::min_element(load.begin(), load.end()) - load.begin();
        for (size_t i : groups[g])
            m_owner[i] = static_cast<int>(least);
        load[static_cast<size_t>(least)] += groupNumel[g];
    }
    std::vector<torch::Tensor> owned;
    for (size_t i = 0; i < trainable.size(); ++i) {
        if (m_owner[i] == m_rendezvous.rank) {
            owned.push_back(trainable[i]);
            m_ownedParameters += trainable[i].numel();
        }
    }
    if (m_group && !trainable.empty())
        makeBuckets();
    return owned;
}

// Groups tensors of one dtype and device into flat buckets of about m_bucketBytes, runs `op` on
// each, waits, then copies the results back (times `scale` when not 1); at most `maxInFlight`
// buckets are in flight (made and not yet copied back) at a time.
template<typename Op>
void DataParallelHooks::forEachBucket(std::vector<torch::Tensor> &tensors, Op op, double scale, size_t maxInFlight)
{
    std::vector<std::vector<torch::Tensor>> buckets;
    int64_t bytes = 0;
    for (const auto &t : tensors) {
        const bool fresh = buckets.empty() || bytes + bytesOf(t) > m_bucketBytes || buckets.back().front().scalar_type() != t.scalar_type()
                           || buckets.back().front().device() != t.device();
        if (fresh) {
            buckets.emplace_back();
            bytes = 0;
        }
        buckets.back().push_back(t);
        bytes += bytesOf(t);
    }
    std::vector<torch::Tensor> flats(buckets.size());
    std::vector<c10::intrusive_ptr<c10d::Work>> works(buckets.size());
    size_t done = 0;
    const auto finish = [&](size_t b) {
        works[b]->wait();
        auto &flat = flats[b];
        if (scale != 1.0)
            flat.mul_(scale);
        int64_t offset = 0;
        for (auto &t : buckets[b]) {
            t.copy_(flat.narrow(0, offset, t.numel()).view_as(t));
            offset += t.numel();
        }
        // The finished work still shares this tensor until the backend's thread lets go of it,
        // which may be after the next call's buckets are made (the next owner's, the next step's):
        // without this, 2 CPU ranks under ZeRO-2 peaked one flat bucket higher in most runs than
        // in the others (59.25 MB or 50.79 MB).
        flat.set_();
        works[b].reset();
    };
    for (size_t b = 0; b < buckets.size(); ++b) {
        while (b - done >= maxInFlight)
            finish(done++);
        std::vector<torch::Tensor> views;
        for (const auto &t : buckets[b])
            views.push_back(t.reshape({-1}));
        std::vector<torch::Tensor> flat {wireTensor(torch::cat(views))};
        works[b] = op(flat);
        flats[b] = flat.front();
    }
    while (done < buckets.size())
        finish(done++);
}

void DataParallelHooks::broadcastParameters(std::vector<torch::Tensor> &params)
{
    if (!m_group || params.empty())
        return;
    const auto start = Clock::now();
    torch::NoGradGuard noGrad;
    std::vector<torch::Tensor> data;
    for (auto &p : params)
        data.push_back(p.detach());
    forEachBucket(data, [this](std::vector<torch::Tensor> &flat) {
        c10d::BroadcastOptions options;
        options.rootRank = 0;
        return m_group->broadcast(flat, options);
    });
    synchronizeDevice(params.front().device());
    m_broadcastMs = msSince(start);
}

void DataParallelHooks::makeBuckets()
{
    m_bucketOf.assign(m_trainable.size(), 0);
    m_arrived.assign(m_trainable.size(), 0);
    // Groups of about m_bucketBytes of one dtype and device, in the order backward makes them.
    std::vector<std::vector<size_t>> groups;
    int64_t bytes = 0;
    for (size_t k = m_trainable.size(); k-- > 0;) {
        const auto &p = m_trainable[k];
        const bool fresh = groups.empty() || bytes + bytesOf(p) > m_bucketBytes || m_trainable[groups.back().front()].scalar_type() != p.scalar_type()
                           || m_trainable[groups.back().front()].device() != p.device();
        if (fresh) {
            groups.emplace_back();
            bytes = 0;
        }
        groups.back().push_back(k);
        bytes += bytesOf(p);
    }
    // ZeRO-2: a group's tensors of each owner form a bucket of their own, reduced to that owner.
    std::vector<int> owners {-1};
    if (m_strategy == DataParallelStrategy::Zero2) {
        owners.clear();
        for (int r = 0; r < m_rendezvous.worldSize; ++r)
            owners.push_back(r);
    }
    for (const auto &group : groups)
        for (int owner : owners) {
            Bucket bucket;
            bucket.owner = owner;
            for (size_t k : group) {
                if (owner >= 0 && m_owner[k] != owner)
                    continue;
                bucket.offsets.push_back(bucket.numel);
                bucket.params.push_back(k);
                bucket.numel += m_trainable[k].numel();
                m_bucketOf[k] = m_buckets.size();
            }
            if (!bucket.params.empty())
                m_buckets.push_back(std::move(bucket));
        }
    for (auto &bucket : m_buckets) {
        const auto &p = m_trainable[bucket.params.front()];
        bucket.direct = bucket.owner >= 0 && bucket.params.size() == 1 && bytesOf(p) > m_bucketBytes && wireType(p.scalar_type()) == p.scalar_type();
    }
    if (m_strategy == DataParallelStrategy::Ddp)
        for (auto &bucket : m_buckets) {
            const auto &last = m_trainable[bucket.params.back()];
            bucket.flat = torch::empty({bucket.numel}, last.options().dtype(wireType(last.scalar_type())));
        }
    for (size_t k = 0; k < m_trainable.size(); ++k)
        m_trainable[k].register_hook([this, k](torch::Tensor grad) { gradientReady(k, grad); });
}

void DataParallelHooks::beforeBackward(bool last)
{
    std::lock_guard lock(m_bucketMutex);
    m_lastMicroBatch = last && !m_buckets.empty();
    if (!m_lastMicroBatch)
        return;
    for (auto &bucket : m_buckets)
        bucket.pending = bucket.params.size();
    std::fill(m_arrived.begin(), m_arrived.end(), 0);
    m_works.clear();
    m_nextLaunch = 0;
    m_nextFinish = 0;
    m_dropGrads.clear();
    m_hookedDirect = SIZE_MAX;
    for (auto &bucket : m_buckets)
        bucket.accumulated = false;
}

// Runs inside backward, before the gradient is added to p.grad: the bucket takes the final value.
void DataParallelHooks::gradientReady(size_t k, const torch::Tensor &grad)
{
    std::lock_guard lock(m_bucketMutex);
    if (!m_lastMicroBatch)
        return;
    if (m_arrived[k]) {
        // (A tensor used both inside a recomputed block and outside it would get two; no model
        // does today. Said once, since the reduced gradient then lacks the second.)
        if (!m_warnedTwice)
            spdlog::warn("trainable tensor {}: a second gradient in one backward is not reduced", k);
        m_warnedTwice = true;
        return;
    }
    torch::NoGradGuard noGrad;
    // Every gradient hooked before this one has been accumulated into its .grad by now (the hook
    // runs just before its own accumulation), so the buckets launched before this call can be
    // copied back too.
    gradientsAccumulated();
    // At most one bucket reducing while the next ones fill, as DeepSpeed's pair of buffers: on 2
    // CPU ranks Gloo finished its reduces so late that half the buckets of a 1 MiB run were alive
    // at the end of the backward (the per-rank peak 14 MB, 25%, above the estimate). The newest
    // launched bucket is left alone while its reduce runs.
    if (m_strategy == DataParallelStrategy::Zero2)
        finishReducedBuckets(1);
    auto &bucket = m_buckets[m_bucketOf[k]];
    const auto &p = m_trainable[k];
    if (bucket.direct) {
        m_arrived[k] = 1;
        --bucket.pending;
        m_hookedDirect = m_bucketOf[k];
        return;
    }
    if (!bucket.flat.defined())
        bucket.flat = torch::empty({bucket.numel}, p.options().dtype(wireType(p.scalar_type())));
    const auto position = std::find(bucket.params.begin(), bucket.params.end(), k) - bucket.params.begin();
    auto slice = bucket.flat.narrow(0, bucket.offsets[static_cast<size_t>(position)], p.numel()).view(p.sizes());
    if (p.grad().defined())
        torch::add_out(slice, p.grad(), grad);
    else
        slice.copy_(grad);
    m_arrived[k] = 1;
    --bucket.pending;
    if (bucket.owner >= 0 && bucket.owner != m_rendezvous.rank)
        m_dropGrads.push_back(k);
    launchCompleteBuckets();
}

void DataParallelHooks::gradientsAccumulated()
{
    for (size_t j : m_dropGrads)
        m_trainable[j].mutable_grad() = torch::Tensor();
    m_dropGrads.clear();
    if (m_hookedDirect != SIZE_MAX) {
        m_buckets[m_hookedDirect].accumulated = true;
        m_hookedDirect = SIZE_MAX;
        launchCompleteBuckets();
    }
}

void DataParallelHooks::launchCompleteBuckets()
{
    while (m_nextLaunch < m_buckets.size() && m_buckets[m_nextLaunch].pending == 0 && (!m_buckets[m_nextLaunch].direct || m_buckets[m_nextLaunch].accumulated)) {
        const auto &bucket = m_buckets[m_nextLaunch];
        std::vector<torch::Tensor> flat {bucket.direct ? m_trainable[bucket.params.front()].grad() : bucket.flat};
        if (bucket.owner >= 0) {
            c10d::ReduceOptions options;
            options.rootRank = bucket.owner;
            m_works.push_back(m_group->reduce(flat, options));
        } else {
            m_works.push_back(m_group->allreduce(flat));
        }
        ++m_nextLaunch;
    }
}

void DataParallelHooks::finishReducedBuckets(size_t inFlight)
{
    const double inverse = 1.0 / m_rendezvous.worldSize;
    for (; m_nextFinish < m_nextLaunch; ++m_nextFinish) {
        auto &work = m_works[m_nextFinish];
        if (m_nextLaunch - m_nextFinish <= inFlight && !work->isCompleted())
            return;
        work->wait();
        auto &bucket = m_buckets[m_nextFinish];
        if (bucket.direct) {
            auto &p = m_trainable[bucket.params.front()];
            if (bucket.owner == m_rendezvous.rank) {
                p.mutable_grad().mul_(inverse);
            } else {
                // The work holds this very tensor: emptying it frees the storage now.
                auto sent = p.grad();
                p.mutable_grad() = torch::Tensor();
                sent.set_();
            }
            continue;
        }
        if (bucket.owner == m_rendezvous.rank)
            averageIntoGrads(bucket);
        // The work shares this tensor (not a view of it): emptying it frees the storage whether or
        // not the backend's thread still holds the work (forEachBucket's reason, below).
        bucket.flat.set_();
        bucket.flat = torch::Tensor();
    }
}

void DataParallelHooks::averageIntoGrads(Bucket &bucket)
{
    bucket.flat.mul_(1.0 / m_rendezvous.worldSize);
    for (size_t i = 0; i < bucket.params.size(); ++i) {
        auto &grad = m_trainable[bucket.params[i]].mutable_grad();
        grad.copy_(bucket.flat.narrow(0, bucket.offsets[i], grad.numel()).view_as(grad));
    }
}

void DataParallelHooks::finishOverlappedReduce()
{
    std::lock_guard lock(m_bucketMutex);
    const bool zero2 = m_strategy == DataParallelStrategy::Zero2;
    gradientsAccumulated();
    // Gradients backward never produced here (a parameter this rank's batch did not reach) join
    // now, so the buckets and their order stay the same on every rank.
    for (auto &bucket : m_buckets) {
        for (size_t i = 0; i < bucket.params.size(); ++i) {
            const size_t k = bucket.params[i];
            if (m_arrived[k])
                continue;
            auto &p = m_trainable[k];
            if (!p.grad().defined())
                p.mutable_grad() = torch::zeros_like(p);
            if (bucket.direct) {
                m_arrived[k] = 1;
                --bucket.pending;
                bucket.accumulated = true;
                continue;
            }
            if (!bucket.flat.defined())
                bucket.flat = torch::empty({bucket.numel}, p.options().dtype(wireType(p.scalar_type())));
            auto slice = bucket.flat.narrow(0, bucket.offsets[i], p.numel());
            slice.copy_(p.grad().reshape({-1}));
            if (zero2 && bucket.owner != m_rendezvous.rank)
                p.mutable_grad() = torch::Tensor();
            m_arrived[k] = 1;
            --bucket.pending;
        }
    }
    launchCompleteBuckets();
    if (zero2) {
        finishReducedBuckets(0);
    } else {
        for (auto &work : m_works)
            work->wait();
        for (auto &bucket : m_buckets)
            averageIntoGrads(bucket);
    }
    m_works.clear();
    m_lastMicroBatch = false;
    if (zero2) {
        std::vector<torch::Tensor> owned;
        for (size_t i = 0; i < m_trainable.size(); ++i) {
            if (m_owner[i] == m_rendezvous.rank)
                owned.push_back(m_trainable[i].grad());
            else // nothing of another rank's outlives the step (the optimizer clears only its own)
                m_trainable[i].mutable_grad() = torch::Tensor();
        }
        clipShardedGradients(owned, m_gradClip, m_trainable.front().device());
    }
}

void DataParallelHooks::afterBackward(std::vector<torch::Tensor> & /*ownParams: the engine's view*/)
{
    if (!m_group || m_trainable.empty()) {
        m_stepCommMs.push_back(0);
        return;
    }
    const auto start = Clock::now();
    torch::NoGradGuard noGrad;
    m_gradientBytes = 0;
    for (auto &p : m_trainable)
        m_gradientBytes += bytesOf(p);
    if (!m_buckets.empty()) {
        finishOverlappedReduce(); // what remains after backward is the exposed communication
    } else {
        std::vector<torch::Tensor> grads;
        for (auto &p : m_trainable) {
            if (!p.grad().defined()) // a parameter this rank's batch did not reach still takes part
                p.mutable_grad() = torch::zeros_like(p);
            grads.push_back(p.grad());
        }
        forEachBucket(grads, [this](std::vector<torch::Tensor> &flat) { return m_group->allreduce(flat); }, 1.0 / m_rendezvous.worldSize);
    }
    synchronizeDevice(m_trainable.front().device());
    m_stepCommMs.push_back(msSince(start));
}

void DataParallelHooks::afterOptimizerStep()
{
    if (!m_group || m_strategy != DataParallelStrategy::Zero2)
        return;
    const auto start = Clock::now();
    torch::NoGradGuard noGrad;
    for (int owner = 0; owner < m_rendezvous.worldSize; ++owner) {
        c10d::BroadcastOptions options;
        options.rootRank = owner;
        // A tensor larger than a bucket goes out in place (a flat copy of an untied head would be
        // a second [V, h] beside the states); the rest two flat buckets at a time, not the owner's
        // whole share at once.
        std::vector<torch::Tensor> data;
        for (size_t i = 0; i < m_trainable.size(); ++i) {
            if (m_owner[i] != owner)
                continue;
            auto t = m_trainable[i].detach();
            if (bytesOf(t) > m_bucketBytes && t.is_contiguous() && wireType(t.scalar_type()) == t.scalar_type()) {
                std::vector<torch::Tensor> inPlace {t};
                m_group->broadcast(inPlace, options)->wait();
            } else {
                data.push_back(t);
            }
        }
        if (!data.empty())
            forEachBucket(data, [this, &options](std::vector<torch::Tensor> &flat) { return m_group->broadcast(flat, options); }, 1.0, 2);
    }
    synchronizeDevice(m_trainable.front().device());
    if (!m_stepCommMs.empty())
        m_stepCommMs.back() += msSince(start);
}

} // namespace pb
