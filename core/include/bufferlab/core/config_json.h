// ModelConfig from and to JSON: a Hugging Face config.json (mapped as docs/spec/buffers.md §1.1)
// or BufferLab's normalized form {"bufferlab_config": 1, "config": {<every §1 field>}}.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/core/model_config.h"

namespace bufferlab {

// The version of the normalized form this build reads and writes.
inline constexpr int kNormalizedConfigVersion = 1;

// What the loader made of one key of a config file, or of one field no key gave: the table
// `bufferlab config --explain` prints.
struct ConfigKeyUse {
  enum class Kind {
    read,       // the key's value became the field
    derived,    // the field was computed (from other keys, or a §1.1 rule for an absent key)
    defaulted,  // no key gave the field: the §1 default
    ignored,    // the key sets nothing (unknown to §1.1, or shadowed by another key)
  };
  Kind kind;
  std::string key;    // where in the file ("text_config.hidden_size"); empty when none
  std::string field;  // the ModelConfig field; empty for an ignored key
  std::string note;   // read: the value; derived: the rule and value; defaulted: the value;
                      // ignored: why
};
const char* to_string(ConfigKeyUse::Kind kind);

// A loaded config and, in file order of the §1.1 rules, every key read, every field derived
// or defaulted and every key ignored.
struct ExplainedConfig {
  ModelConfig config;
  std::vector<ConfigKeyUse> uses;
};

// As config_from_json_text / load_config_file, with the table of what was read.
ExplainedConfig explain_config_json_text(const std::string& text, const std::string& source = "");
ExplainedConfig explain_config_file(const std::string& path);

// Parses either form (told apart by the top-level "bufferlab_config" key) and validates the
// result. Every problem — malformed JSON (with its line and column), a missing required key,
// a wrongly typed value, an unknown key in the normalized form, an invalid config — is a
// bufferlab::Error whose message starts with "<source>: " (when source is not empty) and
// names the key and the offending value.
ModelConfig config_from_json_text(const std::string& text, const std::string& source = "");

// Reads `path` and parses it as config_from_json_text(text, path). Error if unreadable.
ModelConfig load_config_file(const std::string& path);

// The normalized form of `config`: every field of docs/spec/buffers.md §1 by its name, non-finite
// floats as the strings "Infinity", "-Infinity", "NaN". config_from_json_text(to_normalized_json(c)
// .dump()) == c for every valid config.
nlohmann::json to_normalized_json(const ModelConfig& config);

}  // namespace bufferlab
