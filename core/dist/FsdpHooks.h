#pragma once
// Internal to core/dist (includes torch and c10d): fully sharded data parallel. Each decoder block
// is a unit; the embedding, final norm and head form the root unit. A unit's parameters are one
// flat buffer per dtype and trainability, of which every rank keeps a 1/N shard; the optimizer
// steps only the trainable shards. A block is all-gathered just before its forward and again
// before its backward, and released after each: the buffer's storage is emptied in place, so the
// tensors autograd saved keep pointing at it and see the regathered values. Gradients accumulate
// into a flat buffer that is reduce-scattered to the shards as soon as the block's backward is
// done. The root unit stays gathered from the start of forward to the end of backward.
#include "dist/ParallelHooksBase.h"
#include "model/Transformer.h"

#include <mutex>

namespace pb {

class FsdpHooks final : public ParallelHooksBase, private BlockHooks {
public:
    // `nccl`: the group has NCCL's flat all-gather and reduce-scatter (Gloo gets list all-gather and
    // an all-reduce in their place).
    FsdpHooks(c10::intrusive_ptr<compat::CollectiveGroup> group, const Rendezvous &rendezvous, bool nccl, double gradClip, std::string dumpPath);
    ~FsdpHooks() override;

    void shardModel(DecoderModelImpl &model) override;
    std::vector<torch::Tensor> optimizerParameters(std::vector<torch::Tensor> trainable) override;
    void broadcastParameters(std::vector<torch::Tensor> &) override {} // the shards were cut from rank 0's values
    void afterBackward(std::vector<torch::Tensor> &params) override;
    void trainingFinished(const std::vector<torch::Tensor> &params) override;
    std::string checkpointStrategy() const override { return "fsdp"; }
    // "unit<U>.group<G>": the flat shard this rank keeps of each unit's parameter group.
    std::vector<std::pair<std::string, torch::Tensor>> modelShards() override;

private:
    void beforeModel() override;
    void beforeBlock(size_t index, const torch::Tensor &input) override;
    void afterBlock(size_t index, const torch::Tensor &output) override;

    struct FlatGroup {
        std::vector<torch::Tensor> params;   // the model's tensors: views into `full`
        torch::Tensor full;                  // padded flat buffer; its storage is emptied when resharded
        int64_t fullBytes = 0;
        torch::Tensor shard;                 // this rank's slice, always kept (the optimizer's when trainable)
        torch::Tensor gradFull;              // during backward: the unit's unsharded gradient
        bool trainable = false;
    };
    struct Unit {
        std::vector<FlatGroup> groups;
        bool gathered = false;
        bool gradientsPending = false;       // gradFull set up and not yet reduce-scattered
    };
    void gather(Unit &unit);
    void reshard(Unit &unit);
    void expectGradients(Unit &unit);
    void reduceGradients(Unit &unit);
    void finishBlock(size_t index);
    Unit &root() { return m_units.back(); }

    bool m_nccl;
    double m_gradClip;
    DecoderModelImpl *m_model = nullptr;
    // The engine frees its model before the hooks are destroyed: only a model still alive is told
    // to drop them (writing into a freed one corrupted the heap).
    std::weak_ptr<torch::nn::Module> m_modelAlive;
    std::vector<Unit> m_units;               // blocks 0..L-1, then the root unit
    std::mutex m_mutex;                      // backward runs the hooks on a device thread
    double m_commMs = 0;                     // this step's so far
};

} // namespace pb
