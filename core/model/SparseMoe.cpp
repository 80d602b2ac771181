// The sparse mixture-of-experts MLP declared in Transformer.h.
#include "model/Transformer.h"

#include "config/ParameterTable.h"
#include "model/GroupedExperts.h"
#include "engine/TorchCompat.h"

namespace pb {

SparseMoeImpl::SparseMoeImpl(const RunConfig &config, const torch::TensorOptions &options) : m_moe(config.model.moe)
{
    const auto &m = config.model;
    const ExpertNames n = expertNames(m);
    router = register_module(n.router, WeightHolder(emptyParam({m_moe.experts, m.hiddenSize}, options)));
    // DeepSeek-V3's correction bias: a buffer, never trained, kept in fp32 (Transformers'
    // _keep_in_fp32_modules_strict); zeros until a checkpoint gives it.
    if (m_moe.scoreCorrectionBias)
        scoreCorrectionBias = router->register_buffer("e_score_correction_bias", torch::zeros({m_moe.experts}, options.dtype(torch::kFloat)));
    if (m_moe.routerBias)
        routerBias = router->register_parameter("bias", emptyParam({m_moe.experts}, options));
    if (m_moe.stackedExperts) {
        StackedExpertsOptions o;
        o.experts = m_moe.experts;
        o.hidden = m.hiddenSize;
        o.intermediate = m_moe.expertIntermediateSize;
        o.interleavedGateUp = m_moe.interleavedGateUp;
        o.bias = m_moe.expertBias;
        o.swigluLimit = m_moe.swigluLimit;
        o.swigluAlpha = m_moe.swigluAlpha;
        stacked = register_module("experts", StackedExperts(o, options));
    } else {
        experts = register_module("experts", torch::nn::ModuleList());
    }
    for (int64_t e = 0; e < (m_moe.stackedExperts ? 0 : m_moe.experts); ++e) {
        expertList.emplace_back(config, options, m_moe.expertIntermediateSize, std::array<std::string, 3> {n.gate, n.up, n.down});
        for (auto *p : {&expertList.back()->gate, &expertList.back()->up, &expertList.back()->down})
            if (*p)
                (*p)->setPeftInputCast(false);
        experts->push_back(expertList.back());
    }
    if (m_moe.sharedExpertIntermediateSize > 0) {
        shared = register_module(n.shared.substr(0, n.shared.size() - 1), Mlp(config, options, m_moe.sharedExpertIntermediateSize));
        if (m_moe.sharedExpertGate)
            sharedGate = register_module("shared_expert_gate", WeightHolder(emptyParam({1, m.hiddenSize}, options)));
    }
}

torch::Tensor SparseMoeImpl::sigmoidScores(const torch::Tensor &flat) const
{
    // As DeepseekV3TopkRouter: the logits of the fp32 input and weight (autocast still picks the
    // matmul's dtype, as it does for Transformers), then an independent sigmoid per expert.
    return torch::nn::functional::linear(flat.to(torch::kFloat), router->weight.to(torch::kFloat)).sigmoid();
}

torch::Tensor SparseMoeImpl::sigmoidChoice(const torch::Tensor &scores) const
{
    // As DeepseekV3MoE.route_tokens_to_experts: the bias joins the scores for the choice only; a
    // group's score is the sum of its two best; experts outside the best groups score 0 (not -inf,
    // as Transformers masks them, so a negative biased score loses to them).
    torch::NoGradGuard noGrad;
    auto choice = scoreCorrectionBias.defined() ? scores + scoreCorrectionBias : scores;
    const int64_t groups = m_moe.groups, perGroup = m_moe.experts / std::max<int64_t>(groups, 1);
    if (groups > 1) {
        const auto groupScores = std::get<0>(choice.view({-1, groups, perGroup}).topk(2, -1)).sum(-1);
        const auto best = std::get<1>(groupScores.topk(m_moe.groupsPerToken, -1, /*largest=*/true, /*sorted=*/false));
        const auto groupMask = torch::zeros_like(groupScores).scatter_(1, best, 1.0);
        const auto expertMask = groupMask.unsqueeze(-1).expand({-1, groups, perGroup}).reshape({-1, m_moe.experts});
        choice = choice.masked_fill(expertMask.logical_not(), 0.0);
    }
    return std::get<1>(choice.topk(m_moe.expertsPerToken, -1, /*largest=*/true, /*sorted=*/false));
}

torch::Tensor SparseMoeImpl::forward(const torch::Tensor &x)
{
    RECORD_USER_SCOPE("pb.moe");
    const auto shape = x.sizes().vec();
    auto flat = x.reshape({-1, shape.back()});
    if (is_training() && m_moe.routerJitter > 0) // Mixtral's multiplicative input noise
        flat = flat * torch::empty_like(flat).uniform_(1.0 - m_moe.routerJitter, 1.0 + m_moe.routerJitter);
    const int64_t k = m_moe.expertsPerToken;
    // DeepSeek-V3's router (sigmoid scores over all experts, then the choice); Llama 4's sigmoid
    // router scales the expert input instead and has its own branch.
    const bool deepseekRouter = m_moe.scoring == RouterScoring::Sigmoid && !m_moe.scaleExpertInput;
    const auto logits = deepseekRouter ? torch::Tensor() : torch::nn::functional::linear(flat, router->weight, routerBias);
    torch::Tensor probabilities, weights, chosen;
    if (deepseekRouter) {
        probabilities = sigmoidScores(flat);
        chosen = sigmoidChoice(probabilities);
        weights = probabilities.gather(1, chosen);
        if (m_moe.normalizeTopK) // Transformers' 1e-20 keeps an all-zero row finite
            weights = weights / (weights.sum(-1, /*keepdim=*/true) + 1e-20);
        weights = weights * m_moe.routedScale;
    } else if (m_moe.softmaxAfterTopK) {
        // GptOssTopKRouter: top-k of the logits, then a softmax over the k in the logits' dtype.
        // The load-balancing loss reads the logits as Transformers 5 records them (the router's
        // first output): a softmax over every expert.
        torch::Tensor top;
        std::tie(top, chosen) = torch::topk(logits, k, -1);
        weights = torch::softmax(top, 1);
        probabilities = torch::softmax(logits, 1, torch::kFloat);
    } else if (m_moe.scaleExpertInput) {
        // Llama4Router: top-k of the logits as they are; a chosen expert's weight is the sigmoid of
        // its logit, taken in fp32 and rounded back to the logits' dtype.
        std::tie(weights, chosen) = torch::topk(logits, k, -1);
        weights = torch::sigmoid(weights.to(torch::kFloat)).to(logits.scalar_type());
    } else {
        probabilities = torch::softmax(logits, 1, torch::kFloat);
        std::tie(weights, chosen) = torch::topk(probabilities, k, -1);
        if (m_moe.normalizeTopK)
            weights = weights / weights.sum(-1, /*keepdim=*/true);
    }
    weights = weights.to(flat.scalar_type());

    // Every (token, choice) pair sorted by expert: each expert then reads one contiguous slice.
    const auto flatChoice = chosen.reshape({-1});
    const auto order = flatChoice.argsort(); // ties in any order: each pair is weighted and added on its own
    const auto token = order.div(k, "floor");
    const auto counts = torch::bincount(flatChoice, {}, m_moe.experts).to(torch::kCPU); // the one host sync per layer
    auto permuted = flat.index_select(0, token);
    const auto pairWeights = weights.reshape({-1}).index_select(0, order).unsqueeze(-1);
    // Llama 4 scales each expert's input by its weight, in flat's dtype before autocast's cast.
    if (m_moe.scaleExpertInput)
        permuted = permuted * pairWeights;
    // One autocast cast for all experts, as Transformers' one per expert: autocast would cast each
    // expert's slice anew for gate and for up. The gather stays in flat's dtype, so the backward
    // sums a token's k gradients in it.
    const auto deviceType = flat.device().type();
    if (compat::autocastEnabled(deviceType) && permuted.scalar_type() != compat::autocastDtype(deviceType))
        permuted = permuted.to(compat::autocastDtype(deviceType));
    // One split, not a narrow per expert: narrow's backward writes every expert's gradient into its
    // own zero tensor of all n*k rows, split's concatenates them once.
    const auto *count = counts.data_ptr<int64_t>();
    const c10::IntArrayRef expertCounts(count, static_cast<size_t>(m_moe.experts));
    std::vector<torch::Tensor> outputs;
    if (stacked)
        outputs.push_back(stacked->forward(permuted, expertCounts));
    else if (auto grouped = groupedExperts(expertList, permuted, expertCounts); grouped.defined())
        outputs.push_back(grouped);
    const bool looped = outputs.empty();
    const auto slices = looped ? permuted.split_with_sizes(expertCounts, 0) : std::vector<torch::Tensor>();
    for (int64_t e = 0; e < (looped ? m_moe.experts : 0); ++e)
        if (count[e] > 0)
            outputs.push_back(expertList[static_cast<size_t>(e)]->forward(slices[static_cast<size_t>(e)]));
    torch::Tensor out;
    if (m_moe.scaleExpertInput) {
        // Llama4TextMoe adds the experts' outputs, as they are, to the shared expert's in their dtype.
        const auto expertOut = outputs.size() == 1 ? outputs.front() : torch::cat(outputs, 0);
        out = torch::zeros({flat.size(0), flat.size(1)}, expertOut.options()).index_add(0, token, expertOut);
        if (shared)
            out = shared->forward(flat) + out;
    } else {
        const auto expertOut = torch::cat(outputs, 0) * pairWeights;
        out = torch::zeros_like(flat).index_add(0, token, expertOut.to(flat.scalar_type()));
        if (shared) {
            auto s = shared->forward(flat);
            if (sharedGate)
                s = torch::sigmoid(torch::nn::functional::linear(flat, sharedGate->weight)) * s;
            out = out + s;
        }
    }

    // Llama4ForCausalLM adds no load-balancing loss (aux_loss_weight 0): no probabilities to sum.
    routerProbabilitySum = probabilities.defined() ? probabilities.sum(0) : torch::zeros({m_moe.experts}, flat.options().dtype(torch::kFloat));
    {
        torch::NoGradGuard noGrad;
        expertChoices = torch::one_hot(chosen, m_moe.experts).to(torch::kFloat).sum(0); // top_k x experts
    }
    tokens = flat.size(0);
    return out.reshape(shape);
}

} // namespace pb
