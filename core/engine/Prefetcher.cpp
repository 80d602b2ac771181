#include "engine/Prefetcher.h"

#include <chrono>

namespace pb {

PreparedBatch prepareBatch(const Batch &batch, bool pin)
{
    PreparedBatch out;
    const auto options = torch::TensorOptions().dtype(torch::kLong);
    out.inputs = torch::from_blob(const_cast<int64_t *>(batch.inputs.data()), {batch.batchSize, batch.seqLen}, options).clone();
    out.targets = torch::from_blob(const_cast<int64_t *>(batch.targets.data()), {batch.batchSize, batch.seqLen}, options).clone();
    if (pin) {
        out.inputs = out.inputs.pin_memory();
        out.targets = out.targets.pin_memory();
    }
    out.tokens = batch.tokens;
    return out;
}

namespace {
void skipBatch(Batcher &batcher)
{
    DataPosition position = batcher.position();
    if (position.index >= batcher.batchesPerEpoch()) {
        ++position.epoch;
        position.index = 0;
    }
    ++position.index;
    batcher.seek(position);
}
} // namespace

Prefetcher::Prefetcher(Batcher &batcher, size_t capacity, bool pin, int shardIndex, int shardCount)
    : m_batcher(batcher), m_capacity(capacity), m_pin(pin), m_shardIndex(shardIndex), m_shardCount(shardCount), m_thread([this] { loop(); })
{
}

Prefetcher::~Prefetcher()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_changed.notify_all();
    m_thread.join();
}

void Prefetcher::loop()
{
    try {
        for (;;) {
            {
                std::unique_lock lock(m_mutex);
                m_changed.wait(lock, [this] { return m_stop || m_queue.size() < m_capacity; });
                if (m_stop)
                    return;
            }
            for (int i = 0; i < m_shardIndex; ++i)
                skipBatch(m_batcher);
            const Batch batch = m_batcher.next();
            for (int i = m_shardIndex + 1; i < m_shardCount; ++i)
                skipBatch(m_batcher);
            PreparedBatch prepared = prepareBatch(batch, m_pin);
            prepared.positionAfter = m_batcher.position();
            {
                std::lock_guard lock(m_mutex);
                m_queue.push_back(std::move(prepared));
            }
            m_changed.notify_all();
        }
    } catch (...) {
        std::lock_guard lock(m_mutex);
        m_error = std::current_exception();
        m_changed.notify_all();
    }
}

PreparedBatch Prefetcher::pop(double &waitMs)
{
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(m_mutex);
    m_changed.wait(lock, [this] { return !m_queue.empty() || m_error; });
    waitMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (m_queue.empty() && m_error)
        std::rethrow_exception(m_error);
    PreparedBatch batch = std::move(m_queue.front());
    m_queue.pop_front();
    lock.unlock();
    m_changed.notify_all();
    return batch;
}

} // namespace pb
