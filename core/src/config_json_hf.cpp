// The Hugging Face config.json → ModelConfig mapping of docs/spec/buffers.md §1.1, recording
// for `config --explain` every key it read, every field it derived and every key it ignored.
//
// Choices beyond the table:
//   - every §1 field may also be given by its own name (hc_mult, index_topk, zero_expert_num,
//     ...); where the table lists spellings, all of them are read;
//   - two spellings of one field with different values (e.g. num_experts_per_tok = 4 and
//     experts_per_token = 2) are an Error rather than a silent pick — except the shared
//     expert's width, where §1.1 says the first present spelling wins;
//   - DeepSeek's `moe_layer_freq` (MoE iff i >= first_k_dense_replace and i % freq == 0)
//     differs from Qwen's decoder_sparse_step ((i+1) % step == 0): a value > 1 is expressed
//     exactly as moe_layer_freq = 1 plus the skipped layers in mlp_only_layers; both keys
//     at once (unless both are 1) is an Error;
//   - layer_types and hybrid_override_pattern together are an Error;
//   - a text_config key wins over the top-level key even when its value is null;
//   - a mechanism's sizing keys have no silent default (kMechanismKeys below): a MoE model
//     without a top-k key, an MLA model without v_head_dim, ... is an Error listing the
//     spellings the loader knows. The defaults §1.1 documents (head_dim, num_key_value_heads,
//     moe_intermediate_size, the shared expert's width) stay.
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
using Kind = ConfigKeyUse::Kind;

// One place a value may come from: the top-level key it sits under, its path for messages
// and the value (never null).
struct Candidate {
  std::string key;
  std::string path;
  const json* value;
};

// Why a key that looks like it could size something sets no field.
std::string why_ignored(const std::string& key) {
  static const std::vector<std::pair<const char*, const char*>> kKnown = {
      {"qk_head_dim", "MLA's q head is qk_nope_head_dim + qk_rope_head_dim (both read)"},
      {"model_type",
       "sets attn_gated (qwen3_next), qk_norm and attn_sinks only for the listed types"},
      {"rope_scaling", "none of the RoPE or MRoPE keys of docs/spec/attention.md §1 in it"},
      {"rope_parameters", "none of the RoPE or MRoPE keys of docs/spec/attention.md §1 in it"},
      {"use_sliding_window", "only false changes anything (sliding_window becomes 0)"},
      {"max_position_embeddings",
       "the run shape's max_seq_len is a command-line option (read only by yarn without "
       "original_max_position_embeddings)"},
  };
  for (const auto& [known, why] : kKnown)
    if (key == known) return why;
  return "not a key of docs/spec/buffers.md §1.1";
}

