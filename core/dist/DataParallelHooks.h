#pragma once
// Internal to core/dist (includes torch and c10d): the engine hooks of the data-parallel
// strategies. DDP replicates everything and averages gradients with all-reduce, bucket by bucket
// as the last micro-batch's backward pass produces them (overlap), or after it. ZeRO-2 replicates
// the parameters but gives each trainable tensor one owner rank: during the last micro-batch's
// backward each bucket of one owner's gradients is reduced to that owner as soon as it is complete,
// and the other ranks drop those gradients (so a rank holds its own share and the buckets in
// flight, as DeepSpeed's stage 2 does); only the owner keeps optimizer state and steps it, then
// broadcasts the updated tensor. Same mathematics as DDP, optimizer state and gradients divided
// among ranks.
#include "dist/ParallelHooksBase.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace pb {

enum class DataParallelStrategy { Ddp, Zero2 };

class DataParallelHooks final : public ParallelHooksBase {
public:
    DataParallelHooks(c10::intrusive_ptr<compat::CollectiveGroup> group, const Rendezvous &rendezvous, DataParallelStrategy strategy, double gradClip,
                      int64_t bucketBytes, bool overlap, std::string dumpPath);

    std::vector<torch::Tensor> optimizerParameters(std::vector<torch::Tensor> trainable) override;
    void broadcastParameters(std::vector<torch::Tensor> &params) override;
    void beforeBackward(bool last) override;
    void afterBackward(std::vector<torch::Tensor> &params) override;
    void afterOptimizerStep() override;
    bool overlapping() const override { return !m_buckets.empty(); }
    std::string checkpointStrategy() const override { return m_strategy == DataParallelStrategy::Zero2 ? "zero2" : "ddp"; }

private:
    template<typename Op>
    void forEachBucket(std::vector<torch::Tensor> &tensors, Op op, double scale = 1.0, size_t maxInFlight = SIZE_MAX);
    // Overlap: flat buckets over the trainable gradients in reverse model order (the order backward
    // produces them); each is all-reduced (ZeRO-2: reduced to its owner) once complete, strictly in
    // bucket order so every rank issues the same sequence of collectives. DDP's are persistent;
    // ZeRO-2's hold one owner's tensors each, made at their first gradient and released once reduced.
    struct Bucket {
        std::vector<size_t> params;
        std::vector<int64_t> offsets;
        torch::Tensor flat;
        size_t pending = 0;
        int owner = -1;                 // ZeRO-2: the rank the bucket is reduced to
        int64_t numel = 0;
        // ZeRO-2: one tensor larger than a bucket, reduced in its own .grad (no flat copy beside
        // it, as DeepSpeed reduces such a tensor), launched once the gradient is accumulated.
        bool direct = false;
        bool accumulated = false;
    };
    void makeBuckets();
    void gradientReady(size_t param, const torch::Tensor &grad);
    // ZeRO-2: every gradient hooked so far is in its .grad: others' are dropped, and a bucket
    // reduced in its own .grad that waited for that accumulation is launched.
    void gradientsAccumulated();
    void launchCompleteBuckets();
    // ZeRO-2: the launched buckets whose reduce is done, in order, copied back to their owner's
    // gradients and released; waiting for the oldest while more than `inFlight` remain.
    void finishReducedBuckets(size_t inFlight);
    // A reduced bucket's sum over the ranks, averaged, into its tensors' .grad.
    void averageIntoGrads(Bucket &bucket);
    void finishOverlappedReduce();

    DataParallelStrategy m_strategy;
    double m_gradClip;
    int64_t m_bucketBytes;
    bool m_overlap;
    std::vector<Bucket> m_buckets;
    std::vector<size_t> m_bucketOf;
    std::vector<char> m_arrived;
    std::vector<c10::intrusive_ptr<c10d::Work>> m_works;
    size_t m_nextLaunch = 0;
    size_t m_nextFinish = 0;                 // ZeRO-2: the first launched bucket not yet copied back
    std::vector<size_t> m_dropGrads;         // ZeRO-2: others' gradients in a bucket, dropped once accumulated
    size_t m_hookedDirect = SIZE_MAX;        // ZeRO-2: the direct bucket whose gradient the last hook saw
    bool m_warnedTwice = false;
    bool m_lastMicroBatch = false;
    std::mutex m_bucketMutex;                // backward may run hooks on a device thread
    std::vector<torch::Tensor> m_trainable;  // every rank's full list, in model order
    std::vector<int> m_owner;                // ZeRO-2: the rank that updates m_trainable[i]
};

} // namespace pb
