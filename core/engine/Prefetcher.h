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
    Prefetcher(Batcher &batcher, size_t capacity, bool pin);
    ~Prefetcher();
    // Blocks until a batch is ready; adds the time waited to waitMs. Rethrows a loader error.
    PreparedBatch pop(double &waitMs);

private:
    void loop();
    Batcher &m_batcher;
    size_t m_capacity;
    bool m_pin;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::deque<PreparedBatch> m_queue;
    std::exception_ptr m_error;
    bool m_stop = false;
    std::thread m_thread;
};

PreparedBatch prepareBatch(const Batch &batch, bool pin);

} // namespace pb
