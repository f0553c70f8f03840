// The Hugging Face config.json → ModelConfig mapping of docs/spec/buffers.md §1.1.
//
// Choices beyond the table:
//   - every §1 field may also be given by its own name (hc_mult, index_topk, zero_expert_num,
//     ...); where the table lists spellings, all of them are read;
//   - two spellings of one field with different values (e.g. num_experts_per_tok = 4 and
//     experts_per_token = 2) are an Error rather than a silent pick;
//   - DeepSeek's `moe_layer_freq` (MoE iff i >= first_k_dense_replace and i % freq == 0)
//     differs from Qwen's decoder_sparse_step ((i+1) % step == 0): a value > 1 is expressed
//     exactly as moe_layer_freq = 1 plus the skipped layers in mlp_only_layers; both keys
//     at once (unless both are 1) is an Error;
//   - layer_types and hybrid_override_pattern together are an Error;
//   - a text_config key wins over the top-level key even when its value is null.
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "config_json_detail.h"

namespace bufferlab::config_json_detail {
namespace {

using nlohmann::json;

// One place a value may come from: its path for messages and the value (never null).
struct Candidate {
  std::string path;
  const json* value;
};

// The top-level object with text_config's keys laid over it, remembering which keys came
// from text_config so that messages name the key where the user wrote it.
class HfConfig {
 public:
  explicit HfConfig(const json& root) : merged_(root) {
    const auto text = root.find("text_config");
    if (text == root.end() || text->is_null()) return;
    if (!text->is_object()) bad_value("text_config", *text, "an object");
    for (const auto& [key, value] : text->items()) {
      merged_[key] = value;
      from_text_config_.insert(key);
    }
  }

  std::string path(const std::string& key) const {
    return from_text_config_.count(key) != 0 ? "text_config." + key : key;
  }

  // The value of `key`, or nullptr when it is absent or null (null = the default).
  const json* find(const std::string& key) const {
    const auto it = merged_.find(key);
    return it == merged_.end() || it->is_null() ? nullptr : &*it;
  }

  std::vector<Candidate> candidates(std::initializer_list<const char*> keys) const {
    std::vector<Candidate> out;
    for (const char* key : keys)
      if (const json* v = find(key)) out.push_back({path(key), v});
    return out;
  }

  std::optional<uint64_t> uint_of(const std::string& key) const {
    const json* v = find(key);
    return v ? std::optional(read_uint(*v, path(key))) : std::nullopt;
  }
  std::optional<bool> bool_of(const std::string& key) const {
    const json* v = find(key);
    return v ? std::optional(read_bool(*v, path(key))) : std::nullopt;
  }
  std::optional<double> float_of(const std::string& key) const {
    const json* v = find(key);
    return v ? std::optional(read_float(*v, path(key))) : std::nullopt;
  }
  std::optional<std::string> string_of(const std::string& key) const {
    const json* v = find(key);
    return v ? std::optional(read_string(*v, path(key))) : std::nullopt;
  }

