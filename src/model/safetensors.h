// safetensors files and sharded folders (model.safetensors.index.json).
// Only the header is read when a file opens: tensors are views into the
// memory mapping, checked against the file size first, so a 100 GB
// checkpoint opens in milliseconds and a truncated one fails by name.
#pragma once
#include <string>

#include "model/weights.h"

namespace bonfire {

// Adds every tensor of one .safetensors file to `store`.
void load_safetensors_file(const std::string& path, WeightStore& store);

// Loads a model folder's weights: model.safetensors.index.json when present
// (every shard it names, each tensor where the index says), else every
// *.safetensors file in the folder.
void load_safetensors_folder(const std::string& dir, WeightStore& store);

}  // namespace bonfire
