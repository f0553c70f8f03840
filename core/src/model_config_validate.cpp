// ModelConfig::validate(): every rule of docs/spec/buffers.md §1 plus the sanity rules for the
// float fields and the layer lists. Each rejection is a bufferlab::Error naming the field and
// its value, e.g. "num_experts_per_tok = 12 exceeds num_experts = 8".
//
// Beyond the spec's list (all are configs no kernel could run):
//   - rms_norm_eps, hc_eps: NaN, negative or infinite are rejected (0 is accepted);
//   - swiglu_limit: NaN or negative rejected; 0 and +Infinity both mean "no clamp";
//   - routed_scaling_factor: NaN, infinite, zero or negative rejected;
//   - moe_layer_freq = 0 (the MoE layer rule divides by it);
//   - GDN: one head count without the other (nk > 0 with nv = 0), linear_conv_kernel_dim = 0;
//   - Mamba-2: conv_kernel = 0 with mamba_num_heads > 0;
//   - layer_types: length ≠ num_hidden_layers (when both are given), a linear_attention /
//     mamba / mla / moe entry without the fields that layer kind needs;
//   - mlp_only_layers: an index ≥ the number of layers.
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>

#include "bufferlab/core/error.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/rope.h"

namespace bufferlab {
namespace {

[[noreturn]] void reject(const std::string& message) { throw Error(message); }

std::string field_text(const char* name, uint64_t value) {
  return std::string(name) + " = " + std::to_string(value);
}

std::string float_text(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  return std::string(buf, result.ptr);
}

std::string field_text(const char* name, double value) {
  return std::string(name) + " = " + float_text(value);
}

void require_positive(const char* name, uint64_t value, const char* why) {
  if (value == 0) reject(field_text(name, value) + ": " + why);
}

void require_multiple(const char* name, uint64_t value, const char* divisor_name,
                      uint64_t divisor) {
  if (value % divisor != 0)
    reject(field_text(name, value) + " is not a multiple of " + field_text(divisor_name, divisor));
}

void check_core_dimensions(const ModelConfig& c) {
  require_positive("hidden_size", c.hidden_size, "the residual stream must be non-empty");
  require_positive("vocab_size", c.vocab_size, "the LM head must have rows");
}

// Every model in scope has attention layers and the engine allocates the attention buffers
// unconditionally, so nq·hd and nkv must be non-zero.
void check_attention(const ModelConfig& c) {
  const char* why = "every model has attention layers (num_attention_heads · head_dim > 0)";
  require_positive("num_attention_heads", c.num_attention_heads, why);
  require_positive("head_dim", c.head_dim, why);
  require_positive("num_key_value_heads", c.num_key_value_heads,
                   "every model has attention layers");
  require_multiple("num_attention_heads", c.num_attention_heads, "num_key_value_heads",
                   c.num_key_value_heads);
  require_positive("full_attention_interval", c.full_attention_interval,
                   "layer i is full attention iff (i+1) % interval == 0");
  if (c.o_groups > 0)
    require_multiple("num_attention_heads", c.num_attention_heads, "o_groups", c.o_groups);
}

// Group-limited routing (docs/spec/numerics.md §2): the E routed experts split into G equal
// consecutive groups of at least two (a group's score is its two best choice scores), the g kept
// groups must hold top_k experts, and zero experts (ids past E) belong to no group.
void check_router_groups(const ModelConfig& c) {
  const uint64_t G = c.router_groups, g = c.router_topk_groups, E = c.num_experts;
  if (G <= 1) return;  // 0 or 1 group: no grouping (router_topk_groups then has no effect)
  require_positive("router_topk_groups", g, "at least one group is kept");
  if (E % G != 0)
    reject(field_text("router_groups", G) + " does not divide " + field_text("num_experts", E) +
           ": groups are equal and consecutive");
  if (E / G < 2)
    reject(field_text("router_groups", G) + " with " + field_text("num_experts", E) +
           " leaves fewer than 2 experts per group (a group scores its two best)");
  if (g > G)
    reject(field_text("router_topk_groups", g) + " exceeds " + field_text("router_groups", G));
  if (c.num_experts_per_tok > g * (E / G))
    reject(field_text("num_experts_per_tok", c.num_experts_per_tok) + " exceeds the " +
           std::to_string(g * (E / G)) + " experts of the kept groups (" +
           field_text("router_topk_groups", g) + " of " + std::to_string(E / G) + " experts)");
  if (c.zero_expert_num > 0)
    reject(field_text("zero_expert_num", c.zero_expert_num) + " with " +
           field_text("router_groups", G) + ": zero experts belong to no router group");
}

void check_moe(const ModelConfig& c) {
  if (c.num_experts == 0) {
    if (c.router_groups > 1)
      reject(field_text("router_groups", c.router_groups) +
             " on a dense model (num_experts = 0): router groups need routed experts");
    if (c.intermediate_size == 0)
      reject(field_text("intermediate_size", c.intermediate_size) +
             " on a dense model (num_experts = 0): the FFN must have a width");
    return;
  }
  if (c.moe_intermediate_size == 0 && c.intermediate_size == 0)
    reject(field_text("moe_intermediate_size", c.moe_intermediate_size) + " and " +
           field_text("intermediate_size", c.intermediate_size) + " with " +
           field_text("num_experts", c.num_experts) + ": the experts must have a width");
  if (c.num_experts_per_tok == 0)
    reject(field_text("num_experts_per_tok", c.num_experts_per_tok) + " with " +
           field_text("num_experts", c.num_experts) + ": a MoE layer selects at least one expert");
  if (c.num_experts_per_tok > c.num_experts)
    reject(field_text("num_experts_per_tok", c.num_experts_per_tok) + " exceeds " +
           field_text("num_experts", c.num_experts));
  require_positive("moe_layer_freq", c.moe_layer_freq, "layer i is MoE iff (i+1) % freq == 0");
  check_router_groups(c);
}

// A head count and its head dim come together: one without the other is a half-set field.
void require_pair(const char* count_name, uint64_t count, const char* dim_name, uint64_t dim) {
  if (count > 0 && dim == 0)
    reject(field_text(dim_name, dim) + " with " + field_text(count_name, count));
  if (dim > 0 && count == 0)
    reject(field_text(count_name, count) + " with " + field_text(dim_name, dim));
}

void check_gdn(const ModelConfig& c) {
  const uint64_t nk = c.linear_num_key_heads, nv = c.linear_num_value_heads;
  require_pair("linear_num_key_heads", nk, "linear_key_head_dim", c.linear_key_head_dim);
  require_pair("linear_num_value_heads", nv, "linear_value_head_dim", c.linear_value_head_dim);
  if (nv > 0 && nk == 0)
    reject(field_text("linear_num_key_heads", nk) + " with " +
           field_text("linear_num_value_heads", nv) + ": GDN needs both head counts");
  if (nk > 0 && nv == 0)
    reject(field_text("linear_num_value_heads", nv) + " with " +
           field_text("linear_num_key_heads", nk) + ": GDN needs both head counts");
  if (nk == 0) return;
  require_multiple("linear_num_value_heads", nv, "linear_num_key_heads", nk);
  require_positive("linear_conv_kernel_dim", c.linear_conv_kernel_dim,
                   "GDN layers run a causal convolution");
}

void check_mamba(const ModelConfig& c) {
  const uint64_t groups = c.n_groups > 0 ? c.n_groups : 1;
  if (c.mamba_num_heads % groups != 0)
    reject(field_text("mamba_num_heads", c.mamba_num_heads) + " is not a multiple of " +
           field_text("n_groups", c.n_groups));
  if (c.mamba_num_heads > 0)
    require_positive("conv_kernel", c.conv_kernel, "Mamba-2 layers run a causal convolution");
}

void check_mhc(const ModelConfig& c) {
  if (c.hc_lowrank > 0 && c.hc_mult == 0)
    reject(field_text("hc_lowrank", c.hc_lowrank) + " with " + field_text("hc_mult", c.hc_mult) +
           ": the low-rank form needs hyper-connection streams");
  if (c.hc_mult > 0 && c.hc_sinkhorn_iters == 0)
    reject(field_text("hc_sinkhorn_iters", c.hc_sinkhorn_iters) + " with " +
           field_text("hc_mult", c.hc_mult) + ": Sinkhorn needs at least one iteration");
}

void check_indexer(const ModelConfig& c) {
  if (c.index_compress_ratio == 0) return;
  require_multiple("index_topk", c.index_topk, "index_compress_ratio", c.index_compress_ratio);
}

void check_scoring_func(const ModelConfig& c) {
  const std::string& f = c.scoring_func;
  if (f == "softmax" || f == "sigmoid" || f == "sqrtsoftplus") return;
  reject("scoring_func = \"" + f + "\" is not one of softmax, sigmoid, sqrtsoftplus");
}

void require_eps(const char* name, double v) {
  if (std::isnan(v) || v < 0 || std::isinf(v))
    reject(field_text(name, v) + ": an epsilon must be a finite number >= 0");
}

void check_floats(const ModelConfig& c) {
  require_eps("rms_norm_eps", c.rms_norm_eps);
  require_eps("hc_eps", c.hc_eps);
  if (std::isnan(c.swiglu_limit) || c.swiglu_limit < 0)
    reject(field_text("swiglu_limit", c.swiglu_limit) +
           ": must be >= 0 (0 or Infinity = no clamp)");
  const double s = c.routed_scaling_factor;
  if (std::isnan(s) || std::isinf(s) || s <= 0)
    reject(field_text("routed_scaling_factor", s) + ": must be a finite number > 0");
}

// The fields each explicit layer kind needs (a layer the buffers were not sized for).
void check_layer_type_fields(const ModelConfig& c, uint64_t i) {
  const LayerType t = c.layer_types[i];
  const std::string where = "layer_types[" + std::to_string(i) + "] = " + to_string(t);
  if (t == LayerType::linear_attention && c.linear_num_value_heads == 0)
    reject(where + " but linear_num_value_heads = 0 (no GDN fields)");
  if (t == LayerType::mamba && c.mamba_num_heads == 0)
    reject(where + " but mamba_num_heads = 0 (no Mamba-2 fields)");
  if (t == LayerType::mla && c.kv_lora_rank == 0) reject(where + " but kv_lora_rank = 0");
  if (t == LayerType::moe && c.num_experts == 0) reject(where + " but num_experts = 0");
}

void check_layer_lists(const ModelConfig& c) {
  const uint64_t n_types = c.layer_types.size();
  if (n_types > 0 && c.num_hidden_layers > 0 && n_types != c.num_hidden_layers)
    reject("layer_types has " + std::to_string(n_types) + " entries but " +
           field_text("num_hidden_layers", c.num_hidden_layers));
  for (uint64_t i = 0; i < n_types; ++i) check_layer_type_fields(c, i);
  const uint64_t n_layers = c.num_hidden_layers > 0 ? c.num_hidden_layers : n_types;
  for (uint64_t layer : c.mlp_only_layers)
    if (layer >= n_layers)
      reject("mlp_only_layers contains layer " + std::to_string(layer) + " but the model has " +
             std::to_string(n_layers) +
             " layers (num_hidden_layers = " + std::to_string(c.num_hidden_layers) + ")");
}

using Inputs = std::initializer_list<std::pair<const char*, uint64_t>>;

// Evaluates one derived quantity with checked arithmetic; an overflow becomes an Error that
// names the quantity and the fields it is computed from.
template <class Formula>
void check_quantity(const char* name, Inputs inputs, Formula&& formula) {
  try {
    formula();
  } catch (const OverflowError& e) {
    std::string values;
    for (const auto& [field_name, value] : inputs)
      values += (values.empty() ? "" : ", ") + field_text(field_name, value);
    reject(std::string(name) + " overflows 64 bits with " + values + " (" + e.what() + ")");
  }
}

// Every per-token width the buffers are built from, so that an overflow is reported here
// with the quantity's name rather than later as a wrong size.
void check_derived_sizes(const ModelConfig& c) {
  const uint64_t nq = c.num_attention_heads, hd = c.head_dim;
  const uint64_t nk = c.linear_num_key_heads, kd = c.linear_key_head_dim;
  const uint64_t nv = c.linear_num_value_heads, vd = c.linear_value_head_dim;
  const uint64_t mh = c.mamba_num_heads, mhd = c.mamba_head_dim;
  check_quantity("num_attention_heads * head_dim", {{"num_attention_heads", nq}, {"head_dim", hd}},
                 [&] { return Size(nq) * hd; });
  check_quantity("qkv_dim",
                 {{"num_attention_heads", nq},
                  {"num_key_value_heads", c.num_key_value_heads},
                  {"head_dim", hd}},
                 [&] { return c.qkv_dim(); });
  check_quantity("ssm_qkvz_size",
                 {{"linear_num_key_heads", nk},
                  {"linear_key_head_dim", kd},
                  {"linear_num_value_heads", nv},
                  {"linear_value_head_dim", vd}},
                 [&] { return c.ssm_qkvz_size(); });
  check_quantity("ssm_ba_size", {{"linear_num_value_heads", nv}}, [&] { return c.ssm_ba_size(); });
  check_quantity("linear_num_value_heads * linear_value_head_dim",
                 {{"linear_num_value_heads", nv}, {"linear_value_head_dim", vd}},
                 [&] { return Size(nv) * vd; });
  check_quantity("mamba2_d_inner", {{"mamba_num_heads", mh}, {"mamba_head_dim", mhd}},
                 [&] { return c.mamba2_d_inner(); });
  check_quantity("mamba2_d_xbc",
                 {{"mamba_num_heads", mh},
                  {"mamba_head_dim", mhd},
                  {"n_groups", c.n_groups},
                  {"ssm_state_size", c.ssm_state_size}},
                 [&] { return c.mamba2_d_xbc(); });
  check_quantity("mamba2_in_proj_size",
                 {{"mamba_num_heads", mh},
                  {"mamba_head_dim", mhd},
                  {"n_groups", c.n_groups},
                  {"ssm_state_size", c.ssm_state_size}},
                 [&] { return c.mamba2_in_proj_size(); });
  check_quantity("moe_input_size",
                 {{"moe_latent_size", c.moe_latent_size}, {"hidden_size", c.hidden_size}},
                 [&] { return c.moe_input_size(); });
  check_quantity("num_experts + zero_expert_num",
                 {{"num_experts", c.num_experts}, {"zero_expert_num", c.zero_expert_num}},
                 [&] { return Size(c.num_experts) + c.zero_expert_num; });
  check_quantity("num_experts_per_tok * moe_intermediate_size",
                 {{"num_experts_per_tok", c.num_experts_per_tok},
                  {"moe_intermediate_size", c.moe_intermediate_size}},
                 [&] { return Size(c.num_experts_per_tok) * c.moe_intermediate_size; });
  check_quantity("num_attention_heads * (kv_lora_rank + qk_rope_head_dim)",
                 {{"num_attention_heads", nq},
                  {"kv_lora_rank", c.kv_lora_rank},
                  {"qk_rope_head_dim", c.qk_rope_head_dim}},
                 [&] { return Size(nq) * (Size(c.kv_lora_rank) + c.qk_rope_head_dim); });
  check_quantity("o_groups * o_lora_rank",
                 {{"o_groups", c.o_groups}, {"o_lora_rank", c.o_lora_rank}},
                 [&] { return Size(c.o_groups) * c.o_lora_rank; });
  check_quantity("hc_mult * hc_mult", {{"hc_mult", c.hc_mult}},
                 [&] { return Size(c.hc_mult) * c.hc_mult; });
  check_quantity(
      "2 * hc_mult * hidden_size + hc_lowrank + hc_mult",
      {{"hc_mult", c.hc_mult}, {"hidden_size", c.hidden_size}, {"hc_lowrank", c.hc_lowrank}},
      [&] { return Size(2) * c.hc_mult * c.hidden_size + c.hc_lowrank + c.hc_mult; });
  check_quantity("(index_n_heads + 1) * index_head_dim",
                 {{"index_n_heads", c.index_n_heads}, {"index_head_dim", c.index_head_dim}},
                 [&] { return (Size(c.index_n_heads) + 1) * c.index_head_dim; });
}

// ---- attention (docs/spec/attention.md §1; validate_attention in rope.h) ----

uint64_t attention_layer_count(const ModelConfig& c) {
  return c.layer_types.empty() ? c.num_hidden_layers : c.layer_types.size();
}

// Whether some layer runs grouped-query attention (full or sliding), whose RoPE the rules
// below constrain; MLA's rotary part is qk_rope_head_dim, outside these rules.
bool has_gqa_layer(const ModelConfig& c) {
  for (uint64_t i = 0; i < attention_layer_count(c); ++i) {
    const MixerKind k = c.mixer_kind(i);
    if (k == MixerKind::full || k == MixerKind::sliding) return true;
  }
  return false;
}

void check_rope_scaling(const ModelConfig& c) {
  const std::string& t = c.rope_type;
  if (t != "default" && t != "linear" && t != "llama3" && t != "yarn")
    reject("rope_type = \"" + t + "\" is not one of default, linear, llama3, yarn");
  const double theta = c.rope_theta;
  if (!(std::isfinite(theta) && theta > 1.0))
    reject(field_text("rope_theta", theta) + ": the RoPE base must be a finite number > 1");
  const double f = c.rope_factor;
  if (!(std::isfinite(f) && f > 0.0))
    reject(field_text("rope_factor", f) + ": a RoPE scaling factor must be a finite number > 0");
  if ((t == "llama3" || t == "yarn") && c.rope_original_max_position == 0)
    reject(field_text("rope_original_max_position", c.rope_original_max_position) +
           " with rope_type = \"" + t + "\": its formula needs the original context length");
  if (t == "llama3" && c.rope_low_freq_factor == c.rope_high_freq_factor)
    reject(field_text("rope_low_freq_factor", c.rope_low_freq_factor) + " = " +
           field_text("rope_high_freq_factor", c.rope_high_freq_factor) +
           ": llama3 divides by their difference");
}

void check_rotary_dim(const ModelConfig& c) {
  const double f = c.partial_rotary_factor;
  if (!(f > 0.0 && f <= 1.0))
    reject(field_text("partial_rotary_factor", f) +
           ": must be in (0, 1] (rotary_dim = int(head_dim · factor) <= head_dim)");
  const uint64_t r = c.rotary_dim();
  if (r == 0 || r % 2 != 0)
    reject("rotary_dim = " + std::to_string(r) + " (int(" + field_text("head_dim", c.head_dim) +
           " · " + field_text("partial_rotary_factor", f) +
           ")) must be even and > 0: RoPE rotates pairs");
  if (!c.uses_mrope()) return;
  const auto& s = c.mrope_section;
  if (s[0] + s[1] + s[2] != r / 2)
    reject("mrope_section = [" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " +
           std::to_string(s[2]) + "] sums to " + std::to_string(s[0] + s[1] + s[2]) +
           " but rotary_dim / 2 = " + std::to_string(r / 2) +
           ": every frequency takes its position from one stream");
}

void check_sliding_layers(const ModelConfig& c) {
  if (c.sliding_window > 0) return;
  for (uint64_t i = 0; i < attention_layer_count(c); ++i)
    if (c.mixer_kind(i) == MixerKind::sliding)
      reject("layer_types[" + std::to_string(i) + "] = sliding_attention but " +
             field_text("sliding_window", c.sliding_window) + " (no window)");
}

}  // namespace

void validate_attention(const ModelConfig& c) {
  check_rope_scaling(c);
  if (!has_gqa_layer(c)) return;
  check_rotary_dim(c);
  check_sliding_layers(c);
}

void ModelConfig::validate() const {
  check_core_dimensions(*this);
  check_attention(*this);
  check_moe(*this);
  check_gdn(*this);
  check_mamba(*this);
  check_mhc(*this);
  check_indexer(*this);
  check_scoring_func(*this);
  check_floats(*this);
  check_layer_lists(*this);
  check_derived_sizes(*this);
}

}  // namespace bufferlab
