#include "model/WeightLoader.h"

#include "model/Safetensors.h"
#include "model/Transformer.h"
#include "util/Errors.h"

#include <spdlog/spdlog.h>

#include <set>

namespace pb {
namespace {

c10::optional<at::ScalarType> scalarType(const std::string &dtype)
{
    if (dtype == "F32")
        return at::kFloat;
    if (dtype == "BF16")
        return at::kBFloat16;
    if (dtype == "F16")
        return at::kHalf;
    if (dtype == "F64")
        return at::kDouble;
    return {};
}

// MXFP4 (the published gpt-oss experts): each byte holds two 4-bit e2m1 codes, low nibble first;
// each group of 32 values shares a power of two, its exponent + 127 in one byte. blocks
// [rows, G, 16] and scales [rows, G] -> fp32 [rows, G * 32].
torch::Tensor mxfp4Rows(const torch::Tensor &blocks, const torch::Tensor &scales)
{
    static const std::vector<float> kCodes {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    const auto table = torch::tensor(kCodes);
    const auto bytes = blocks.to(torch::kLong);
    const auto values = torch::stack({table.index({bytes.remainder(16)}), table.index({bytes.div(16, "floor")})}, -1).flatten(-2); // [rows, G, 32]
    const auto powers = torch::pow(2.0, scales.to(torch::kFloat) - 127.0).unsqueeze(-1);
    return (values * powers).flatten(-2);
}

std::string shapeText(const std::vector<int64_t> &shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

} // namespace

WeightLoadReport loadSafetensors(torch::nn::Module &model, const QString &folder)
{
    SafetensorsFolder files(folder);
    WeightLoadReport report;
    std::set<std::string> used;
    torch::NoGradGuard noGrad;
    // The tensor `name` as a CPU view of the file, checked against `shape`; undefined when the files
    // have no such tensor.
    auto read = [&](const std::string &name, const std::vector<int64_t> &shape) -> torch::Tensor {
        const SafetensorEntry *entry = files.find(name);
        // A multimodal checkpoint (Gemma 3, Mistral 3) keeps its text model under language_model:
        // model.language_model.* (Transformers 5) or language_model.model.* (older saves).
        for (const auto &[ours, theirs] : {std::pair<std::string, std::string> {"model.", "model.language_model."}, {"model.", "language_model.model."},
                                           {"lm_head.", "language_model.lm_head."}})
            if (!entry && name.compare(0, ours.size(), ours) == 0)
                entry = files.find(theirs + name.substr(ours.size()));
        if (!entry)
            return {};
        if (entry->shape != shape)
            throw InvalidInputError(entry->file.toStdString(), "tensor '" + name + "' has shape " + shapeText(entry->shape) + ", the model expects " +
                                                                   shapeText(shape));
        const auto type = scalarType(entry->dtype);
        if (!type)
            throw InvalidInputError(entry->file.toStdString(), "tensor '" + name + "' has dtype " + entry->dtype + ", which is not a floating-point weight");
        used.insert(entry->name);
        ++report.loaded;
        report.bytes += entry->end - entry->begin;
        return torch::from_blob(const_cast<uchar *>(files.data(*entry)), entry->shape, torch::TensorOptions().dtype(*type));
    };
    auto missing = [&](const std::string &name) {
        return InvalidInputError(folder.toStdString(), "has no tensor '" + name + "' (the model's shape or family differs from the checkpoint's)");
    };
    for (auto &item : model.named_parameters()) {
        const std::string &name = item.key();
        auto &param = item.value();
        const auto source = read(name, param.sizes().vec());
        if (!source.defined()) {
            if (name.find(".lora_") != std::string::npos)
                continue; // adapters start from their own initialisation
            // gpt-oss as published: a stacked expert tensor [E, in, out] as MXFP4 blocks [E, out,
            // in / 32, 16] and scales [E, out, in / 32], dequantised here expert by expert (as
            // Transformers' dequantize, then transposed).
            const SafetensorEntry *blocks = files.find(name + "_blocks"), *scales = files.find(name + "_scales");
            if (!blocks || !scales)
                throw missing(name);
            const auto shape = param.sizes().vec();
            const std::vector<int64_t> blockShape {shape.size() == 3 ? shape[0] : -1, shape.size() == 3 ? shape[2] : -1, shape.size() == 3 ? shape[1] / 32 : -1, 16};
            const std::vector<int64_t> scaleShape(blockShape.begin(), blockShape.end() - 1);
            if (blocks->dtype != "U8" || scales->dtype != "U8" || blocks->shape != blockShape || scales->shape != scaleShape || shape[1] % 32 != 0)
                throw InvalidInputError(blocks->file.toStdString(), "MXFP4 tensors of '" + name + "' (" + blocks->dtype + " " + shapeText(blocks->shape) + ", " + scales->dtype + " " +
                                                                        shapeText(scales->shape) + ") do not make its shape " + shapeText(shape) + " (expected U8 " +
                                                                        shapeText(blockShape) + " and U8 " + shapeText(scaleShape) + ")");
            const auto allBlocks = torch::from_blob(const_cast<uchar *>(files.data(*blocks)), blockShape, torch::kUInt8);
            const auto allScales = torch::from_blob(const_cast<uchar *>(files.data(*scales)), scaleShape, torch::kUInt8);
            for (int64_t e = 0; e < shape[0]; ++e)
                param[e].copy_(mxfp4Rows(allBlocks[e], allScales[e]).t());
            used.insert(blocks->name);
            used.insert(scales->name);
            report.loaded += 2;
            report.bytes += (blocks->end - blocks->begin) + (scales->end - scales->begin);
            continue;
        }
        param.copy_(source);
    }
    // Buffers the checkpoints carry (DeepSeek-V3's router correction bias, Gemma 4's layer scalar),
    // in the buffer's own dtype.
    for (auto &item : model.named_buffers()) {
        const std::string &name = item.key();
        auto endsWith = [&name](const std::string &tail) { return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0; };
        if (!endsWith(".e_score_correction_bias") && !endsWith(".layer_scalar"))
            continue;
        const auto source = read(name, item.value().sizes().vec());
        if (!source.defined())
            throw missing(name);
        item.value().copy_(source);
    }
    // QLoRA's bases: the checkpoint's 16-bit matrices, quantised to NF4 as they are read.
    for (const auto &item : model.named_modules()) {
        auto *linear = dynamic_cast<LoraLinearImpl *>(item.value().get());
        if (!linear || !linear->nf4Base())
            continue;
        const std::string name = item.key() + ".weight";
        const auto source = read(name, linear->base.shape);
        if (!source.defined())
            throw missing(name);
        linear->setBase(source);
    }
    for (const auto &[name, entry] : files.entries())
        if (!used.count(name))
            ++report.ignored;
    spdlog::info("loaded {} tensors ({} bytes) from {}; {} tensors in the files were not used", report.loaded, report.bytes, folder.toStdString(), report.ignored);
    return report;
}

} // namespace pb
