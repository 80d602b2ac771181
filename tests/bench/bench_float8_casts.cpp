// The float8 casts of train.precision = fp8-rowwise (model/Fp8Linear.cpp) on Llama-3.1-8B's widths
// at TOKENS tokens (default 16384: seq 4096 x micro-batch 4), one layer's operands as a training
// step casts them: each row cast with its column maxima (X, dY as bf16, W as an fp32 master) and
// each transposed cast (X^T, dY^T, W^T). Prints each one's time and bandwidth (bytes read and
// written over the time), and, in the same run, bf16 rows of 14336 columns read once (held in
// registers) against two passes, and their ratio.
//   bench_float8_casts [--device cuda:0] [--tokens N] [--repeats N]
#include <torch/torch.h>

#ifdef PB_WITH_CUDA_KERNELS
#include "kernels/Float8Kernels.h"

#include <c10/cuda/CUDAStream.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char **argv)
{
    std::string device = "cuda:0";
    int64_t tokens = 16384;
    int repeats = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--device"))
            device = argv[i + 1];
        else if (!std::strcmp(argv[i], "--tokens"))
            tokens = std::stoll(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--repeats"))
            repeats = std::stoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "bench_float8_casts: unknown option %s\n", argv[i]);
            return 2;
        }
    }
#ifndef PB_WITH_CUDA_KERNELS
    (void)tokens;
    (void)repeats;
    std::fprintf(stderr, "bench_float8_casts: needs a build with the CUDA kernels (nvcc); %s not timed\n", device.c_str());
    return 2;
#else
    namespace k = pb::kernels;
    const torch::Device dev(device);
    if (!dev.is_cuda() || !torch::cuda::is_available()) {
        std::fprintf(stderr, "bench_float8_casts: --device must be a CUDA device\n");
        return 2;
    }
    void *stream = c10::cuda::getCurrentCUDAStream(dev.index()).stream();
    auto time = [&](auto &&launch) {
        launch();
        torch::cuda::synchronize();
        const auto start = std::chrono::steady_clock::now();
        for (int r = 0; r < repeats; ++r)
            launch();
        torch::cuda::synchronize();
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / repeats;
    };
    struct Operand {
        const char *name;
        int64_t rows, cols;
        bool fp32;
    };
    // X of q/k/v (and o, gate/up: the same shape) and of down; dY of q, k/v, gate/up; W of q, k/v, gate/up, down.
    const Operand operands[] = {{"X [T, 4096]", tokens, 4096, false},      {"X [T, 14336]", tokens, 14336, false}, {"dY [T, 1024]", tokens, 1024, false},
                                {"W [4096, 4096] fp32", 4096, 4096, true}, {"W [1024, 4096] fp32", 1024, 4096, true}, {"W [14336, 4096] fp32", 14336, 4096, true},
                                {"W [4096, 14336] fp32", 4096, 14336, true}};
    std::printf("%-22s %12s %9s %12s %9s\n", "operand", "rows us", "GB/s", "transp. us", "GB/s");
    for (const auto &o : operands) {
        const auto x = torch::randn({o.rows, o.cols}, torch::TensorOptions().device(dev).dtype(o.fp32 ? torch::kFloat : torch::kBFloat16));
        const auto type = o.fp32 ? k::Dtype::Float32 : k::Dtype::BFloat16;
        auto q = torch::empty({o.rows, o.cols}, x.options().dtype(torch::kUInt8));
        auto scales = torch::empty({o.rows}, x.options().dtype(torch::kFloat));
        auto colAmax = torch::zeros({o.cols}, x.options().dtype(torch::kFloat));
        auto qt = torch::empty({o.cols, o.rows}, x.options().dtype(torch::kUInt8));
        auto scalesT = torch::empty({o.cols}, x.options().dtype(torch::kFloat));
        const double bytes = static_cast<double>(o.rows * o.cols) * ((o.fp32 ? 4 : 2) + 1);
        const double rowsUs = time([&] {
            colAmax.zero_();
            k::float8QuantizeRows(x.data_ptr(), type, o.rows, o.cols, false, q.data_ptr<uint8_t>(), scales.data_ptr<float>(), stream, colAmax.data_ptr<float>());
        });
        const double zeroUs = time([&] { colAmax.zero_(); });
        const double transposedUs = time([&] {
            k::float8QuantizeColumnsTransposed(x.data_ptr(), type, o.rows, o.cols, colAmax.data_ptr<float>(), true, false, qt.data_ptr<uint8_t>(),
                                               scalesT.data_ptr<float>(), stream);
        });
        std::printf("%-22s %12.1f %9.0f %12.1f %9.0f\n", o.name, rowsUs - zeroUs, bytes / (rowsUs - zeroUs) / 1e3, transposedUs, bytes / transposedUs / 1e3);
    }
    // The wide 16-bit rows both ways, with and without column maxima.
    const auto wide = torch::randn({tokens, 14336}, torch::TensorOptions().device(dev).dtype(torch::kBFloat16));
    auto q = torch::empty({tokens, 14336}, wide.options().dtype(torch::kUInt8));
    auto scales = torch::empty({tokens}, wide.options().dtype(torch::kFloat));
    auto colAmax = torch::zeros({14336}, wide.options().dtype(torch::kFloat));
    const double bytes = static_cast<double>(tokens) * 14336 * 3;
    for (bool columns : {true, false}) {
        double us[2];
        for (int onePass = 0; onePass < 2; ++onePass) {
            k::float8SetWideRowsInOnePass(onePass == 1);
            us[onePass] = time([&] {
                k::float8QuantizeRows(wide.data_ptr(), k::Dtype::BFloat16, tokens, 14336, false, q.data_ptr<uint8_t>(), scales.data_ptr<float>(), stream,
                                      columns ? colAmax.data_ptr<float>() : nullptr);
            });
        }
        k::float8SetWideRowsInOnePass(true);
        std::printf("bf16 [%lld, 14336]%s: held %.1f us (%.0f GB/s), two passes %.1f us (%.0f GB/s), held/two-pass time %.3f\n", static_cast<long long>(tokens),
                    columns ? " with column maxima" : "", us[1], bytes / us[1] / 1e3, us[0], bytes / us[0] / 1e3, us[1] / us[0]);
    }
    return 0;
#endif
}