 private:
  json merged_;
  std::set<std::string> from_text_config_;
};

// The value given by one or more spellings; an Error when two spellings disagree.
template <class T, class Read>
std::optional<T> resolve(const std::vector<Candidate>& candidates, Read read) {
  std::optional<T> result;
  const Candidate* first = nullptr;
  for (const Candidate& c : candidates) {
    T value = read(*c.value, c.path);
    if (!result) {
      result = std::move(value);
      first = &c;
    } else if (*result != value) {
      throw Error("conflicting values: " + first->path + " = " + show(*first->value) + " but " +
                  c.path + " = " + show(*c.value));
    }
  }
  return result;
}

std::optional<uint64_t> uint_alias(const HfConfig& hf, std::initializer_list<const char*> keys) {
  return resolve<uint64_t>(hf.candidates(keys), read_uint);
}

// Fields with their own rule below; every other §1 field is read by its own name.
bool has_own_rule(const std::string& field) {
  static const std::set<std::string> kOwnRule = {"head_dim",
                                                 "num_key_value_heads",
                                                 "num_experts",
                                                 "num_experts_per_tok",
                                                 "moe_intermediate_size",
                                                 "shared_expert_intermediate_size",
                                                 "first_k_dense",
                                                 "moe_layer_freq",
                                                 "attn_gated",
                                                 "use_routing_bias",
                                                 "mrope_interleaved",
                                                 "rms_norm_eps"};
  return kOwnRule.count(field) != 0;
}

void read_same_name_fields(const HfConfig& hf, ModelConfig& c) {
#define BUFFERLAB_READ_SAME(name, def, getter) \
  if (!has_own_rule(#name))                    \
    if (const auto v = hf.getter(#name)) c.name = *v;
#define BUFFERLAB_READ_INT(name, def) BUFFERLAB_READ_SAME(name, def, uint_of)
#define BUFFERLAB_READ_BOOL(name, def) BUFFERLAB_READ_SAME(name, def, bool_of)
#define BUFFERLAB_READ_FLOAT(name, def) BUFFERLAB_READ_SAME(name, def, float_of)
  BUFFERLAB_CONFIG_INT_FIELDS(BUFFERLAB_READ_INT)
  BUFFERLAB_CONFIG_BOOL_FIELDS(BUFFERLAB_READ_BOOL)
  BUFFERLAB_CONFIG_FLOAT_FIELDS(BUFFERLAB_READ_FLOAT)
#undef BUFFERLAB_READ_FLOAT
#undef BUFFERLAB_READ_BOOL
#undef BUFFERLAB_READ_INT
#undef BUFFERLAB_READ_SAME
  if (const auto f = hf.string_of("scoring_func")) c.scoring_func = *f;
  if (const json* v = hf.find("mlp_only_layers"))
    c.mlp_only_layers = read_uint_list(*v, hf.path("mlp_only_layers"));
}

void require_keys(const HfConfig& hf) {
  for (const char* key : {"hidden_size", "vocab_size", "num_attention_heads", "num_hidden_layers"})
    if (hf.find(key) == nullptr)
      throw Error(std::string("missing required key \"") + key + "\" (looked at the top level" +
                  " and in text_config)");
}

uint64_t mla_head_dim(const HfConfig& hf, const ModelConfig& c) {
  try {
    return (Size(c.qk_nope_head_dim) + c.qk_rope_head_dim).value();
  } catch (const OverflowError&) {
    throw Error(hf.path("qk_nope_head_dim") + " + " + hf.path("qk_rope_head_dim") +
                " overflows 64 bits (the MLA head_dim)");
  }
}

void read_attention(const HfConfig& hf, ModelConfig& c) {
  const uint64_t nq = c.num_attention_heads;
  c.num_key_value_heads = hf.uint_of("num_key_value_heads").value_or(nq);
  if (const auto hd = uint_alias(hf, {"head_dim", "attention_head_dim"}))
    c.head_dim = *hd;
  else if (c.kv_lora_rank > 0)
    c.head_dim = mla_head_dim(hf, c);
  else
    c.head_dim = nq > 0 ? c.hidden_size / nq : 0;  // validate() reports nq = 0
  if (const auto gated =
          resolve<bool>(hf.candidates({"attn_output_gate", "attn_gated"}), read_bool))
    c.attn_gated = *gated;
  else
    c.attn_gated = hf.string_of("model_type") == "qwen3_next";
}

void read_shared_expert(const HfConfig& hf, ModelConfig& c) {
  const auto direct =
      uint_alias(hf, {"shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"});
  const auto count = hf.uint_of("n_shared_experts");
  if (!count) {
    c.shared_expert_intermediate_size = direct.value_or(0);
    return;
  }
  uint64_t product = 0;
  if (__builtin_mul_overflow(*count, c.moe_intermediate_size, &product))
    throw Error(hf.path("n_shared_experts") + " = " + std::to_string(*count) +
                " times moe_intermediate_size = " + std::to_string(c.moe_intermediate_size) +
                " overflows 64 bits");
  if (direct && *direct != product)
    throw Error("conflicting values: shared_expert_intermediate_size = " + std::to_string(*direct) +
                " but n_shared_experts × moe_intermediate_size = " + std::to_string(product));
  c.shared_expert_intermediate_size = product;
}

// decoder_sparse_step (Qwen) maps directly; DeepSeek's moe_layer_freq has another rule.
void read_moe_layer_freq(const HfConfig& hf, ModelConfig& c) {
  const auto step = hf.uint_of("decoder_sparse_step");
  const auto freq = hf.uint_of("moe_layer_freq");
  if (step && freq && !(*step == 1 && *freq == 1))
    throw Error(hf.path("decoder_sparse_step") + " = " + std::to_string(*step) + " and " +
                hf.path("moe_layer_freq") + " = " + std::to_string(*freq) +
                " are both given and their layer rules differ");
  if (step) {
    c.moe_layer_freq = *step;
    return;
  }
  if (!freq || *freq <= 1) {
    c.moe_layer_freq = freq.value_or(1);  // 0 is left for validate() to report
    return;
  }
  for (uint64_t i = c.first_k_dense; i < c.num_hidden_layers; ++i)
    if (i % *freq != 0) c.mlp_only_layers.push_back(i);
  std::set<uint64_t> unique(c.mlp_only_layers.begin(), c.mlp_only_layers.end());
  c.mlp_only_layers.assign(unique.begin(), unique.end());
  c.moe_layer_freq = 1;
}

bool routing_bias(const HfConfig& hf) {
  if (hf.string_of("topk_method") == "noaux_tc") return true;
  if (hf.find("e_score_correction_bias") != nullptr) return true;
  return hf.bool_of("use_routing_bias").value_or(false);
}

void read_moe(const HfConfig& hf, ModelConfig& c) {
  c.num_experts =
      uint_alias(hf, {"num_experts", "n_routed_experts", "num_local_experts"}).value_or(0);
  c.num_experts_per_tok =
      uint_alias(hf, {"num_experts_per_tok", "moe_topk", "experts_per_token"}).value_or(1);
  const auto moe_width = uint_alias(hf, {"moe_intermediate_size", "expert_ffn_hidden_size"});
  c.moe_intermediate_size = moe_width.value_or(c.num_experts > 0 ? c.intermediate_size : 0);
  read_shared_expert(hf, c);
  c.first_k_dense = uint_alias(hf, {"first_k_dense_replace", "first_k_dense"}).value_or(0);
  read_moe_layer_freq(hf, c);
  c.use_routing_bias = routing_bias(hf);
}

std::vector<LayerType> parse_hybrid_pattern(const std::string& pattern, const std::string& path) {
  std::vector<LayerType> types;
  for (size_t i = 0; i < pattern.size(); ++i) {
    switch (pattern[i]) {
      case 'M':
        types.push_back(LayerType::mamba);
        break;
      case '*':
        types.push_back(LayerType::full_attention);
        break;
      case '-':
        types.push_back(LayerType::mlp);
        break;
      case 'E':
        types.push_back(LayerType::moe);
        break;
      default:
        throw Error(path + "[" + std::to_string(i) + "] = '" + std::string(1, pattern[i]) +
                    "': expected M (Mamba-2), * (attention), - (MLP) or E (MoE)");
    }
  }
  return types;
}

void read_layer_pattern(const HfConfig& hf, ModelConfig& c) {
  const json* types = hf.find("layer_types");
  const json* pattern = hf.find("hybrid_override_pattern");
  if (types && pattern)
    throw Error("both layer_types and hybrid_override_pattern are given; give one");
  if (types) c.layer_types = read_layer_types(*types, hf.path("layer_types"));
  if (!pattern) return;
  const std::string path = hf.path("hybrid_override_pattern");
  c.layer_types = parse_hybrid_pattern(read_string(*pattern, path), path);
}

void read_norm_eps(const HfConfig& hf, ModelConfig& c) {
  const auto eps = resolve<double>(
      hf.candidates({"rms_norm_eps", "layer_norm_epsilon", "norm_eps"}), read_float);
  if (eps) c.rms_norm_eps = *eps;
}

// The places the multimodal-RoPE fields may be: rope_scaling / rope_parameters (an object),
// or the top level under their own names.
std::vector<Candidate> mrope_candidates(const HfConfig& hf, const char* field) {
  std::vector<Candidate> out = hf.candidates({field});
  for (const char* rope_key : {"rope_scaling", "rope_parameters"}) {
    const json* rope = hf.find(rope_key);
    if (rope == nullptr) continue;
    if (!rope->is_object()) bad_value(hf.path(rope_key), *rope, "an object");
    const auto it = rope->find(field);
    if (it != rope->end() && !it->is_null()) out.push_back({hf.path(rope_key) + "." + field, &*it});
  }
  return out;
}

void read_mrope(const HfConfig& hf, ModelConfig& c) {
  using Section = std::array<uint64_t, 3>;
  if (const auto s = resolve<Section>(mrope_candidates(hf, "mrope_section"), read_mrope_section))
    c.mrope_section = *s;
  if (const auto i = resolve<bool>(mrope_candidates(hf, "mrope_interleaved"), read_bool))
    c.mrope_interleaved = *i;
}

}  // namespace

ModelConfig config_from_hf_json(const json& root) {
  const HfConfig hf(root);
  require_keys(hf);
  ModelConfig c;
  read_same_name_fields(hf, c);
  read_attention(hf, c);
  read_moe(hf, c);
  read_layer_pattern(hf, c);
  read_norm_eps(hf, c);
  read_mrope(hf, c);
  return c;
}

}  // namespace bufferlab::config_json_detail
