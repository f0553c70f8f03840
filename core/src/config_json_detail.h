// Internals of the config.json readers (config_json.cpp, config_json_hf.cpp): typed reads of
// JSON values whose errors name the key and the offending value, and the §1.1 mapping.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/model_config.h"

namespace bufferlab::config_json_detail {

// A short printable form of a JSON value for error messages.
std::string show(const nlohmann::json& value);

// Throws "<key> = <value>: expected <expected>, got <kind>".
[[noreturn]] void bad_value(const std::string& key, const nlohmann::json& value,
                            const std::string& expected);

// Typed reads; `key` is the full path for messages (e.g. "text_config.hidden_size").
// Integers: non-negative, and a float only when it is integral and exact (≤ 2^53).
// Floats: any number, or the strings "Infinity", "-Infinity", "NaN" (which is also what a
// bare Infinity / -Infinity / NaN literal in the text becomes).
uint64_t read_uint(const nlohmann::json& value, const std::string& key);
bool read_bool(const nlohmann::json& value, const std::string& key);
double read_float(const nlohmann::json& value, const std::string& key);
std::string read_string(const nlohmann::json& value, const std::string& key);
std::vector<uint64_t> read_uint_list(const nlohmann::json& value, const std::string& key);
std::vector<LayerType> read_layer_types(const nlohmann::json& value, const std::string& key);
std::array<uint64_t, 3> read_mrope_section(const nlohmann::json& value, const std::string& key);

// A float as the normalized form writes it: a number, or "Infinity" / "-Infinity" / "NaN".
nlohmann::json float_to_json(double value);

// The Hugging Face mapping of docs/spec/buffers.md §1.1 (not validated), with every key read, field
// derived and key ignored appended to `uses`.
// Refuses a config that has a mechanism (MoE, Mamba-2, GDN, MLA, indexer, grouped O) but
// lacks one of the keys that size it, naming the key and its known spellings: no silent
// default. `given_key(spelling)` says whether the file gives that key (null counts as absent).
void require_mechanism_keys(const ModelConfig& c,
                            const std::function<bool(const std::string&)>& given_key);

ModelConfig config_from_hf_json(const nlohmann::json& root, std::vector<ConfigKeyUse>& uses);

// Appends a `defaulted` row for every §1 field of `c` that no row of `uses` names.
void append_defaulted(const ModelConfig& c, std::vector<ConfigKeyUse>& uses);

}  // namespace bufferlab::config_json_detail
