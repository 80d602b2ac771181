#pragma once
// Import of a Hugging Face model folder's config.json (llama, mistral, qwen2 decoders and the
// mixture-of-experts mixtral, qwen2_moe, qwen3_moe, olmoe) into a RunConfig with default training
// settings. Unknown fields are ignored, except expert, router and MoE settings, which are refused by
// name; missing required fields are reported by name; shapes the parameter table cannot represent
// exactly are refused.
#include "config/RunConfig.h"

#include <QJsonObject>
#include <QString>

#include <string>
#include <vector>

namespace pb {

// `path`: a model folder holding config.json, the config.json file itself, or, when no such file
// exists, a repository id `owner/name[@revision]` found in the local Hugging Face cache (HfHubCache.h;
// the revision recorded is the commit it resolved to). The result is validated; weightsPath is the
// folder when it holds *.safetensors. Throws InvalidInputError naming the file and field.
RunConfig importHfConfig(const QString &path);
// The model shape of a parsed config.json; `where` (the file) prefixes field names in errors.
ModelShape hfModelShape(const QJsonObject &json, const std::string &where);
// The run config a config.json's object defines on its own (no folder: no revision, weights or
// name): its model shape, RunConfig's training defaults with the sequence capped at the model's
// positions, validated. Throws InvalidInputError naming `where` and the field.
RunConfig hfRunConfig(const QJsonObject &json, const std::string &where);
// The revision the folder records, first found of: a `revision` file, config.json's `_commit_hash`,
// the folder's name when it is a Hugging Face cache `snapshots/<hash>` folder; "" otherwise.
std::string hfRevision(const QString &folder, const QJsonObject &json);
// The model_type values importHfConfig accepts.
const std::vector<std::string> &hfSupportedModelTypes();

} // namespace pb
