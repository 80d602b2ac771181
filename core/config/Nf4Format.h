#pragma once
// QLoRA's storage of a frozen base matrix (train.mode = qlora), the layout model/Nf4.cpp writes
// and the estimator and checkpoints count: 4-bit NormalFloat codes in blocks of 64 weights, two
// codes per byte (the first in the high nibble, as bitsandbytes packs them), each block scaled by
// its absolute maximum; the block maxima double-quantised as in the QLoRA paper: their mean taken
// out, the rest as 8-bit codes with one fp32 scale per 256 blocks. 4.127 bits per weight.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pb {

constexpr int64_t kNf4BlockSize = 64;
constexpr int64_t kNf4ScaleGroup = 256;   // blocks sharing one fp32 scale of their 8-bit maxima

// The 16 NF4 values (bitsandbytes' get_4bit_type("nf4"), the QLoRA paper's Appendix E): normal
// quantiles scaled to [-1, 1] with an exact zero.
constexpr std::array<float, 16> kNf4Values {-1.0F, -0.6961928009986877F, -0.5250730514526367F, -0.39491748809814453F, -0.28444138169288635F,
                                            -0.18477343022823334F, -0.09105003625154495F, 0.0F, 0.07958029955625534F, 0.16093020141124725F,
                                            0.24611230194568634F, 0.33791524171829224F, 0.44070982933044434F, 0.5626170039176941F,
                                            0.7229568362236023F, 1.0F};

// The tensors one NF4 matrix of `numel` weights is stored as, named after its parameter `name`
// ("...q_proj.weight" -> "...q_proj.weight_nf4", ...): the packed codes (uint8), the blocks' 8-bit
// maxima (int8), their scales (fp32) and the maxima's mean (fp32, one).
struct Nf4TensorShape {
    std::string name;
    int64_t numel = 0;
    int64_t elementBytes = 0;
};
inline std::vector<Nf4TensorShape> nf4Tensors(const std::string &name, int64_t numel)
{
    const int64_t blocks = (numel + kNf4BlockSize - 1) / kNf4BlockSize;
    const int64_t groups = (blocks + kNf4ScaleGroup - 1) / kNf4ScaleGroup;
    return {{name + "_nf4", (numel + 1) / 2, 1}, {name + "_absmax", blocks, 1}, {name + "_absmax_scale", groups, 4}, {name + "_absmax_offset", 1, 4}};
}
inline int64_t nf4StorageBytes(int64_t numel)
{
    int64_t bytes = 0;
    for (const auto &t : nf4Tensors({}, numel))
        bytes += t.numel * t.elementBytes;
    return bytes;
}

} // namespace pb
