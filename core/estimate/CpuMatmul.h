#pragma once
// How LibTorch 1.13's CPU build multiplies bf16 matrices on this processor, for the estimate of a
// run on the CPU here: where the processor has AVX-512 BW, VL and DQ (the check of ATen's
// mkldnn_bf16_device_check), a bf16 matmul of more than 16^3 multiply-adds goes through oneDNN,
// which holds an fp32 accumulator the size of the product beside the product until it returns.
// Elsewhere ATen's own GEMM runs without one.

namespace pb {

bool cpuBf16MatmulHoldsFp32Accumulator();

} // namespace pb
