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
            // gpt-oss as published: experts in MXFP4 blocks and scales, which are not read here.
            if (files.find(name + "_blocks"))
                throw InvalidInputError(folder.toStdString(), "stores '" + name + "' as MXFP4 (" + name + "_blocks, _scales); training needs the experts in "
                                                              "bf16: save a dequantised copy (Transformers: Mxfp4Config(dequantize=True)) and point weights_path at it");
            throw missing(name);
        }
        param.copy_(source);
    }
    // Buffers the checkpoints carry (DeepSeek-V3's router correction bias), in the buffer's own dtype.
    for (auto &item : model.named_buffers()) {
        const std::string &name = item.key();
        static const std::string kCorrectionBias = ".e_score_correction_bias";
        if (name.size() < kCorrectionBias.size() || name.compare(name.size() - kCorrectionBias.size(), kCorrectionBias.size(), kCorrectionBias) != 0)
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
