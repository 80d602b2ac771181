#include "model/WeightLoader.h"

#include "model/Safetensors.h"
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
    for (auto &item : model.named_parameters()) {
        const std::string &name = item.key();
        const SafetensorEntry *entry = files.find(name);
        // A multimodal checkpoint (Gemma 3, Mistral 3) keeps its text model under language_model:
        // model.language_model.* (Transformers 5) or language_model.model.* (older saves).
        for (const auto &[ours, theirs] : {std::pair<std::string, std::string> {"model.", "model.language_model."}, {"model.", "language_model.model."},
                                           {"lm_head.", "language_model.lm_head."}})
            if (!entry && name.compare(0, ours.size(), ours) == 0)
                entry = files.find(theirs + name.substr(ours.size()));
        if (!entry) {
            if (name.find(".lora_") != std::string::npos)
                continue; // adapters start from their own initialisation
            throw InvalidInputError(folder.toStdString(), "has no tensor '" + name + "' (the model's shape or family differs from the checkpoint's)");
        }
        auto &param = item.value();
        if (entry->shape != param.sizes().vec())
            throw InvalidInputError(entry->file.toStdString(), "tensor '" + name + "' has shape " + shapeText(entry->shape) + ", the model expects " +
                                                                   shapeText(param.sizes().vec()));
        const auto type = scalarType(entry->dtype);
        if (!type)
            throw InvalidInputError(entry->file.toStdString(), "tensor '" + name + "' has dtype " + entry->dtype + ", which is not a floating-point weight");
        const auto source = torch::from_blob(const_cast<uchar *>(files.data(*entry)), entry->shape, torch::TensorOptions().dtype(*type));
        param.copy_(source);
        used.insert(entry->name);
        ++report.loaded;
        report.bytes += entry->end - entry->begin;
    }
    for (const auto &[name, entry] : files.entries())
        if (!used.count(name))
            ++report.ignored;
    spdlog::info("loaded {} tensors ({} bytes) from {}; {} tensors in the files were not used", report.loaded, report.bytes, folder.toStdString(), report.ignored);
    return report;
}

} // namespace pb
