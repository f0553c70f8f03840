// The "--preset NAME | --config FILE" pair shared by every command that reads a model:
// exactly one of the two, resolved to a validated ModelConfig and a label for reports.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "bufferlab/core/model_config.h"

namespace bufferlab::cli {

class ModelSource {
 public:
  // Adds --preset and --config (mutually exclusive) to `command`.
  void add_options(CLI::App& command);

  // The chosen model. Throws bufferlab::Error unless exactly one option was given, for an
  // unknown preset, or for an unreadable, malformed or invalid config file (both the
  // presets and the loader validate what they return).
  ModelConfig load() const;

  // The preset name or the config path, as the user wrote it.
  std::string label() const;
  // The option as the user gave it: "--preset NAME" or "--config FILE" (for suggested commands).
  std::string option() const;

  // The --config path, or "" when --config was not given.
  std::string config_path() const;

 private:
  std::string preset_;
  std::string config_path_;
  CLI::Option* preset_option_ = nullptr;
  CLI::Option* config_option_ = nullptr;
};

}  // namespace bufferlab::cli
