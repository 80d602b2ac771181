#include "model/HeadLayoutProducts.h"

namespace pb {
namespace {

// The most GEMM calls a product makes (8 at Gemma-2-9B's 2048 x 4); past it the stacked bmms stay.
// A guess at where launches outweigh the copies saved: not measured.
constexpr int64_t kMaxCalls = 64;

// Head g of every key/value group of batch row b, [KV, T, D] over x [B, T, H, D] (rows H * D apart).
torch::Tensor groupHead(const torch::Tensor &x, int64_t b, int64_t g, int64_t kv)
{
    return x.select(0, b).view({x.size(1), kv, x.size(2) / kv, x.size(3)}).select(2, g).permute({1, 0, 2});
}

// The key/value heads of batch row b, [KV, T, D] over x [B, T, KV, D].
torch::Tensor kvHeads(const torch::Tensor &x, int64_t b) { return x.select(0, b).permute({1, 0, 2}); }

// Head g of every group of batch row b, [KV, T, T] over s [B, H, T, T].
torch::Tensor groupScores(const torch::Tensor &s, int64_t b, int64_t g, int64_t kv)
{
    return s.select(0, b).view({kv, s.size(1) / kv, s.size(2), s.size(3)}).select(1, g);
}

// out (a view) = a b, or += a b after the group's first head.
void product(torch::Tensor out, const torch::Tensor &a, const torch::Tensor &b, bool accumulate)
{
    if (accumulate)
        out.baddbmm_(a, b);
    else
        at::bmm_out(out, a, b);
}

void checkShapes(const torch::Tensor &q, const torch::Tensor &kv, const char *what)
{
    TORCH_CHECK(q.dim() == 4 && kv.dim() == 4 && q.size(0) == kv.size(0) && q.size(1) == kv.size(1) && q.size(3) == kv.size(3) && kv.size(2) > 0 &&
                    q.size(2) % kv.size(2) == 0 && q.scalar_type() == kv.scalar_type(),
                what, ": [B, T, H, D] and [B, T, KV, D] of one dtype, H a multiple of KV");
}

struct ScoresFunction : public torch::autograd::Function<ScoresFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &q, const torch::Tensor &k)
    {
        const int64_t batch = q.size(0), t = q.size(1), heads = q.size(2), kv = k.size(2);
        auto s = torch::empty({batch, heads, t, t}, q.options());
        for (int64_t b = 0; b < batch; ++b)
            for (int64_t g = 0; g < heads / kv; ++g)
                product(groupScores(s, b, g, kv), groupHead(q, b, g, kv), kvHeads(k, b).transpose(1, 2), false);
        // As autograd's bmm: each operand kept only for the other's gradient.
        ctx->save_for_backward({k.requires_grad() ? q : torch::Tensor(), q.requires_grad() ? k : torch::Tensor()});
        ctx->saved_data["kv"] = kv;
        return s;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        const auto saved = ctx->get_saved_variables();
        const auto &q = saved[0], &k = saved[1];
        // (A frozen projection's output, e.g. k without an adapter under LoRA, gets no gradient.)
        const bool wantQ = ctx->needs_input_grad(0), wantK = ctx->needs_input_grad(1);
        const auto ds = grads[0].to(wantQ ? k.scalar_type() : q.scalar_type()).contiguous();
        const int64_t batch = ds.size(0), heads = ds.size(1), kv = ctx->saved_data["kv"].toInt();
        torch::Tensor dq = wantQ ? torch::empty({batch, ds.size(2), heads, k.size(3)}, k.options()) : torch::Tensor(),
                      dk = wantK ? torch::empty({batch, ds.size(2), kv, q.size(3)}, q.options()) : torch::Tensor();
        for (int64_t b = 0; b < batch; ++b)
            for (int64_t g = 0; g < heads / kv; ++g) {
                const auto dsg = groupScores(ds, b, g, kv);
                if (wantQ)
                    product(groupHead(dq, b, g, kv), dsg, kvHeads(k, b), false);
                if (wantK)
                    product(kvHeads(dk, b), dsg.transpose(1, 2), groupHead(q, b, g, kv), g > 0);
            }
        return {dq, dk};
    }
};

struct ValuesFunction : public torch::autograd::Function<ValuesFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &p, const torch::Tensor &v)
    {
        const int64_t batch = p.size(0), heads = p.size(1), t = p.size(2), kv = v.size(2);
        auto out = torch::empty({batch, t, heads, v.size(3)}, v.options());
        for (int64_t b = 0; b < batch; ++b)
            for (int64_t g = 0; g < heads / kv; ++g)
                product(groupHead(out, b, g, kv), groupScores(p, b, g, kv), kvHeads(v, b), false);
        ctx->save_for_backward({v.requires_grad() ? p : torch::Tensor(), p.requires_grad() ? v : torch::Tensor()});
        ctx->saved_data["kv"] = kv;
        return out;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        const auto saved = ctx->get_saved_variables();
        const auto &p = saved[0], &v = saved[1];
        const bool wantP = ctx->needs_input_grad(0), wantV = ctx->needs_input_grad(1);
        const auto dout = grads[0].to(wantP ? v.scalar_type() : p.scalar_type()).contiguous();
        const int64_t batch = dout.size(0), t = dout.size(1), heads = dout.size(2), kv = ctx->saved_data["kv"].toInt();
        torch::Tensor dp = wantP ? torch::empty({batch, heads, t, t}, v.options()) : torch::Tensor(),
                      dv = wantV ? torch::empty({batch, t, kv, dout.size(3)}, p.options()) : torch::Tensor();
        for (int64_t b = 0; b < batch; ++b)
            for (int64_t g = 0; g < heads / kv; ++g) {
                const auto dog = groupHead(dout, b, g, kv);
                if (wantP)
                    product(groupScores(dp, b, g, kv), dog, kvHeads(v, b).transpose(1, 2), false);
                if (wantV)
                    product(kvHeads(dv, b), groupScores(p, b, g, kv).transpose(1, 2), dog, g > 0);
            }
        return {dp, dv};
    }
};

} // namespace

bool headLayoutProductsTake(at::ScalarType q, at::ScalarType k, at::ScalarType v, int64_t batch, int64_t groups)
{
    return q == k && k == v && batch * groups <= kMaxCalls;
}

torch::Tensor headLayoutScores(const torch::Tensor &q, const torch::Tensor &k)
{
    checkShapes(q, k, "headLayoutScores");
    return ScoresFunction::apply(q.contiguous(), k.contiguous());
}

torch::Tensor headLayoutValues(const torch::Tensor &probs, const torch::Tensor &v)
{
    TORCH_CHECK(probs.dim() == 4 && v.dim() == 4 && probs.size(0) == v.size(0) && probs.size(2) == v.size(1) && probs.size(3) == v.size(1) &&
                    v.size(2) > 0 && probs.size(1) % v.size(2) == 0 && probs.scalar_type() == v.scalar_type(),
                "headLayoutValues: probabilities [B, H, T, T] and v [B, T, KV, D] of one dtype, H a multiple of KV");
    return ValuesFunction::apply(probs.contiguous(), v.contiguous());
}

} // namespace pb
