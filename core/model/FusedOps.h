#pragma once
// Internal to the engine (includes torch): the operations train.kernels = fused replaces. Each runs
// the CUDA kernel of kernels/FusedKernels.h where the build has them (PB_WITH_CUDA_KERNELS) and
// the tensors are on a CUDA device, else LibTorch composite ops computing the same maths, so the
// CPU build and CI test what the CUDA build runs.
#include <torch/torch.h>

#include <functional>

namespace pb {

// Cross-entropy of each row of `logits` [rows, vocab] (any float dtype; changed in place) against
// `targets` [rows] (int64, -100 ignored): returns the rows' losses (fp32, 0 where ignored) and
// leaves in `logits` the gradient of sum(losses) * scale, (softmax - onehot) * scale, in their
// dtype. The loss may first divide the logits by `divisor` (Granite) and soft-cap them,
// softcap * tanh(z / softcap) (Gemma; 0: none); the gradient is then the stored logits'. The
// kernel does both in fp32 inside its two passes; the composite rounds each step to the logits'
// dtype, as eager does. No autograd: LinearCrossEntropy's forward calls it under no_grad.
// `scale` is a one-element fp32 tensor on the logits' device, read there (the loss's 1 / count
// is then never read by the host, so a step can be captured in a CUDA graph); a double is made one.
torch::Tensor crossEntropyGradInPlace(torch::Tensor &logits, const torch::Tensor &targets, const torch::Tensor &scale, double divisor = 1.0, double softcap = 0.0);
torch::Tensor crossEntropyGradInPlace(torch::Tensor &logits, const torch::Tensor &targets, double scale, double divisor = 1.0, double softcap = 0.0);

// The dtype an eager linear of `input` and `weight` computes in: autocast's where it is on for
// their device, else the promotion of the two.
at::ScalarType eagerComputeType(const torch::Tensor &input, const torch::Tensor &weight);

// Whether crossEntropyGradInPlace runs a kernel for tensors on `device` (it then needs no fp32 copy).
bool fusedKernelsOn(const torch::Device &device);

// RMSNorm as LlamaRMSNorm (fp32 statistics; the normalised input rounded to x's dtype, then
// times the weight), returned in one rounding in autocast's dtype where autocast is on (so the
// projections after it share one 16-bit input instead of casting it each), else in the promotion
// of x's and the weight's. `unitOffset`: Gemma's 1 + weight; `scaleInFp32`: Gemma's and OLMo 2's
// product of the fp32 normalised input and the weight. Its autograd keeps x, the weight and the
// per-row rstd only.
torch::Tensor fusedRmsNorm(const torch::Tensor &x, const torch::Tensor &weight, double eps, bool unitOffset = false, bool scaleInFp32 = false);

// The residual add as eager's ops round it: x + branch * scale, the product in the branch's dtype
// (scale 1: no product), the sum in the promotion of the two.
torch::Tensor residualAdd(const torch::Tensor &x, const torch::Tensor &branch, double scale);

// The residual add and the norm after it: h = x + branch * scale (branch * scale rounded to the
// branch's dtype, the sum to x's, as eager's mul and add), then fusedRmsNorm(h, ...); returns {h,
// norm(h)}. One node (one kernel each way on CUDA) where the add keeps x's dtype and the branch has
// the norm output's; else the add and fusedRmsNorm as separate ops. Its autograd keeps what the
// norm alone keeps.
std::pair<torch::Tensor, torch::Tensor> fusedAddRmsNorm(const torch::Tensor &x, const torch::Tensor &branch, double scale, const torch::Tensor &weight,
                                                        double eps, bool unitOffset = false, bool scaleInFp32 = false);

// The activation of a gated MLP: SiLU (SwiGLU), tanh-approximated or exact GELU (GeGLU).
enum class GateActivation { Silu, GeluTanh, GeluErf };

// act(gate) * up, rounded as eager's two ops round it; its autograd keeps gate and up only (eager
// keeps act(gate) too) and recomputes the activation in the backward.
torch::Tensor fusedGatedActivation(const torch::Tensor &gate, const torch::Tensor &up, GateActivation activation);
// LlamaMLP's silu(gate) * up.
torch::Tensor fusedSwiglu(const torch::Tensor &gate, const torch::Tensor &up);
// The same on a fused gate_up projection's output [..., 2 x width] (Phi-3's and GLM-4's: gate the
// first half, up the second), same roundings: its autograd keeps that output alone and returns its
// gradient as one tensor.
torch::Tensor fusedGatedActivationPacked(const torch::Tensor &gateUp, GateActivation activation);

// q or k [batch, seq, heads, headDim] times the rotary tables cos, sin [seq, headDim] (fp32), as
// x * cos + rotate_half(x) * sin computed in fp32 and rounded once to x's dtype (eager rounds the
// tables and each of its three ops). Its autograd keeps only the tables, which the model holds anyway.
torch::Tensor fusedRotary(const torch::Tensor &x, const torch::Tensor &cos, const torch::Tensor &sin);

// Gemma 2's soft-capped attention probabilities from scores [..., T, T] (q k^T, unscaled, contiguous
// or made so) on the CUDA kernel (kernels::cappedSoftmaxForward): Transformers' eager chain (scale,
// cap, the causal mask and a sliding `window` (0: none), softmax in fp32) rounded as eager rounds it,
// in the scores' dtype. Its autograd keeps the scores and two fp32 numbers a row (eager keeps tanh's
// output, the fp32 probabilities and a mask). Only where cappedSoftmaxRuns; there is no composite
// (the eager chain is model/Transformer.cpp's own).
bool cappedSoftmaxRuns(const torch::Device &device, at::ScalarType scores);
torch::Tensor cappedSoftmax(const torch::Tensor &scores, double scale, double softcap, int64_t window);

// softmax(q k^T) v with q [B, H, T, D] and k, v [B, KV, T, D], H a multiple of KV, `probabilities`
// mapping the scores [B, H, T, T] to probabilities of the same shape. The heads that share a key and
// value head are stacked along the rows (q as [B * KV, H / KV * T, D]), so the scores come out in
// [B, H, T, T]'s layout with no copy of k or v per head, and each bmm's backward sums the group's key
// and value gradients inside its GEMM (no expand, no sum after it). Output [B, H, T, D], contiguous.
// Where q, k, v are transposed views of [B, T, heads, D] tensors of one dtype (the projections'
// layout), model/HeadLayoutProducts.h's products read them in place instead, with no copy either
// way, and the output is a transposed view of [B, T, H, D].
torch::Tensor groupedHeadsAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v,
                                    const std::function<torch::Tensor(const torch::Tensor &)> &probabilities);

