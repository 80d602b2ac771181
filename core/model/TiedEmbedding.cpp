#include "model/TiedEmbedding.h"

namespace pb {
namespace {

struct TiedEmbeddingFunction : public torch::autograd::Function<TiedEmbeddingFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &weight, const torch::Tensor &ids,
                                 const c10::intrusive_ptr<TiedHeadGradient> &slot)
    {
        ctx->saved_data["ids"] = ids;
        ctx->saved_data["vocab"] = weight.size(0);
        ctx->saved_data["slot"] = c10::IValue::make_capsule(slot);
        return torch::embedding(weight, ids);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        const auto ids = ctx->saved_data["ids"].toTensor();
        const auto slot = c10::static_intrusive_pointer_cast<TiedHeadGradient>(ctx->saved_data["slot"].toCapsule());
        const auto &g = grads[0];
        // The loss's backward ran before this one (the lookup's output reaches the loss only through
        // it), so the head's gradient is final and waits in the engine's buffer for this edge. The
        // slot's reference goes first, so the weight's accumulator can keep the tensor uncopied.
        auto into = std::move(slot->grad); // leaves the slot empty
        if (!into.defined())
            return {torch::embedding_backward(g, ids, ctx->saved_data["vocab"].toInt(), -1, false, false), torch::Tensor(), torch::Tensor()};
        torch::NoGradGuard noGrad;
        into.index_add_(0, ids.reshape({-1}), g.reshape({-1, g.size(-1)}).to(into.scalar_type()));
        return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

} // namespace

torch::Tensor tiedEmbedding(const torch::Tensor &weight, const torch::Tensor &ids, const c10::intrusive_ptr<TiedHeadGradient> &slot)
{
    return TiedEmbeddingFunction::apply(weight, ids, slot);
}

} // namespace pb