// The top-level object with text_config's keys laid over it, remembering which keys came
// from text_config so that messages name the key where the user wrote it, and recording what
// became of every key.
class HfConfig {
 public:
  explicit HfConfig(const json& root) : merged_(root) {
    const auto text = root.find("text_config");
    if (text == root.end() || text->is_null()) return;
    if (!text->is_object()) bad_value("text_config", *text, "an object");
    for (const auto& [key, value] : text->items()) {
      if (root.contains(key)) shadowed_.push_back(key);
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
      if (const json* v = find(key)) out.push_back({key, path(key), v});
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
  std::optional<std::string> string_of(const std::string& key) const {
    const json* v = find(key);
    return v ? std::optional(read_string(*v, path(key))) : std::nullopt;
  }

  // ---- the record of what became of each key ----

  void note_read(const Candidate& c, const std::string& field) {
    used_.insert(c.key);
    uses_.push_back({Kind::read, c.path, field, show(*c.value)});
  }
  void note_read(const std::string& key, const std::string& field) {
    if (const json* v = find(key)) note_read(Candidate{key, path(key), v}, field);
  }
  void note_derived(const std::string& field, const std::string& how) {
    uses_.push_back({Kind::derived, "", field, how});
  }
  void note_ignored(const std::string& key, const std::string& why) {
    used_.insert(key);
    uses_.push_back({Kind::ignored, path(key), "", why});
  }

  // The record, with every key nothing read listed as ignored.
  std::vector<ConfigKeyUse> uses() const {
    std::vector<ConfigKeyUse> out = uses_;
    for (const std::string& key : shadowed_)
      out.push_back({Kind::ignored, key, "", "text_config." + key + " takes precedence"});
    for (const auto& [key, value] : merged_.items()) {
      if (used_.count(key) != 0 || key == "text_config") continue;
      out.push_back({Kind::ignored, path(key), "", value.is_null() ? "null" : why_ignored(key)});
    }
    return out;
  }

 private:
  json merged_;
  std::set<std::string> from_text_config_;
  std::vector<std::string> shadowed_;  // top-level keys text_config overrides
  std::vector<ConfigKeyUse> uses_;
  std::set<std::string> used_;
};

// The value given by one or more spellings of `field`; an Error when two spellings disagree.
template <class T, class Read>
std::optional<T> resolve(HfConfig& hf, const std::string& field,
                         const std::vector<Candidate>& candidates, Read read) {
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
  for (const Candidate& c : candidates) hf.note_read(c, field);
  return result;
}

std::optional<uint64_t> uint_alias(HfConfig& hf, const std::string& field,
                                   std::initializer_list<const char*> keys) {
  return resolve<uint64_t>(hf, field, hf.candidates(keys), read_uint);
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
                                                 "router_groups",
                                                 "router_topk_groups",
                                                 "mrope_interleaved",
                                                 "rms_norm_eps",
                                                 "sliding_window",
                                                 "rope_original_max_position",
                                                 "rope_interleaved",
                                                 "rope_truncate",
                                                 "qk_norm",
                                                 "attn_sinks",
                                                 "rope_theta",
                                                 "partial_rotary_factor",
                                                 "rope_factor",
                                                 "rope_low_freq_factor",
                                                 "rope_high_freq_factor",
                                                 "rope_beta_fast",
                                                 "rope_beta_slow",
                                                 "rope_mscale",
                                                 "rope_mscale_all_dim",
                                                 "rope_attention_factor"};
  return kOwnRule.count(field) != 0;
}

template <class T, class Read>
void read_same_name(HfConfig& hf, const char* field, T& into, Read read) {
  if (has_own_rule(field)) return;
  if (const auto v = resolve<T>(hf, field, hf.candidates({field}), read)) into = *v;
}

void read_same_name_fields(HfConfig& hf, ModelConfig& c) {
#define BUFFERLAB_READ_INT(name, def) read_same_name(hf, #name, c.name, read_uint);
#define BUFFERLAB_READ_BOOL(name, def) read_same_name(hf, #name, c.name, read_bool);
#define BUFFERLAB_READ_FLOAT(name, def) read_same_name(hf, #name, c.name, read_float);
  BUFFERLAB_CONFIG_INT_FIELDS(BUFFERLAB_READ_INT)
  BUFFERLAB_CONFIG_BOOL_FIELDS(BUFFERLAB_READ_BOOL)
  BUFFERLAB_CONFIG_FLOAT_FIELDS(BUFFERLAB_READ_FLOAT)
#undef BUFFERLAB_READ_FLOAT
#undef BUFFERLAB_READ_BOOL
#undef BUFFERLAB_READ_INT
  read_same_name(hf, "scoring_func", c.scoring_func, read_string);
  read_same_name(hf, "mlp_only_layers", c.mlp_only_layers, read_uint_list);
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

void read_attention(HfConfig& hf, ModelConfig& c) {
  const uint64_t nq = c.num_attention_heads;
  if (const auto nkv = uint_alias(hf, "num_key_value_heads", {"num_key_value_heads"})) {
    c.num_key_value_heads = *nkv;
  } else {
    c.num_key_value_heads = nq;
    hf.note_derived("num_key_value_heads",
                    "= num_attention_heads = " + std::to_string(nq) + " (key absent)");
  }
  // An explicit head_dim is taken as given, MLA included (§1.1: GLM-5 gives 64 with nope +
  // rope = 256; the sizing, not the loader, must hold MLA's q_b output).
  if (const auto hd = uint_alias(hf, "head_dim", {"head_dim", "attention_head_dim"})) {
    c.head_dim = *hd;
  } else if (c.kv_lora_rank > 0) {
    c.head_dim = mla_head_dim(hf, c);
    hf.note_derived("head_dim", "= qk_nope_head_dim + qk_rope_head_dim = " +
                                    std::to_string(c.head_dim) + " (MLA, key absent)");
  } else {
    c.head_dim = nq > 0 ? c.hidden_size / nq : 0;  // validate() reports nq = 0
    hf.note_derived("head_dim", "= hidden_size / num_attention_heads = " +
                                    std::to_string(c.head_dim) + " (key absent)");
  }
  if (const auto gated = resolve<bool>(
          hf, "attn_gated", hf.candidates({"attn_output_gate", "attn_gated"}), read_bool))
    c.attn_gated = *gated;
  else if (hf.string_of("model_type") == "qwen3_next") {
    c.attn_gated = true;
    hf.note_read("model_type", "attn_gated");
    hf.note_derived("attn_gated", "= true (model_type qwen3_next without attn_output_gate)");
  }
}

// §1.1: the first present explicit width wins; else n_shared_experts × moe_intermediate_size.
void read_shared_expert(HfConfig& hf, ModelConfig& c) {
  const char* kField = "shared_expert_intermediate_size";
  const auto widths =
      hf.candidates({"shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"});
  if (!widths.empty()) {
    c.shared_expert_intermediate_size = read_uint(*widths.front().value, widths.front().path);
    hf.note_read(widths.front(), kField);
    for (size_t i = 1; i < widths.size(); ++i)
      hf.note_ignored(widths[i].key, widths.front().path + " is the first present width");
    if (hf.find("n_shared_experts") != nullptr)
      hf.note_ignored("n_shared_experts",
                      "an explicit shared-expert width wins (" + widths.front().path + ")");
    return;
  }
  const auto count = hf.uint_of("n_shared_experts");
  if (!count) return;
  uint64_t product = 0;
  if (__builtin_mul_overflow(*count, c.moe_intermediate_size, &product))
    throw Error(hf.path("n_shared_experts") + " = " + std::to_string(*count) +
                " times moe_intermediate_size = " + std::to_string(c.moe_intermediate_size) +
                " overflows 64 bits");
  c.shared_expert_intermediate_size = product;
  hf.note_read("n_shared_experts", kField);
  hf.note_derived(kField,
                  "= n_shared_experts × moe_intermediate_size = " + std::to_string(product));
}

// decoder_sparse_step (Qwen) maps directly; DeepSeek's moe_layer_freq has another rule.
void read_moe_layer_freq(HfConfig& hf, ModelConfig& c) {
  const auto step = hf.uint_of("decoder_sparse_step");
  const auto freq = hf.uint_of("moe_layer_freq");
  if (step && freq && !(*step == 1 && *freq == 1))
    throw Error(hf.path("decoder_sparse_step") + " = " + std::to_string(*step) + " and " +
                hf.path("moe_layer_freq") + " = " + std::to_string(*freq) +
                " are both given and their layer rules differ");
  if (step) {
    c.moe_layer_freq = *step;
    hf.note_read("decoder_sparse_step", "moe_layer_freq");
    if (freq) hf.note_read("moe_layer_freq", "moe_layer_freq");
    return;
  }
  hf.note_read("moe_layer_freq", "moe_layer_freq");
  if (!freq || *freq <= 1) {
    c.moe_layer_freq = freq.value_or(1);  // 0 is left for validate() to report
    return;
  }
  for (uint64_t i = c.first_k_dense; i < c.num_hidden_layers; ++i)
    if (i % *freq != 0) c.mlp_only_layers.push_back(i);
  std::set<uint64_t> unique(c.mlp_only_layers.begin(), c.mlp_only_layers.end());
  c.mlp_only_layers.assign(unique.begin(), unique.end());
  c.moe_layer_freq = 1;
  hf.note_derived("moe_layer_freq", "= 1 (DeepSeek's moe_layer_freq = " + std::to_string(*freq) +
                                        " becomes dense layers)");
  hf.note_derived("mlp_only_layers",
                  "+= the layers i >= first_k_dense with i % " + std::to_string(*freq) + " != 0");
}

void read_routing_bias(HfConfig& hf, ModelConfig& c) {
  const char* kField = "use_routing_bias";
  hf.note_read("topk_method", kField);
  hf.note_read("e_score_correction_bias", kField);
  if (hf.string_of("topk_method") == "noaux_tc" || hf.find("e_score_correction_bias") != nullptr) {
    c.use_routing_bias = true;
    hf.note_derived(kField, "= true (topk_method noaux_tc or an e_score_correction_bias)");
    return;
  }
  if (const auto b = resolve<bool>(hf, kField, hf.candidates({kField}), read_bool))
    c.use_routing_bias = *b;
}

// Router groups (docs/spec/numerics.md §2, docs/spec/buffers.md §1.1): DeepSeek's n_group /
// topk_group apply only under topk_method noaux_tc (greedy ignores them); DeepSeek-V2's
// group_limited_greedy ranks groups by their best softmax score, a different rule, and is refused
// by name rather than run as noaux_tc. The fields' own names apply whatever the method. No silent
// default for topk_group: transformers assumes 4 when the key is absent, we refuse.
void read_router_groups(HfConfig& hf, ModelConfig& c) {
  const std::optional<std::string> method = hf.string_of("topk_method");
  if (method == "group_limited_greedy")
    throw Error(hf.path("topk_method") +
                " = \"group_limited_greedy\" (DeepSeek-V2: groups ranked by their best softmax "
                "score) is not supported: docs/spec/numerics.md §2 defines noaux_tc groups only");
  if (method && *method != "noaux_tc" && *method != "greedy")
    throw Error(hf.path("topk_method") + " = \"" + *method +
                "\" is not one of noaux_tc, greedy (group_limited_greedy is refused)");
  hf.note_read("topk_method", "router_groups");
  const bool grouped = method == "noaux_tc";
  if (!grouped)
    for (const char* key : {"n_group", "topk_group"})
      if (hf.find(key) != nullptr)
        hf.note_ignored(key, method ? "topk_method = \"greedy\" ignores router groups"
                                    : "router groups apply only with topk_method noaux_tc");
  const auto groups = grouped ? uint_alias(hf, "router_groups", {"router_groups", "n_group"})
                              : uint_alias(hf, "router_groups", {"router_groups"});
  const auto kept = grouped
                        ? uint_alias(hf, "router_topk_groups", {"router_topk_groups", "topk_group"})
                        : uint_alias(hf, "router_topk_groups", {"router_topk_groups"});
  if (groups) c.router_groups = *groups;
  if (kept) c.router_topk_groups = *kept;
  if (groups && *groups > 1 && !kept)
    throw Error(hf.path(hf.find("n_group") != nullptr ? "n_group" : "router_groups") + " = " +
                std::to_string(*groups) +
                " without topk_group: how many groups are kept has no default");
}

void read_moe(HfConfig& hf, ModelConfig& c) {
  c.num_experts =
      uint_alias(hf, "num_experts", {"num_experts", "n_routed_experts", "num_local_experts"})
          .value_or(0);
  // A MoE model without a top-k key is refused by require_mechanism_keys (no silent 1).
  if (const auto k = uint_alias(hf, "num_experts_per_tok",
                                {"num_experts_per_tok", "moe_topk", "experts_per_token"}))
    c.num_experts_per_tok = *k;
  if (const auto w = uint_alias(hf, "moe_intermediate_size",
                                {"moe_intermediate_size", "expert_ffn_hidden_size"}))
    c.moe_intermediate_size = *w;
  else if (c.num_experts > 0) {
    c.moe_intermediate_size = c.intermediate_size;
    hf.note_derived("moe_intermediate_size",
                    "= intermediate_size = " + std::to_string(c.intermediate_size) +
                        " (MoE model, key absent)");
  }
  read_shared_expert(hf, c);
  if (const auto k = uint_alias(hf, "first_k_dense", {"first_k_dense_replace", "first_k_dense"}))
    c.first_k_dense = *k;
  read_moe_layer_freq(hf, c);
  read_routing_bias(hf, c);
  read_router_groups(hf, c);
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

void read_layer_pattern(HfConfig& hf, ModelConfig& c) {
  const json* types = hf.find("layer_types");
  const json* pattern = hf.find("hybrid_override_pattern");
  if (types && pattern)
    throw Error("both layer_types and hybrid_override_pattern are given; give one");
  if (types) {
    c.layer_types = read_layer_types(*types, hf.path("layer_types"));
    hf.note_read("layer_types", "layer_types");
  }
  if (!pattern) return;
  const std::string path = hf.path("hybrid_override_pattern");
  c.layer_types = parse_hybrid_pattern(read_string(*pattern, path), path);
  hf.note_read("hybrid_override_pattern", "layer_types");
}

void read_norm_eps(HfConfig& hf, ModelConfig& c) {
  const auto eps = resolve<double>(
      hf, "rms_norm_eps", hf.candidates({"rms_norm_eps", "layer_norm_epsilon", "norm_eps"}),
      read_float);
  if (eps) c.rms_norm_eps = *eps;
}

// The places a RoPE or MRoPE field may be: the top level under `top_key` (its own name, or
// the Hugging Face key where that is top-level), then `rope_key` inside rope_scaling and
// rope_parameters (objects; null = absent). Both objects are read: a value given twice must
// agree (resolve()).
std::vector<Candidate> rope_candidates(const HfConfig& hf, const char* top_key,
                                       const char* rope_key) {
  std::vector<Candidate> out = hf.candidates({top_key});
  for (const char* object_key : {"rope_scaling", "rope_parameters"}) {
    const json* rope = hf.find(object_key);
    if (rope == nullptr) continue;
    if (!rope->is_object()) bad_value(hf.path(object_key), *rope, "an object");
    const auto it = rope->find(rope_key);
    if (it != rope->end() && !it->is_null())
      out.push_back({object_key, hf.path(object_key) + "." + rope_key, &*it});
  }
  return out;
}

std::vector<Candidate> mrope_candidates(const HfConfig& hf, const char* field) {
  return rope_candidates(hf, field, field);
}

void read_mrope(HfConfig& hf, ModelConfig& c) {
  using Section = std::array<uint64_t, 3>;
  if (const auto s = resolve<Section>(hf, "mrope_section", mrope_candidates(hf, "mrope_section"),
                                      read_mrope_section))
    c.mrope_section = *s;
  if (const auto i = resolve<bool>(hf, "mrope_interleaved",
                                   mrope_candidates(hf, "mrope_interleaved"), read_bool))
    c.mrope_interleaved = *i;
}

// ---- attention (docs/spec/attention.md §1) ----

// The model types whose transformers modeling code applies a per-head RMSNorm to Q and K
// (q_norm / k_norm over head_dim) before RoPE, as read in transformers' modeling files:
// Qwen3Attention (qwen3), Qwen3MoeAttention (qwen3_moe), Qwen3NextAttention (qwen3_next),
// Qwen3VLTextAttention (qwen3_vl, its text config qwen3_vl_text; a subclass of
// Qwen3Attention) and Qwen3VLMoeTextAttention (qwen3_vl_moe, qwen3_vl_moe_text; a subclass of
// Qwen3VLTextAttention). Not listed: olmo2 (its norm spans all heads, not one head), the
// DeepSeek / GLM MLA types (q_a_layernorm is a norm of the latent) and types not checked.
const std::set<std::string>& qk_norm_model_types() {
  static const std::set<std::string> types = {
      "qwen3",         "qwen3_moe",    "qwen3_next",       "qwen3_vl",
      "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text"};
  return types;
}

// transformers' NemotronHConfig has no RoPE parameters: its attention layers use no position
// embedding, although NVIDIA-Nemotron-3-Nano's config.json has rope_theta and
// partial_rotary_factor (docs/findings.md). Those keys are ignored, not read.
bool has_no_rope(const HfConfig& hf) { return hf.string_of("model_type") == "nemotron_h"; }

constexpr const char* kRopeTypes =
    "docs/spec/attention.md §1 knows default, linear, llama3, yarn, and mrope (the default type "
    "with the MRoPE sections)";

// rope_type from rope_type or the legacy `type`, in rope_scaling / rope_parameters (or the
// top level by its own name). mrope (Qwen2-VL, Qwen2.5-VL) is the default type with the MRoPE
// sections; transformers' older configs carry both "type": "mrope" and "rope_type": "default",
// so spellings are compared after that mapping. Any other type is an Error naming it.
void read_rope_type(HfConfig& hf, ModelConfig& c) {
  std::vector<Candidate> candidates = rope_candidates(hf, "rope_type", "rope_type");
  for (Candidate& legacy : rope_candidates(hf, "rope_type", "type"))
    if (legacy.key != "rope_type") candidates.push_back(legacy);  // the top level is in already
  std::optional<std::string> type;
  const Candidate* first = nullptr;
  bool mrope = false;
  for (const Candidate& cand : candidates) {
    const std::string name = read_string(*cand.value, cand.path);
    if (name != "default" && name != "linear" && name != "llama3" && name != "yarn" &&
        name != "mrope")
      throw Error(cand.path + " = \"" + name + "\": RoPE type not supported; " + kRopeTypes);
    mrope = mrope || name == "mrope";
    const std::string mapped = name == "mrope" ? "default" : name;
    if (type && *type != mapped)
      throw Error("conflicting values: " + first->path + " = " + show(*first->value) + " but " +
                  cand.path + " = " + show(*cand.value));
    if (!type) type = mapped, first = &cand;
  }
  for (const Candidate& cand : candidates) hf.note_read(cand, "rope_type");
  if (!type) return;
  c.rope_type = *type;
  if (!mrope) return;
  hf.note_derived("rope_type", "= default (mrope: the default type with the MRoPE sections)");
  if (c.mrope_section == std::array<uint64_t, 3>{0, 0, 0})
    throw Error(first->path + " = \"mrope\" without mrope_section (the MRoPE sections)");
}

template <class T, class Read>
void read_rope_field(HfConfig& hf, const char* field, const char* top_key, const char* rope_key,
                     T& into, Read read) {
  if (const auto v = resolve<T>(hf, field, rope_candidates(hf, top_key, rope_key), read)) into = *v;
}

// The RoPE base, partial rotary factor, type and scaling parameters, and the pair layout.
// rope_theta and partial_rotary_factor are top-level keys (transformers 4) or keys of
// rope_parameters (transformers 5); the scaling parameters sit in rope_scaling or
// rope_parameters under their Hugging Face names, or at the top level under the field's own
// name. Every parameter present is read whatever the type (the type's formula uses its own).
void read_rope(HfConfig& hf, ModelConfig& c) {
  if (has_no_rope(hf)) {
    for (const char* key :
         {"rope_theta", "partial_rotary_factor", "rope_scaling", "rope_parameters"})
      if (hf.find(key) != nullptr)
        hf.note_ignored(key,
                        "model_type nemotron_h: its attention has no RoPE "
                        "(transformers' NemotronHConfig carries no RoPE parameters)");
    return;
  }
  read_rope_field(hf, "rope_theta", "rope_theta", "rope_theta", c.rope_theta, read_float);
  read_rope_field(hf, "partial_rotary_factor", "partial_rotary_factor", "partial_rotary_factor",
                  c.partial_rotary_factor, read_float);
  read_rope_type(hf, c);
  read_rope_field(hf, "rope_factor", "rope_factor", "factor", c.rope_factor, read_float);
  read_rope_field(hf, "rope_low_freq_factor", "rope_low_freq_factor", "low_freq_factor",
                  c.rope_low_freq_factor, read_float);
  read_rope_field(hf, "rope_high_freq_factor", "rope_high_freq_factor", "high_freq_factor",
                  c.rope_high_freq_factor, read_float);
  read_rope_field(hf, "rope_original_max_position", "rope_original_max_position",
                  "original_max_position_embeddings", c.rope_original_max_position, read_uint);
  read_rope_field(hf, "rope_beta_fast", "rope_beta_fast", "beta_fast", c.rope_beta_fast,
                  read_float);
  read_rope_field(hf, "rope_beta_slow", "rope_beta_slow", "beta_slow", c.rope_beta_slow,
                  read_float);
  read_rope_field(hf, "rope_mscale", "rope_mscale", "mscale", c.rope_mscale, read_float);
  read_rope_field(hf, "rope_mscale_all_dim", "rope_mscale_all_dim", "mscale_all_dim",
                  c.rope_mscale_all_dim, read_float);
  read_rope_field(hf, "rope_attention_factor", "rope_attention_factor", "attention_factor",
                  c.rope_attention_factor, read_float);
  read_rope_field(hf, "rope_truncate", "rope_truncate", "truncate", c.rope_truncate, read_bool);
  // transformers' yarn falls back to max_position_embeddings for the original context.
  if (c.rope_type == "yarn" && c.rope_original_max_position == 0)
    if (const auto max_pos = hf.uint_of("max_position_embeddings")) {
      c.rope_original_max_position = *max_pos;
      hf.note_read("max_position_embeddings", "rope_original_max_position");
      hf.note_derived("rope_original_max_position",
                      "= max_position_embeddings = " + std::to_string(*max_pos) +
                          " (yarn without original_max_position_embeddings)");
    }
  if (const auto i =
          resolve<bool>(hf, "rope_interleaved",
                        hf.candidates({"rope_interleave", "rope_interleaved"}), read_bool))
    c.rope_interleaved = *i;
}

// A flag given by its own name, else true for the listed model types.
bool flag_by_model_type(HfConfig& hf, const char* field, const std::set<std::string>& types) {
  if (const auto v = resolve<bool>(hf, field, hf.candidates({field}), read_bool)) return *v;
  const std::optional<std::string> type = hf.string_of("model_type");
  if (!type || types.count(*type) == 0) return false;
  hf.note_read("model_type", field);
  hf.note_derived(field, "= true (model_type " + *type + ")");
  return true;
}

// sliding_window (null = 0). Qwen2-style configs give a window and switch it off with
// use_sliding_window = false (transformers then keeps no window): W = 0. Qwen2's other rule —
// with use_sliding_window, only layers from max_window_layers on slide — is refused unless
// layer_types says which layers slide. Without layer_types a window W > 0 makes every
// attention layer sliding (the Mistral convention; ModelConfig::mixer_kind).
void read_sliding_window(HfConfig& hf, ModelConfig& c) {
  const auto w = uint_alias(hf, "sliding_window", {"sliding_window"});
  const std::optional<bool> use = hf.bool_of("use_sliding_window");
  if (use) hf.note_read("use_sliding_window", "sliding_window");
  if (!w) return;
  if (use == false) {
    hf.note_derived("sliding_window", "= 0 (use_sliding_window = false)");
    return;
  }
  const auto max_window = hf.uint_of("max_window_layers");
  if (use == true && max_window && *max_window < c.num_hidden_layers && c.layer_types.empty())
    throw Error(hf.path("use_sliding_window") + " = true with " + hf.path("max_window_layers") +
                " = " + std::to_string(*max_window) +
                ": only the layers from max_window_layers on slide; give layer_types");
  c.sliding_window = *w;
}

// qk_norm and attn_sinks by model type (or their own names), the sliding window.
void read_attention_kinds(HfConfig& hf, ModelConfig& c) {
  c.qk_norm = flag_by_model_type(hf, "qk_norm", qk_norm_model_types());
  static const std::set<std::string> kSinkTypes = {"gpt_oss"};
  c.attn_sinks = flag_by_model_type(hf, "attn_sinks", kSinkTypes);
  read_sliding_window(hf, c);
}

// ---- keys without a silent default ----

// A key some buffer's size depends on, given under any of `spellings`.
struct SizingKey {
  const char* field;
  std::vector<const char*> spellings;
};

// The keys a mechanism needs once the config has it: a default would size its buffers for
// a model the file does not describe (a top-k of 1 undersizes every expert buffer; n_groups 0
// shrinks Mamba-2's xBC; a missing full_attention_interval makes every GDN layer attention).
struct Mechanism {
  const char* name;
  const char* trigger;  // the field whose value > 0 means the model has the mechanism
  std::vector<SizingKey> keys;
};

const std::vector<Mechanism>& mechanisms() {
  static const std::vector<Mechanism> list = {
      {"MoE",
       "num_experts",
       {{"num_experts_per_tok", {"num_experts_per_tok", "moe_topk", "experts_per_token"}}}},
      {"Mamba-2",
       "mamba_num_heads",
       {{"mamba_head_dim", {"mamba_head_dim"}},
        {"ssm_state_size", {"ssm_state_size"}},
        {"n_groups", {"n_groups"}},
        {"conv_kernel", {"conv_kernel"}}}},
      {"GDN (linear attention)",
       "linear_num_value_heads",
       {{"linear_conv_kernel_dim", {"linear_conv_kernel_dim"}},
        {"the layer pattern",
         {"full_attention_interval", "layer_types", "hybrid_override_pattern"}}}},
      {"MLA",
       "kv_lora_rank",
       {{"qk_nope_head_dim", {"qk_nope_head_dim"}},
        {"qk_rope_head_dim", {"qk_rope_head_dim"}},
        {"v_head_dim", {"v_head_dim"}}}},
      {"sparse-attention indexer",
       "index_n_heads",
       {{"index_head_dim", {"index_head_dim"}}, {"index_topk", {"index_topk"}}}},
      {"grouped O projection", "o_groups", {{"o_lora_rank", {"o_lora_rank"}}}},
  };
  return list;
}

uint64_t trigger_value(const ModelConfig& c, const std::string& trigger) {
#define BUFFERLAB_TRIGGER(name, def) \
  if (trigger == #name) return c.name;
  BUFFERLAB_CONFIG_INT_FIELDS(BUFFERLAB_TRIGGER)
#undef BUFFERLAB_TRIGGER
  throw Error("internal: unknown trigger field " + trigger);
}

}  // namespace

void require_mechanism_keys(const ModelConfig& c,
                            const std::function<bool(const std::string&)>& given_key) {
  for (const Mechanism& m : mechanisms()) {
    const uint64_t trigger = trigger_value(c, m.trigger);
    if (trigger == 0) continue;
    for (const SizingKey& k : m.keys) {
      bool given = false;
      for (const char* spelling : k.spellings) given = given || given_key(spelling);
      if (given) continue;
      std::string known;
      for (const char* spelling : k.spellings)
        known += (known.empty() ? "" : ", ") + std::string(spelling);
      throw Error(std::string(m.trigger) + " = " + std::to_string(trigger) + " makes this a " +
                  m.name + " model, but " + k.field + " is not given (known spellings: " + known +
                  "); it sizes buffers, so there is no default");
    }
  }
}

ModelConfig config_from_hf_json(const json& root, std::vector<ConfigKeyUse>& uses) {
  HfConfig hf(root);
  require_keys(hf);
  ModelConfig c;
  read_same_name_fields(hf, c);
  read_attention(hf, c);
  read_moe(hf, c);
  read_layer_pattern(hf, c);
  read_norm_eps(hf, c);
  read_mrope(hf, c);
  read_rope(hf, c);
  read_attention_kinds(hf, c);
  require_mechanism_keys(c, [&](const std::string& key) { return hf.find(key) != nullptr; });
  uses = hf.uses();
  return c;
}

}  // namespace bufferlab::config_json_detail
