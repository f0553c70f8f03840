// ModelSource: --preset / --config option handling.
#include "common/model_source.h"

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/presets.h"

namespace bufferlab::cli {

void ModelSource::add_options(CLI::App& command) {
  preset_option_ =
      command
          .add_option("--preset", preset_,
                      "built-in model (see `bufferlab presets`); REQUIRED unless --config")
          ->type_name("NAME");
  config_option_ =
      command
          .add_option("--config", config_path_,
                      "model config file: a Hugging Face config.json or `config --json` "
                      "output; REQUIRED unless --preset")
          ->type_name("FILE");
  preset_option_->excludes(config_option_);
}

ModelConfig ModelSource::load() const {
  const bool has_preset = preset_option_ && preset_option_->count() > 0;
  const bool has_config = config_option_ && config_option_->count() > 0;
  if (has_preset == has_config)
    throw Error("exactly one of --preset NAME or --config FILE is required");
  if (has_preset) return preset(preset_);
  return load_config_file(config_path_);
}

std::string ModelSource::label() const {
  return preset_option_ && preset_option_->count() > 0 ? preset_ : config_path_;
}

std::string ModelSource::option() const {
  return (preset_option_ && preset_option_->count() > 0 ? "--preset " : "--config ") + label();
}

std::string ModelSource::config_path() const {
  return config_option_ && config_option_->count() > 0 ? config_path_ : "";
}

}  // namespace bufferlab::cli
