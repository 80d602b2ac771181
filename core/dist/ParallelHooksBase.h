#pragma once
// Internal to core/dist (includes torch and c10d): what every data-parallel strategy reports
// (communication per step, parameters its optimizer owns, the end-of-run parameter summary that
// the tests compare across strategies) and the helpers they share.
#include "dist/DistCompat.h"
#include "dist/Rendezvous.h"
#include "engine/DistributedHooks.h"

#include <chrono>
#include <string>
#include <vector>

namespace pb {

class ParallelHooksBase : public DistributedHooks {
public:
    // `group` null: a single process (no communication; the dump and checksums still work).
    ParallelHooksBase(c10::intrusive_ptr<compat::CollectiveGroup> group, const Rendezvous &rendezvous, std::string dumpPath);

    int rank() const override { return m_rendezvous.rank; }
    int worldSize() const override { return m_rendezvous.worldSize; }
    // Sums (and, with a dump path, the float32 values) of `params` in model order.
    void trainingFinished(const std::vector<torch::Tensor> &params) override;
    // A one-element all-reduce: the one collective every backend and LibTorch version has alike.
    void barrier() override;

    const std::vector<double> &stepCommMs() const { return m_stepCommMs; }
    double broadcastMs() const { return m_broadcastMs; }
    int64_t gradientBytes() const { return m_gradientBytes; }
    int64_t ownedParameters() const { return m_ownedParameters; }
    virtual bool overlapping() const { return false; }
    double parameterSum() const { return m_parameterSum; }
    double parameterAbsSum() const { return m_parameterAbsSum; }
    int64_t parameterCount() const { return m_parameterCount; }

protected:
    using Clock = std::chrono::steady_clock;
    static double msSince(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }
    static void synchronizeDevice(const torch::Device &device);
    static int64_t bytesOf(const torch::Tensor &t) { return t.numel() * static_cast<int64_t>(t.element_size()); }
    // Global-norm clipping when each rank holds a disjoint part of the gradients: the norm over
    // every rank's `grads`, then all of them scaled (the engine's own clip on this rank's part
    // then sees at most the threshold and leaves it alone).
    void clipShardedGradients(const std::vector<torch::Tensor> &grads, double maxNorm, const torch::Device &device);
    // Gloo (LibTorch 1.13's at least) has no bfloat16 collectives, so such tensors travel as
    // float32: exact for broadcast and gather, and a sum rounds once when copied back.
    torch::Tensor wireTensor(const torch::Tensor &t) const { return m_bf16AsFloat && t.scalar_type() == torch::kBFloat16 ? t.to(torch::kFloat) : t; }
    at::ScalarType wireType(at::ScalarType type) const { return m_bf16AsFloat && type == torch::kBFloat16 ? torch::kFloat : type; }

    c10::intrusive_ptr<compat::CollectiveGroup> m_group;
    Rendezvous m_rendezvous;
    std::string m_dumpPath;
    bool m_bf16AsFloat = false;
    std::vector<double> m_stepCommMs;
    double m_broadcastMs = 0;
    int64_t m_gradientBytes = 0;
    int64_t m_ownedParameters = 0;
    double m_parameterSum = 0, m_parameterAbsSum = 0;
    int64_t m_parameterCount = 0;
};

} // namespace pb
