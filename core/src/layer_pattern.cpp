// The layer pattern of a ModelConfig (docs/spec/buffers.md §1 "layer pattern", "which layers are
// MoE"): names of the layer kinds, and the mixer and FFN kind of each decoder layer.
#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "bufferlab/core/error.h"
#include "bufferlab/core/model_config.h"

namespace bufferlab {
namespace {

constexpr std::array<std::pair<LayerType, const char*>, 7> kLayerTypeNames{{
    {LayerType::full_attention, "full_attention"},
    {LayerType::sliding_attention, "sliding_attention"},
    {LayerType::linear_attention, "linear_attention"},
    {LayerType::mamba, "mamba"},
    {LayerType::mla, "mla"},
    {LayerType::mlp, "mlp"},
    {LayerType::moe, "moe"},
}};

std::string known_layer_type_names() {
  std::string names;
  for (const auto& [type, name] : kLayerTypeNames)
    names += names.empty() ? name : ", " + std::string(name);
  return names;
}

// A hybrid pattern (as from hybrid_override_pattern) has FFN-only layers and Mamba layers:
// each layer is either a mixer or an FFN, never both.
bool is_hybrid(const ModelConfig& c) {
  return std::any_of(c.layer_types.begin(), c.layer_types.end(), [](LayerType t) {
    return t == LayerType::mamba || t == LayerType::mlp || t == LayerType::moe;
  });
}

uint64_t layer_count(const ModelConfig& c) {
  return c.layer_types.empty() ? c.num_hidden_layers : c.layer_types.size();
}

// Without any layer count (a bare config built in code) the periodic rules apply to every
// index; otherwise an index past the last layer is a caller bug worth a clear message.
void check_layer_index(const ModelConfig& c, uint64_t layer) {
  const uint64_t n = layer_count(c);
  if (n == 0 || layer < n) return;
  throw Error("layer " + std::to_string(layer) + " is out of range: the model has " +
              std::to_string(n) + " layers");
}

bool has_gdn(const ModelConfig& c) { return c.linear_num_value_heads > 0; }

MixerKind attention_kind(const ModelConfig& c, MixerKind plain) {
  return c.kv_lora_rank > 0 ? MixerKind::mla : plain;
}

MixerKind mixer_of_type(const ModelConfig& c, LayerType t) {
  switch (t) {
    case LayerType::full_attention:
      return attention_kind(c, MixerKind::full);
    case LayerType::sliding_attention:
      return attention_kind(c, MixerKind::sliding);
    case LayerType::mla:
      return MixerKind::mla;
    case LayerType::linear_attention:
      return MixerKind::gdn;
    case LayerType::mamba:
      return MixerKind::mamba2;
    case LayerType::mlp:
    case LayerType::moe:
      return MixerKind::none;
  }
  return MixerKind::none;
}

// Qwen's decoder_sparse_step semantics plus DeepSeek's first_k_dense_replace.
bool moe_by_rule(const ModelConfig& c, uint64_t layer) {
  if (c.num_experts == 0 || layer < c.first_k_dense) return false;
  if (c.moe_layer_freq == 0 || (layer + 1) % c.moe_layer_freq != 0) return false;
  return std::find(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), layer) ==
         c.mlp_only_layers.end();
}

bool is_moe_layer(const ModelConfig& c, uint64_t layer) {
  if (is_hybrid(c)) return c.layer_types[layer] == LayerType::moe;
  return moe_by_rule(c, layer);
}

// Hash-routed layers are the first num_hash_layers MoE layers.
bool is_hash_layer(const ModelConfig& c, uint64_t layer) {
  if (c.num_hash_layers == 0) return false;
  uint64_t moe_before = 0;
  for (uint64_t j = 0; j < layer && moe_before < c.num_hash_layers; ++j)
    if (is_moe_layer(c, j)) ++moe_before;
  return moe_before < c.num_hash_layers;
}

FfnKind hybrid_ffn_kind(const ModelConfig& c, uint64_t layer) {
  switch (c.layer_types[layer]) {
    case LayerType::mlp:
      return FfnKind::dense;
    case LayerType::moe:
      return is_hash_layer(c, layer) ? FfnKind::hash_moe : FfnKind::moe;
    default:
      return FfnKind::none;
  }
}

}  // namespace

const char* to_string(LayerType t) {
  for (const auto& [type, name] : kLayerTypeNames)
    if (type == t) return name;
  return "unknown";
}

LayerType layer_type_from_string(const std::string& s) {
  for (const auto& [type, name] : kLayerTypeNames)
    if (s == name) return type;
  throw Error("unknown layer type \"" + s + "\" (known: " + known_layer_type_names() + ")");
}

const char* to_string(MixerKind k) {
  switch (k) {
    case MixerKind::full:
      return "full";
    case MixerKind::sliding:
      return "sliding";
    case MixerKind::mla:
      return "mla";
    case MixerKind::gdn:
      return "gdn";
    case MixerKind::mamba2:
      return "mamba2";
    case MixerKind::none:
      return "none";
  }
  return "unknown";
}

const char* to_string(FfnKind k) {
  switch (k) {
    case FfnKind::dense:
      return "dense";
    case FfnKind::moe:
      return "moe";
    case FfnKind::hash_moe:
      return "hash_moe";
    case FfnKind::none:
      return "none";
  }
  return "unknown";
}

MixerKind ModelConfig::mixer_kind(uint64_t layer) const {
  check_layer_index(*this, layer);
  if (!layer_types.empty()) return mixer_of_type(*this, layer_types[layer]);
  const bool full = full_attention_interval == 0 || (layer + 1) % full_attention_interval == 0;
  if (!full && has_gdn(*this)) return MixerKind::gdn;
  // Without layer_types a window W > 0 makes every attention layer sliding (the Mistral
  // convention, docs/spec/attention.md §1).
  return attention_kind(*this, sliding_window > 0 ? MixerKind::sliding : MixerKind::full);
}

FfnKind ModelConfig::ffn_kind(uint64_t layer) const {
  check_layer_index(*this, layer);
  if (is_hybrid(*this)) return hybrid_ffn_kind(*this, layer);
  if (!moe_by_rule(*this, layer)) return FfnKind::dense;
  return is_hash_layer(*this, layer) ? FfnKind::hash_moe : FfnKind::moe;
}

}  // namespace bufferlab
