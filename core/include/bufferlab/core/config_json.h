// ModelConfig from and to JSON: a Hugging Face config.json (mapped as docs/spec/buffers.md §1.1)
// or BufferLab's normalized form {"bufferlab_config": 1, "config": {<every §1 field>}}.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bufferlab/core/model_config.h"

namespace bufferlab {

// The version of the normalized form this build reads and writes.
inline constexpr int kNormalizedConfigVersion = 1;

// Parses either form (told apart by the top-level "bufferlab_config" key) and validates the
// result. Every problem — malformed JSON (with its line and column), a missing required key,
// a wrongly typed value, an unknown key in the normalized form, an invalid config — is a
// bufferlab::Error whose message starts with "<source>: " (when source is not empty) and
// names the key and the offending value.
ModelConfig config_from_json_text(const std::string& text, const std::string& source = "");

// Reads `path` and parses it as config_from_json_text(text, path). Error if unreadable.
ModelConfig load_config_file(const std::string& path);

// The normalized form of `config`: every field of spec §1 by its name, non-finite floats as
// the strings "Infinity", "-Infinity", "NaN". config_from_json_text(to_normalized_json(c)
// .dump()) == c for every valid config.
nlohmann::json to_normalized_json(const ModelConfig& config);

}  // namespace bufferlab
