#pragma once
// The JSON form of ModelTraits: flat keys of the config's "model" object, each written only when it
// differs from Llama's default, so a config without the trait keeps the hash it had before.
#include "config/JsonReader.h"
#include "config/RunConfig.h"

#include <QJsonObject>

namespace pb {

void writeModelTraits(const ModelTraits &traits, QJsonObject &model);
void readModelTraits(JsonReader &model, ModelTraits &traits);
// Every trait away from its default: the schema `--set` checks paths against.
ModelTraits everyModelTraitSet();

} // namespace pb
