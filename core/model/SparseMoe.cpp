// The sparse mixture-of-experts MLP declared in Transformer.h.
#include "model/Transformer.h"

#include "config/ParameterTable.h"

namespace pb {

SparseMoeImpl::SparseMoeImpl(const RunConfig &config, const torch::TensorOptions &options) : m_moe(config.model.moe)
{
    const auto &m = config.model;
    const ExpertNames n = expertNames(m);
    router = register_module("gate", WeightHolder(torch::empty({m_moe.experts, m.hiddenSize}, options)));
    experts = register_module("experts", torch::nn::ModuleList());
    for (int64_t e = 0; e < m_moe.experts; ++e) {
        expertList.emplace_back(config, options, m_moe.expertIntermediateSize, std::array<std::string, 3> {n.gate, n.up, n.down});
        experts->push_back(expertList.back());
    }
    if (m_moe.sharedExpertIntermediateSize > 0) {
        shared = register_module("shared_expert", Mlp(config, options, m_moe.sharedExpertIntermediateSize));
        if (m_moe.sharedExpertGate)
            sharedGate = register_module("shared_expert_gate", WeightHolder(torch::empty({1, m.hiddenSize}, options)));
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
    const auto permuted = flat.index_select(0, token);
    const auto pairWeights = weights.reshape({-1}).index_select(0, order).unsqueeze(-1);
    std::vector<torch::Tensor> outputs;
    int64_t begin = 0;
    const auto *count = counts.data_ptr<int64_t>();
    for (int64_t e = 0; e < m_moe.experts; ++e) {
        if (count[e] == 0)
            continue;
        outputs.push_back(expertList[static_cast<size_t>(e)]->forward(permuted.narrow(0, begin, count[e])));
        begin += count[e];
    }
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
