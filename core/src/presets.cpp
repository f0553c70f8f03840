// The presets of docs/spec/buffers.md §1.2. Real models come from their config.json (embedded at
// build time, single source of truth) through the loader; qwen3-next-80b (the §6 reference)
// and the tiny family configs are written out here.
#include "bufferlab/core/presets.h"

#include <string>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/rope.h"
#include "embedded_configs.h"

namespace bufferlab {
namespace {

// ---- real models: one per config.json of data/configs ----

struct FilePreset {
  const char* name;
  const char* file;
  const char* family;
  const char* description;
};

constexpr FilePreset kFilePresets[] = {
    {"qwen3-8b", "Qwen3-8B.json", "dense", "Qwen3-8B: dense GQA"},
    {"qwen3-30b-a3b", "Qwen3-30B-A3B.json", "moe", "Qwen3-30B-A3B: MoE, 128 experts, top-8"},
    {"qwen3-next-80b-thinking", "Qwen3-Next-80B-A3B-Thinking.json", "gdn",
     "Qwen3-Next-80B-A3B-Thinking: GDN hybrid + MoE (512 experts, top-10)"},
    {"deepseek-v3.2", "DeepSeek-V3.2.json", "mla",
     "DeepSeek-V3.2: MLA + MoE (sigmoid, bias) + sparse-attention indexer"},
    {"deepseek-v4-flash", "DeepSeek-V4-Flash.json", "mhc",
     "DeepSeek-V4-Flash: mHC (hc_mult 4) + grouped O + hash routing + sqrtsoftplus"},
    {"nemotron-h-56b", "Nemotron-H-56B-Base-8K.json", "mamba",
     "Nemotron-H-56B-Base-8K: Mamba-2 hybrid"},
    {"qwen2.5-vl-7b", "Qwen2.5-VL-7B-Instruct.json", "dense",
     "Qwen2.5-VL-7B-Instruct: dense GQA, multimodal RoPE (sectioned)"},
    {"llama-3.1-8b", "Meta-Llama-3.1-8B.json", "dense", "Meta-Llama-3.1-8B: dense GQA"},
    {"mixtral-8x7b", "Mixtral-8x7B-v0.1.json", "moe", "Mixtral-8x7B-v0.1: MoE, 8 experts, top-2"},
    {"gpt-oss-20b", "gpt-oss-20b.json", "moe",
     "gpt-oss-20b: MoE (32 experts, top-4), sliding/full attention, SwiGLU clamp"},
    {"glm-5", "GLM-5.json", "mla",
     "GLM-5: MLA + MoE + sparse-attention indexer, head_dim 64 given (finding F9)"},
    {"nemotron-3-nano-30b", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json", "mamba",
     "NVIDIA-Nemotron-3-Nano-30B-A3B: Mamba-2 hybrid + MoE (128 experts, top-6)"},
};

const char* embedded_text(const char* file) {
  for (std::size_t i = 0; i < detail::kEmbeddedConfigFileCount; ++i)
    if (std::string(detail::kEmbeddedConfigFiles[i].name) == file)
      return detail::kEmbeddedConfigFiles[i].text;
  throw Error(std::string("config file ") + file + " was not embedded at build time " +
              "(is it missing from data/configs?)");
}

// ---- configs written out here ----

// The parts the written-out configs share.

// Embedding, depth and attention heads; RMSNorm eps 1e-6.
ModelConfig trunk(uint64_t hidden, uint64_t layers, uint64_t vocab, uint64_t nq, uint64_t nkv,
                  uint64_t head_dim) {
  return {.hidden_size = hidden,
          .vocab_size = vocab,
          .num_attention_heads = nq,
          .num_key_value_heads = nkv,
          .head_dim = head_dim,
          .num_hidden_layers = layers,
          .rms_norm_eps = 1e-6};
}

// Routed experts (top-k renormalised) with a shared expert.
void set_moe(ModelConfig& c, uint64_t experts, uint64_t top_k, uint64_t expert_width,
             uint64_t shared_width) {
  c.num_experts = experts;
  c.num_experts_per_tok = top_k;
  c.moe_intermediate_size = expert_width;
  c.shared_expert_intermediate_size = shared_width;
  c.norm_topk_prob = true;
}

// The Qwen3-Next hybrid: GDN linear attention with kd = vd = 128 (the chunked path) and a
// 4-tap conv, gated full attention every 4th layer with Q/K norm and a quarter of each head
// rotated (docs/spec/attention.md §1).
void set_gdn_hybrid(ModelConfig& c, uint64_t key_heads, uint64_t value_heads) {
  c.full_attention_interval = 4;
  c.attn_gated = true;
  c.qk_norm = true;
  c.partial_rotary_factor = 0.25;
  c.linear_num_key_heads = key_heads;
  c.linear_key_head_dim = 128;
  c.linear_num_value_heads = value_heads;
  c.linear_value_head_dim = 128;
  c.linear_conv_kernel_dim = 4;
}

// DeepSeek routing: the scoring function with a routing bias, then the routed scale.
void set_routing(ModelConfig& c, const char* scoring, double scale) {
  c.scoring_func = scoring;
  c.use_routing_bias = true;
  c.routed_scaling_factor = scale;
}

// The Mamba-2 mixer: a 4-tap conv; heads × head_dim, the SSM state size, B/C groups.
void set_mamba2(ModelConfig& c, uint64_t heads, uint64_t head_dim, uint64_t state,
                uint64_t groups) {
  c.conv_kernel = 4;
  c.mamba_num_heads = heads;
  c.mamba_head_dim = head_dim;
  c.ssm_state_size = state;
  c.n_groups = groups;
}

// MLA: the latent KV and low-rank Q ranks; each head's head_dim is nope + rope.
void set_mla(ModelConfig& c, uint64_t kv_rank, uint64_t q_rank, uint64_t rope, uint64_t v_dim) {
  c.kv_lora_rank = kv_rank;
  c.q_lora_rank = q_rank;
  c.qk_rope_head_dim = rope;
  c.qk_nope_head_dim = c.head_dim - rope;
  c.v_head_dim = v_dim;
}

// The sparse-attention indexer.
void set_indexer(ModelConfig& c, uint64_t heads, uint64_t head_dim, uint64_t topk) {
  c.index_n_heads = heads;
  c.index_head_dim = head_dim;
  c.index_topk = topk;
}

// docs/spec/buffers.md §6.
ModelConfig qwen3_next_80b() {
  ModelConfig c = trunk(2048, 48, 151936, 16, 2, 256);
  c.intermediate_size = 5120;
  c.rope_theta = 1e7;
  set_gdn_hybrid(c, 16, 32);
  set_moe(c, 512, 10, 512, 512);
  return c;
}

// Tiny configs: the structure of their family at dimensions of tens to hundreds, with sizes
// that are not multiples of 16 wherever the structure allows (kd = vd = 128 for GDN is
// structural: it selects the chunked scratch).
ModelConfig tiny_base(uint64_t layers, uint64_t vocab, uint64_t nq, uint64_t nkv,
                      uint64_t head_dim) {
  return trunk(136, layers, vocab, nq, nkv, head_dim);
}

// Llama / Qwen3 dense: GQA + SwiGLU FFN.
ModelConfig tiny_dense() {
  ModelConfig c = tiny_base(4, 500, 6, 2, 40);
  c.intermediate_size = 360;
  return c;
}

// Qwen-MoE: every layer MoE, softmax router, with a shared expert.
ModelConfig tiny_moe() {
  ModelConfig c = tiny_base(4, 500, 6, 2, 40);
  c.intermediate_size = 296;
  set_moe(c, 12, 3, 72, 88);
  return c;
}

// Qwen3-Next: GDN layers with gated full attention every 4th layer, MoE + shared expert.
ModelConfig tiny_gdn() {
  ModelConfig c = tiny_base(8, 300, 4, 2, 72);
  c.intermediate_size = 200;
  set_gdn_hybrid(c, 2, 4);
  set_moe(c, 10, 3, 48, 40);
  return c;
}

// Nemotron-H: hybrid_override_pattern "M-M*-MM-" (Mamba-2, dense MLP and attention layers).
ModelConfig tiny_mamba() {
  ModelConfig c = tiny_base(8, 400, 4, 2, 40);
  c.intermediate_size = 296;
  using enum LayerType;
  c.layer_types = {mamba, mlp, mamba, full_attention, mlp, mamba, mamba, mlp};
  set_mamba2(c, 6, 24, 40, 2);
  c.rms_norm_eps = 1e-5;
  return c;
}

// DeepSeek-V3.2: MLA, first_k_dense dense layers, sigmoid + bias routing, shared expert,
// sparse-attention indexer (no compression).
ModelConfig tiny_mla() {
  ModelConfig c = tiny_base(5, 500, 4, 4, 48);
  c.first_k_dense = 2;
  c.intermediate_size = 168;
  set_mla(c, 72, 48, 16, 32);  // nope = 48 - 16 = 32
  set_moe(c, 12, 4, 40, 40);
  set_routing(c, "sigmoid", 2.5);
  set_indexer(c, 4, 32, 64);
  return c;
}

// DeepSeek-V4: MQA (head_dim 64 here), grouped low-rank O, mHC (Sinkhorn), hash routing in
// the first MoE layers, sqrtsoftplus + bias, SwiGLU clamp, no dense FFN width.
ModelConfig tiny_mhc() {
  ModelConfig c = tiny_base(5, 300, 6, 1, 64);
  c.q_lora_rank = 48;
  c.qk_rope_head_dim = 16;
  c.o_groups = 3;
  c.o_lora_rank = 40;
  set_moe(c, 10, 3, 40, 40);
  c.num_hash_layers = 2;
  set_routing(c, "sqrtsoftplus", 1.5);
  c.swiglu_limit = 10.0;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  set_indexer(c, 4, 32, 32);
  return c;
}

ModelConfig tiny_mhc_lowrank() {
  ModelConfig c = tiny_mhc();
  c.hc_lowrank = 20;
  return c;
}

// DeepSeek-V4-style compressed sparse attention: the indexer selects index_topk entries over
// keys compressed by index_compress_ratio (the selection scratch exists).
ModelConfig tiny_qsa() {
  ModelConfig c = tiny_base(4, 300, 6, 1, 64);
  set_moe(c, 8, 2, 56, 56);
  set_routing(c, "sqrtsoftplus", 1.0);
  set_indexer(c, 4, 32, 48);
  c.index_compress_ratio = 4;
  return c;
}

// Dense GQA with a LoRA adapter pool.
ModelConfig tiny_lora() {
  ModelConfig c = tiny_dense();
  c.adapter_max_rank = 12;
  return c;
}

struct BuiltPreset {
  const char* name;
  const char* family;
  const char* description;
  bool tiny;
  ModelConfig (*make)();
};

constexpr BuiltPreset kBuiltPresets[] = {
    {"qwen3-next-80b", "gdn", "Qwen3-Next-80B-A3B: the reference of docs/spec/buffers.md §6", false,
     qwen3_next_80b},
    {"tiny-dense", "dense", "tiny dense GQA (Llama / Qwen3)", true, tiny_dense},
    {"tiny-moe", "moe", "tiny MoE with a shared expert (Qwen-MoE)", true, tiny_moe},
    {"tiny-gdn", "gdn", "tiny GDN hybrid + MoE, full attention every 4th layer (Qwen3-Next)", true,
     tiny_gdn},
    {"tiny-mamba", "mamba", "tiny Mamba-2 hybrid, pattern M-M*-MM- (Nemotron-H)", true, tiny_mamba},
    {"tiny-mla", "mla", "tiny MLA + MoE, sigmoid + bias, first_k_dense, indexer (DeepSeek-V3.2)",
     true, tiny_mla},
    {"tiny-mhc", "mhc", "tiny mHC Sinkhorn + grouped O + hash routing (DeepSeek-V4)", true,
     tiny_mhc},
    {"tiny-mhc-lowrank", "mhc-lowrank", "tiny mHC in the low-rank form", true, tiny_mhc_lowrank},
    {"tiny-qsa", "qsa", "tiny compressed sparse-attention indexer (index_compress_ratio 4)", true,
     tiny_qsa},
    {"tiny-lora", "lora", "tiny dense GQA with a LoRA adapter pool (rank 12)", true, tiny_lora},
};

std::string known_names() {
  std::string names;
  for (const PresetInfo& p : list_presets()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

}  // namespace

std::vector<PresetInfo> list_presets() {
  std::vector<PresetInfo> out;
  out.push_back({kBuiltPresets[0].name, kBuiltPresets[0].family, kBuiltPresets[0].description,
                 kBuiltPresets[0].tiny});
  for (const FilePreset& p : kFilePresets)
    out.push_back({p.name, p.family, std::string(p.description) + " (" + p.file + ")", false});
  for (std::size_t i = 1; i < std::size(kBuiltPresets); ++i)
    out.push_back({kBuiltPresets[i].name, kBuiltPresets[i].family, kBuiltPresets[i].description,
                   kBuiltPresets[i].tiny});
  return out;
}

ModelConfig preset(const std::string& name) {
  for (const FilePreset& p : kFilePresets)
    if (name == p.name) return config_from_json_text(embedded_text(p.file), p.file);
  for (const BuiltPreset& p : kBuiltPresets) {
    if (name != p.name) continue;
    ModelConfig c = p.make();
    c.validate();
    validate_attention(c);
    return c;
  }
  throw Error("unknown preset \"" + name + "\" (known: " + known_names() + ")");
}

}  // namespace bufferlab
