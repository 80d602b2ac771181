#pragma once
// Internal to the engine and core/dist (includes torch): what a multi-process strategy (DDP over
// c10d) plugs into the single-device step loop. The engine stays unaware of process groups; it
// only calls these at fixed points, and takes its data shard from rank() and worldSize().
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace pb {

class DecoderModelImpl;

class DistributedHooks {
public:
    virtual ~DistributedHooks() = default;
    virtual int rank() const = 0;
    virtual int worldSize() const = 0;
    // After the model is built and initialised, before the optimizer: a strategy that shards the
    // parameters themselves (FSDP) takes them over here.
    virtual void shardModel(DecoderModelImpl & /*model*/) {}
    // Before the optimizer is made: the trainable parameters it will update on this rank (all of
    // them for DDP; this rank's share when optimizer state is sharded).
    virtual std::vector<torch::Tensor> optimizerParameters(std::vector<torch::Tensor> trainable) { return trainable; }
    // After the model and optimizer exist (and a checkpoint was restored): make every rank start
    // from rank 0's parameters.
    virtual void broadcastParameters(std::vector<torch::Tensor> &params) = 0;
    // Before each micro-batch's backward; `last`: the one that completes the step's gradients
    // (communication may then start inside the backward pass).
    virtual void beforeBackward(bool /*last*/) {}
    // After the last micro-batch's backward, before unscaling and clipping: leave in the grad of
    // every parameter this rank's optimizer updates the mean over ranks (`params`: those).
    virtual void afterBackward(std::vector<torch::Tensor> &params) = 0;
    // After an optimizer step: bring the parameters other ranks updated up to date here.
    virtual void afterOptimizerStep() {}
    // Checkpoints: the strategy's name ("ddp", "zero2", "fsdp"), this rank's model shards by name
    // when the parameters themselves are sharded (the live tensors, restored in place), and a
    // barrier over all ranks.
    virtual std::string checkpointStrategy() const = 0;
    virtual std::vector<std::pair<std::string, torch::Tensor>> modelShards() { return {}; }
    virtual void barrier() {}
    // After the last step, before the model is freed (the parameters in model order).
    virtual void trainingFinished(const std::vector<torch::Tensor> & /*params*/) {}
};

} // namespace pb
