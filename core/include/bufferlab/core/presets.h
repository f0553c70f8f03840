// Named model configs (docs/spec/buffers.md §1.2): the reference `qwen3-next-80b`, one preset per
// real config.json of data/configs (embedded into the library at build time and read through
// the config loader), and a tiny config of every family for numeric tests and demos.
#pragma once

#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"

namespace bufferlab {

struct PresetInfo {
  std::string name;         // e.g. "qwen3-8b", "tiny-moe"
  std::string family;       // dense, moe, gdn, mamba, mla, mhc, mhc-lowrank, qsa, lora
  std::string description;  // one line: the model and its source
  bool tiny = false;        // dimensions of tens to hundreds: cheap to allocate and run
};

// Every preset, real ones first; tiny ones are named "tiny-" + family.
std::vector<PresetInfo> list_presets();

// The validated config of preset `name`; Error listing the known names on an unknown one.
ModelConfig preset(const std::string& name);

}  // namespace bufferlab
