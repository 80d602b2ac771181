// The sparse mixture-of-experts MLP declared in Transformer.h.
#include "model/Transformer.h"

#include "config/ParameterTable.h"
#include "engine/TorchCompat.h"

namespace pb {

SparseMoeImpl::SparseMoeImpl(const RunConfig &config, const torch::TensorOptions &options) : m_moe(config.model.moe)
{
    const auto &m = config.model;
    const ExpertNames n = expertNames(m);
    router = register_module("gate", WeightHolder(emptyParam({m_moe.experts, m.hiddenSize}, options)));
    experts = register_module("experts", torch::nn::ModuleList());
    for (int64_t e = 0; e < m_moe.experts; ++e) {
        expertList.emplace_back(config, options, m_moe.expertIntermediateSize, std::array<std::string, 3> {n.gate, n.up, n.down});
        experts->push_back(expertList.back());
    }
    if (m_moe.sharedExpertIntermediateSize > 0) {
        shared = register_module("shared_expert", Mlp(config, options, m_moe.sharedExpertIntermediateSize));
        if (m_moe.sharedExpertGate)
            sharedGate = register_module("shared_expert_gate", WeightHolder(emptyParam({1, m.hiddenSize}, options)));
    }
}

torch::Tensor SparseMoeImpl::forward(const torch::Tensor &x)
{
    RECORD_USER_SCOPE("pb.moe");
    const auto shape = x.sizes().vec();
    auto flat = x.reshape({-1, shape.back()});
    if (is_training() && m_moe.routerJitter > 0) // Mixtral's multiplicative input noise
        flat = flat * torch::empty_like(flat).uniform_(1.0 - m_moe.routerJitter, 1.0 + m_moe.routerJitter);
    const int64_t k = m_moe.expertsPerToken;
    const auto logits = torch::nn::functional::linear(flat, router->weight);
    const auto probabilities = torch::softmax(logits, 1, torch::kFloat);
    auto [weights, chosen] = torch::topk(probabilities, k, -1);
    if (m_moe.normalizeTopK)
        weights = weights / weights.sum(-1, /*keepdim=*/true);
    weights = weights.to(flat.scalar_type());

    // Every (token, choice) pair sorted by expert: each expert then reads one contiguous slice.
    const auto flatChoice = chosen.reshape({-1});
    const auto order = flatChoice.argsort(); // ties in any order: each pair is weighted and added on its own
    const auto token = order.div(k, "floor");
    const auto counts = torch::bincount(flatChoice, {}, m_moe.experts).to(torch::kCPU); // the one host sync per layer
    auto permuted = flat.index_select(0, token);
    // One autocast cast for all experts, as Transformers' one per expert: autocast would cast each
    // expert's slice anew for gate and for up. The gather stays in flat's dtype, so the backward
    // sums a token's k gradients in it.
    const auto deviceType = flat.device().type();
    if (compat::autocastEnabled(deviceType) && permuted.scalar_type() != compat::autocastDtype(deviceType))
        permuted = permuted.to(compat::autocastDtype(deviceType));
    const auto pairWeights = weights.reshape({-1}).index_select(0, order).unsqueeze(-1);
    // One split, not a narrow per expert: narrow's backward writes every expert's gradient into its
    // own zero tensor of all n*k rows, split's concatenates them once.
    const auto *count = counts.data_ptr<int64_t>();
    const auto slices = permuted.split_with_sizes(c10::IntArrayRef(count, static_cast<size_t>(m_moe.experts)), 0);
    std::vector<torch::Tensor> outputs;
    for (int64_t e = 0; e < m_moe.experts; ++e)
        if (count[e] > 0)
            outputs.push_back(expertList[static_cast<size_t>(e)]->forward(slices[static_cast<size_t>(e)]));
    const auto expertOut = torch::cat(outputs, 0) * pairWeights;
    auto out = torch::zeros_like(flat).index_add(0, token, expertOut.to(flat.scalar_type()));
    if (shared) {
        auto s = shared->forward(flat);
        if (sharedGate)
            s = torch::sigmoid(torch::nn::functional::linear(flat, sharedGate->weight)) * s;
        out = out + s;
    }

    routerProbabilitySum = probabilities.sum(0);
    {
        torch::NoGradGuard noGrad;
        expertChoices = torch::one_hot(chosen, m_moe.experts).to(torch::kFloat).sum(0); // top_k x experts
    }
    tokens = flat.size(0);
    return out.reshape(shape);
}

} // namespace pb
