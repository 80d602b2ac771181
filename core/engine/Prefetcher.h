#pragma once
// Internal to the engine: the loader thread. It draws batches ahead into a bounded queue, turned
// into (pinned, for CUDA) tensors; the time the training loop waits on the queue is the data stall.
#include "data/Batcher.h"

#include <torch/torch.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace pb {

struct PreparedBatch {
    torch::Tensor inputs, targets;
    int64_t tokens = 0;
    DataPosition positionAfter;
};

class Prefetcher {
public:
    // With shardCount > 1 this rank keeps batch number shardIndex of every shardCount in a row
    // (skipped without reading), so the ranks together see what one process would.
    Prefetcher(Batcher &batcher, size_t capacity, bool pin, int shardIndex = 0, int shardCount = 1);
    ~Prefetcher();
    // Blocks until a batch is ready; adds the time waited to waitMs. Rethrows a loader error.
    PreparedBatch pop(double &waitMs);

private:
    void loop();
    Batcher &m_batcher;
    size_t m_capacity;
    bool m_pin;
    int m_shardIndex, m_shardCount;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::deque<PreparedBatch> m_queue;
    std::exception_ptr m_error;
    bool m_stop = false;
    std::thread m_thread;
};

PreparedBatch prepareBatch(const Batch &batch, bool pin);

} // namespace pb
