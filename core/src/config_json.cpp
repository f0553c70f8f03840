// Entry points of the config readers: JSON text (with the non-strict literals real
// config.json files contain) → ModelConfig in either form, the normalized form both ways, and
// the typed value reads shared with the Hugging Face mapping (config_json_hf.cpp).
#include "bufferlab/core/config_json.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "bufferlab/core/error.h"
#include "bufferlab/core/rope.h"
#include "config_json_detail.h"

namespace bufferlab {

using nlohmann::json;

namespace config_json_detail {
namespace {

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

std::string kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_integer:
      return v.get<int64_t>() < 0 ? "a negative number" : "an integer";
    case json::value_t::number_float: {
      const double d = v.get<double>();
      if (d < 0) return "a negative number";
      if (d != std::floor(d)) return "a fractional number";
      return "a number too large to be an exact integer";
    }
    default:
      return "a binary value";
  }
}

}  // namespace

std::string show(const json& value) {
  std::string text = value.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

void bad_value(const std::string& key, const json& value, const std::string& expected) {
  throw Error(key + " = " + show(value) + ": expected " + expected + ", got " + kind_of(value));
}

uint64_t read_uint(const json& value, const std::string& key) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() == 0) return 0;  // "-0"
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d >= 0 && d <= kMaxExactInteger && d == std::floor(d)) return static_cast<uint64_t>(d);
  }
  bad_value(key, value, "a non-negative integer");
}

bool read_bool(const json& value, const std::string& key) {
  if (!value.is_boolean()) bad_value(key, value, "true or false");
  return value.get<bool>();
}

double read_float(const json& value, const std::string& key) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s == "Infinity") return HUGE_VAL;
    if (s == "-Infinity") return -HUGE_VAL;
    if (s == "NaN") return std::nan("");
  }
  bad_value(key, value, "a number");
}

std::string read_string(const json& value, const std::string& key) {
  if (!value.is_string()) bad_value(key, value, "a string");
  return value.get<std::string>();
}

std::vector<uint64_t> read_uint_list(const json& value, const std::string& key) {
  if (!value.is_array()) bad_value(key, value, "an array of non-negative integers");
  std::vector<uint64_t> out;
  for (size_t i = 0; i < value.size(); ++i)
    out.push_back(read_uint(value[i], key + "[" + std::to_string(i) + "]"));
  return out;
}

std::vector<LayerType> read_layer_types(const json& value, const std::string& key) {
  if (!value.is_array()) bad_value(key, value, "an array of layer type names");
  std::vector<LayerType> out;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string entry = key + "[" + std::to_string(i) + "]";
    const std::string name = read_string(value[i], entry);
    try {
      out.push_back(layer_type_from_string(name));
    } catch (const Error& e) {
      throw Error(entry + " = " + show(value[i]) + ": " + e.what());
    }
  }
  return out;
}

std::array<uint64_t, 3> read_mrope_section(const json& value, const std::string& key) {
  if (!value.is_array() || value.size() != 3)
    bad_value(key, value, "an array of 3 non-negative integers");
  const std::vector<uint64_t> v = read_uint_list(value, key);
  return {v[0], v[1], v[2]};
}

json float_to_json(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

void append_defaulted(const ModelConfig& c, std::vector<ConfigKeyUse>& uses) {
  std::set<std::string> named;
  for (const ConfigKeyUse& u : uses) named.insert(u.field);
  const json normalized = to_normalized_json(c);  // outlives the loop (C++20 range-for)
  for (const auto& [field, value] : normalized.at("config").items())
    if (named.count(field) == 0)
      uses.push_back({ConfigKeyUse::Kind::defaulted, "", field, value.dump()});
}

}  // namespace config_json_detail