// dx += native_dropout_backward(dDown a, keep, scale) in place, rounded as those ops and add_ round
// it: a LoRA adapter's share of the input's gradient under dropout (model/MixedLinear.cpp), dx [rows,
// cols], dDown [rows, rank], a [rank, cols], keep [rows, cols] (bool, native_dropout's mask). One
// kernel on CUDA (kernels::addDroppedLowRank) for ranks up to 64, where its 8 x rank multiply-adds
// a pack still take less time than its bytes; else those ops, which write three [rows, cols] tensors.
void addDroppedLowRank(torch::Tensor &dx, const torch::Tensor &dDown, const torch::Tensor &a, const torch::Tensor &keep, double scale);

// lora_A's gradient under dropout: dDown^T native_dropout_backward(x, keep, scale) in fp32 [rank,
// cols], for dDown [rows, rank], x [rows, cols] and its bool mask keep (model/MixedLinear.cpp). On
// CUDA for ranks up to kernels::kDroppedRankMax one kernel reads x and the mask once (partial sums
// over row chunks, then their sum) instead of writing the dropped copy of x for a GEMM to read; else
// that copy and the GEMM, into fp32 (compat::addMatmulInto).
torch::Tensor droppedInputProduct(const torch::Tensor &dDown, const torch::Tensor &x, const torch::Tensor &keep, double scale);

// Transformers' rotate_half, (x1, x2) -> (-x2, x1) over the last dimension: the eager rotary's.
torch::Tensor rotateHalf(const torch::Tensor &x);

} // namespace pb
