#pragma once
// Reading the fields of a Hugging Face config.json: each error names the file and the key, absent or
// null optional keys keep the default of the type's Transformers config class.
#include "config/RunConfig.h"

#include <QJsonObject>

#include <cstdint>
#include <string>

namespace pb {

std::string hfField(const std::string &where, const char *key);
int64_t requiredInt(const QJsonObject &json, const std::string &where, const char *key);
int64_t optionalInt(const QJsonObject &json, const std::string &where, const char *key, int64_t fallback);
double optionalNumber(const QJsonObject &json, const std::string &where, const char *key, double fallback);
bool optionalBool(const QJsonObject &json, const std::string &where, const char *key, bool fallback);
// Present and not null.
bool present(const QJsonObject &json, const char *key);

// A family's Transformers config class defaults for the keys every decoder config has.
struct HfShapeDefaults {
    int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0, kvHeads = 0, headDim = 0, maxPositions = 0;
    double normEps = 1e-6;
    bool tied = false;
};
// Reads vocab_size, hidden_size, intermediate_size, num_hidden_layers (refused past
// kMaxModelLayers before any per-layer list is built from it), num_attention_heads,
// num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps and tie_word_embeddings
// into `m`, each absent or null key at its default; `family` and preset "hf-import" set too.
ModelShape hfCommonShape(const QJsonObject &json, const std::string &where, const std::string &family, const HfShapeDefaults &defaults);

} // namespace pb