namespace {

// ---- JSON text with non-strict literals ----

// The text handed to nlohmann, and for each of its bytes the offset in the original text
// (so a parse error reports the user's line and column).
struct PreparedText {
  std::string text;
  std::vector<size_t> original_offset;
};

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Length of a bare Infinity / -Infinity / NaN token at `i`, or 0.
size_t non_finite_literal_at(std::string_view s, size_t i) {
  if (i > 0 && is_word_char(s[i - 1])) return 0;
  for (std::string_view word : {"-Infinity", "Infinity", "NaN"}) {
    if (s.substr(i, word.size()) != word) continue;
    const size_t end = i + word.size();
    if (end < s.size() && is_word_char(s[end])) return 0;
    return word.size();
  }
  return 0;
}

// "line L, column C" of byte `offset` of `text` (both 1-based).
std::string line_and_column(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n')
      ++line, column = 1;
    else
      ++column;
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// Real config files nest a few levels; nlohmann copies and prints values recursively, so a
// nesting bomb is refused before parsing instead of overflowing the stack.
constexpr size_t kMaxNesting = 256;

// Nemotron-H's config.json contains a bare `Infinity` (Python's json writes it; strict JSON
// has no such literal): outside strings, quote Infinity, -Infinity and NaN so that
// nlohmann accepts them and read_float maps them back. Also enforces kMaxNesting.
PreparedText prepare_json_text(std::string_view in) {
  PreparedText out;
  auto emit = [&](char c, size_t from) {
    out.text.push_back(c);
    out.original_offset.push_back(from);
  };
  bool in_string = false;
  size_t depth = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (in_string) {
      emit(c, i);
      if (c == '"') in_string = false;
      if (c == '\\' && i + 1 < in.size()) {
        ++i;
        emit(in[i], i);  // the escaped character cannot end the string
      }
      continue;
    }
    if (c == '[' || c == '{') ++depth;
    if ((c == ']' || c == '}') && depth > 0) --depth;
    if (depth > kMaxNesting)
      throw Error("JSON nested deeper than " + std::to_string(kMaxNesting) + " levels at " +
                  line_and_column(in, i));
    const size_t n = non_finite_literal_at(in, i);
    if (n == 0) {
      in_string = c == '"';
      emit(c, i);
      continue;
    }
    emit('"', i);
    for (size_t k = 0; k < n; ++k) emit(in[i + k], i + k);
    emit('"', i + n - 1);
    i += n - 1;
  }
  out.original_offset.push_back(in.size());
  return out;
}

// nlohmann's message without its "[json.exception...] parse error at line L, column C: " head.
std::string parser_detail(const std::string& what) {
  const size_t column = what.find("column ");
  const size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
  if (colon != std::string::npos) return what.substr(colon + 2);
  const size_t bracket = what.find("] ");
  return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

bool is_blank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

json parse_json_object(const std::string& text) {
  if (is_blank(text)) throw Error("empty input: expected a JSON object");
  const PreparedText prepared = prepare_json_text(text);
  json root;
  try {
    root = json::parse(prepared.text);
  } catch (const json::parse_error& e) {
    const size_t byte = e.byte == 0 ? 0 : e.byte - 1;
    const size_t original = prepared.original_offset[std::min(byte, prepared.text.size())];
    throw Error("malformed JSON at " + line_and_column(text, original) + ": " +
                parser_detail(e.what()));
  } catch (const json::exception& e) {
    throw Error("malformed JSON: " + parser_detail(e.what()));
  }
  if (!root.is_object())
    throw Error("expected a JSON object at the top level, got " + config_json_detail::show(root));
  return root;
}

// ---- the normalized form ----

constexpr const char* kVersionKey = "bufferlab_config";
constexpr const char* kConfigKey = "config";

bool is_normalized_key(const std::string& key) {
#define BUFFERLAB_IS_KEY(name, def) \
  if (key == #name) return true;
  BUFFERLAB_CONFIG_INT_FIELDS(BUFFERLAB_IS_KEY)
  BUFFERLAB_CONFIG_BOOL_FIELDS(BUFFERLAB_IS_KEY)
  BUFFERLAB_CONFIG_FLOAT_FIELDS(BUFFERLAB_IS_KEY)
#undef BUFFERLAB_IS_KEY
  return key == "scoring_func" || key == "rope_type" || key == "layer_types" ||
         key == "mlp_only_layers" || key == "mrope_section";
}

// Sets the field named `key` from `value`; false for an unknown key.
bool set_normalized_field(ModelConfig& c, const std::string& key, const json& value) {
  const std::string path = std::string(kConfigKey) + "." + key;
#define BUFFERLAB_SET_INT(name, def) \
  if (key == #name) return c.name = config_json_detail::read_uint(value, path), true;
  BUFFERLAB_CONFIG_INT_FIELDS(BUFFERLAB_SET_INT)
#undef BUFFERLAB_SET_INT
#define BUFFERLAB_SET_BOOL(name, def) \
  if (key == #name) return c.name = config_json_detail::read_bool(value, path), true;
  BUFFERLAB_CONFIG_BOOL_FIELDS(BUFFERLAB_SET_BOOL)
#undef BUFFERLAB_SET_BOOL
#define BUFFERLAB_SET_FLOAT(name, def) \
  if (key == #name) return c.name = config_json_detail::read_float(value, path), true;
  BUFFERLAB_CONFIG_FLOAT_FIELDS(BUFFERLAB_SET_FLOAT)
#undef BUFFERLAB_SET_FLOAT
  if (key == "scoring_func")
    return c.scoring_func = config_json_detail::read_string(value, path), true;
  if (key == "rope_type") return c.rope_type = config_json_detail::read_string(value, path), true;
  if (key == "layer_types")
    return c.layer_types = config_json_detail::read_layer_types(value, path), true;
  if (key == "mlp_only_layers")
    return c.mlp_only_layers = config_json_detail::read_uint_list(value, path), true;
  if (key == "mrope_section")
    return c.mrope_section = config_json_detail::read_mrope_section(value, path), true;
  return false;
}

void check_normalized_version(const json& root) {
  const json& version = root.at(kVersionKey);
  if (version.is_number_unsigned() && version.get<uint64_t>() == kNormalizedConfigVersion) return;
  throw Error(std::string(kVersionKey) + " = " + config_json_detail::show(version) +
              ": unsupported version of the normalized config (this build reads version " +
              std::to_string(kNormalizedConfigVersion) + ")");
}

ModelConfig config_from_normalized_json(const json& root, std::vector<ConfigKeyUse>& uses) {
  check_normalized_version(root);
  for (const auto& [key, value] : root.items())
    if (key != kVersionKey && key != kConfigKey)
      throw Error("unknown top-level key \"" + key + "\" in a normalized config (expected \"" +
                  kVersionKey + "\" and \"" + kConfigKey + "\")");
  const auto config = root.find(kConfigKey);
  if (config == root.end()) throw Error("normalized config without a \"config\" object");
  if (!config->is_object()) config_json_detail::bad_value(kConfigKey, *config, "an object");
  ModelConfig c;
  for (const auto& [key, value] : config->items()) {
    if (!is_normalized_key(key))
      throw Error("unknown key \"" + key + "\" in the normalized config (a typo?)");
    if (value.is_null()) continue;  // null = the default
    set_normalized_field(c, key, value);
    uses.push_back({ConfigKeyUse::Kind::read, std::string(kConfigKey) + "." + key, key,
                    config_json_detail::show(value)});
  }
  // Missing keys take §1's defaults, except the keys that size a mechanism the config has
  // (a MoE config without num_experts_per_tok is refused, not given a top-k of 1).
  config_json_detail::require_mechanism_keys(c, [&](const std::string& key) {
    const auto it = config->find(key);
    return it != config->end() && !it->is_null();
  });
  return c;
}

std::string with_source(const std::string& source, const std::string& message) {
  return source.empty() ? message : source + ": " + message;
}

}  // namespace

const char* to_string(ConfigKeyUse::Kind kind) {
  switch (kind) {
    case ConfigKeyUse::Kind::read:
      return "read";
    case ConfigKeyUse::Kind::derived:
      return "derived";
    case ConfigKeyUse::Kind::defaulted:
      return "default";
    case ConfigKeyUse::Kind::ignored:
      return "ignored";
  }
  return "?";
}

ExplainedConfig explain_config_json_text(const std::string& text, const std::string& source) {
  try {
    const json root = parse_json_object(text);
    ExplainedConfig e;
    const bool normalized = root.contains(kVersionKey);
    e.config = normalized ? config_from_normalized_json(root, e.uses)
                          : config_json_detail::config_from_hf_json(root, e.uses);
    e.config.validate();
    // A model's config.json must describe attention a kernel can run; the normalized form also
    // carries the sizing corpus's configs, which no RoPE fits (rope.h, validate_attention).
    if (!normalized) validate_attention(e.config);
    config_json_detail::append_defaulted(e.config, e.uses);
    return e;
  } catch (const Error& e) {
    throw Error(with_source(source, e.what()));
  } catch (const json::exception& e) {
    throw Error(with_source(source, std::string("invalid JSON value: ") + e.what()));
  }
}

ModelConfig config_from_json_text(const std::string& text, const std::string& source) {
  return explain_config_json_text(text, source).config;
}

ExplainedConfig explain_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(path + ": cannot read config file: is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open config file: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(path + ": error while reading config file");
  return explain_config_json_text(text.str(), path);
}

ModelConfig load_config_file(const std::string& path) { return explain_config_file(path).config; }

json to_normalized_json(const ModelConfig& c) {
  json config = json::object();
#define BUFFERLAB_WRITE_PLAIN(name, def) config[#name] = c.name;
  BUFFERLAB_CONFIG_INT_FIELDS(BUFFERLAB_WRITE_PLAIN)
  BUFFERLAB_CONFIG_BOOL_FIELDS(BUFFERLAB_WRITE_PLAIN)
#undef BUFFERLAB_WRITE_PLAIN
#define BUFFERLAB_WRITE_FLOAT(name, def) config[#name] = config_json_detail::float_to_json(c.name);
  BUFFERLAB_CONFIG_FLOAT_FIELDS(BUFFERLAB_WRITE_FLOAT)
#undef BUFFERLAB_WRITE_FLOAT
  config["scoring_func"] = c.scoring_func;
  config["rope_type"] = c.rope_type;
  json types = json::array();
  for (LayerType t : c.layer_types) types.push_back(to_string(t));
  config["layer_types"] = types;
  config["mlp_only_layers"] = c.mlp_only_layers;
  config["mrope_section"] = c.mrope_section;
  return json{{kVersionKey, kNormalizedConfigVersion}, {kConfigKey, config}};
}

}  // namespace bufferlab
