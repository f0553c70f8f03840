// Random valid configs per family, with independent feature flags (docs/spec/buffers.md §1.2).
#include "bufferlab/properties/generators.h"

#include <algorithm>

#include "bufferlab/core/config_json.h"

namespace bufferlab {

void showValue(const ModelConfig& config, std::ostream& os) {
  os << to_normalized_json(config).dump();
}

void showValue(const RunShape& s, std::ostream& os) {
  os << "--max-batch-tokens " << s.max_batch_tokens << " --max-seq-len " << s.max_seq_len
     << " --kv-block-size " << s.kv_block_size << " --max-batch-size " << s.max_batch_size;
}

void showValue(const Target& t, std::ostream& os) {
  os << "--target " << t.name << " (sm_count " << t.sm_count << ") --splitk " << t.splitk_string()
     << (t.q2_dequant ? " --q2-dequant" : "") << (t.q2_mmq ? " --q2-mmq" : "");
}

namespace gen {
namespace {

// A dimension in [lo, hi]; shrinks towards lo.
uint64_t dim(uint64_t lo, uint64_t hi) { return *rc::gen::inRange<uint64_t>(lo, hi + 1); }
bool flag() { return *rc::gen::arbitrary<bool>(); }

// Attention geometry every model has (nq % nkv == 0, nq·hd > 0).
void attention(ModelConfig& c) {
  c.num_key_value_heads = dim(1, 16);
  c.num_attention_heads = c.num_key_value_heads * dim(1, 8);
  c.head_dim =
      *rc::gen::oneOf(rc::gen::inRange<uint64_t>(1, 300), rc::gen::element<uint64_t>(64, 128, 256));
  c.attn_gated = flag();
  // The fields of docs/spec/attention.md §1 that no size depends on, drawn independently (a
  // window makes every attention layer sliding when there are no layer_types, §1).
  if (flag()) c.sliding_window = dim(1, 4096);
  c.qk_norm = flag();
  c.attn_sinks = flag();
  c.rope_interleaved = flag();
  c.rope_truncate = flag();
  if (flag()) c.rope_original_max_position = dim(1, 1u << 17);
}

void base(ModelConfig& c) {
  c.hidden_size = dim(1, 8191);
  c.vocab_size = dim(1, 262143);
  c.num_hidden_layers = dim(1, 96);
  c.intermediate_size = dim(1, 30000);
  c.rms_norm_eps = *rc::gen::element(1e-6, 1e-5);
  attention(c);
}

void moe(ModelConfig& c) {
  c.num_experts = dim(1, 520);
  c.num_experts_per_tok = dim(1, std::min<uint64_t>(c.num_experts, 22));
  c.moe_intermediate_size = dim(1, 4000);
  c.scoring_func = *rc::gen::element<std::string>("softmax", "sigmoid", "sqrtsoftplus");
  c.norm_topk_prob = flag();
  c.use_routing_bias = c.scoring_func != "softmax" && flag();
  if (flag()) c.shared_expert_intermediate_size = dim(1, 4000);
  if (flag()) c.zero_expert_num = dim(1, 64);
  // Router groups (docs/spec/numerics.md §2): G | E (the experts trimmed to a multiple), no zero
  // experts, top_k within the kept groups.
  if (c.zero_expert_num == 0 && c.num_experts >= 4 && flag()) {
    const uint64_t groups = dim(2, std::min<uint64_t>(c.num_experts / 2, 64));
    c.num_experts -= c.num_experts % groups;
    c.num_experts_per_tok = std::min(c.num_experts_per_tok, c.num_experts);
    const uint64_t size = c.num_experts / groups;
    c.router_groups = groups;
    c.router_topk_groups = dim((c.num_experts_per_tok + size - 1) / size, groups);
  }
  if (flag()) c.moe_latent_size = dim(1, 2000);
  if (flag()) c.first_k_dense = dim(1, c.num_hidden_layers);
  if (flag()) c.num_hash_layers = dim(1, 4);
  if (flag()) c.moe_layer_freq = dim(1, 3);
  // A pure-MoE model without a dense FFN width; its first_k_dense / moe_layer_freq dense
  // layers stay (validation allows them, as it allows dense layers from moe_layer_freq).
  if (flag()) c.intermediate_size = 0;
}

void gdn(ModelConfig& c) {
  c.linear_num_key_heads = dim(1, 16);
  c.linear_num_value_heads = c.linear_num_key_heads * dim(1, 4);
  const bool chunked = flag();  // kd = vd = 128 selects the chunked scratch
  c.linear_key_head_dim = chunked ? 128 : dim(1, 200);
  c.linear_value_head_dim = chunked ? 128 : dim(1, 200);
  c.linear_conv_kernel_dim = dim(2, 5);
  c.full_attention_interval = dim(1, 6);
}

void mamba(ModelConfig& c) {
  c.n_groups = dim(1, 8);
  c.mamba_num_heads = c.n_groups * dim(1, 40);
  c.mamba_head_dim = dim(1, 128);
  c.ssm_state_size =
      *rc::gen::oneOf(rc::gen::inRange<uint64_t>(1, 257), rc::gen::just<uint64_t>(0));
  c.conv_kernel = dim(2, 5);
  // Hybrid pattern: one kind per layer (hybrid_override_pattern M * - E).
  c.layer_types.clear();
  for (uint64_t i = 0; i < c.num_hidden_layers; ++i) {
    const int k = *rc::gen::inRange(0, c.num_experts > 0 ? 4 : 3);
    c.layer_types.push_back(k == 0   ? LayerType::mamba
                            : k == 1 ? LayerType::full_attention
                            : k == 2 ? LayerType::mlp
                                     : LayerType::moe);
  }
}

void mla(ModelConfig& c) {
  c.kv_lora_rank = dim(1, 600);
  c.q_lora_rank = *rc::gen::oneOf(rc::gen::inRange<uint64_t>(1, 2000), rc::gen::just<uint64_t>(0));
  c.qk_rope_head_dim = dim(1, 96);
  c.qk_nope_head_dim = dim(1, 200);
  c.v_head_dim = dim(1, 200);
  // head_dim is a field of its own: docs/spec/buffers.md §1.1 takes a given head_dim as given,
  // MLA included (GLM-5: 64 with nope + rope = 256), and validation does not tie it. Either
  // attention()'s independent draw stays (what shrinking reaches) or the §1.1 default.
  if (flag()) c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
}

void index_selection(ModelConfig& c) {
  c.index_n_heads = dim(1, 64);
  c.index_head_dim = dim(1, 192);
  c.index_compress_ratio = dim(1, 128);
  c.index_topk = c.index_compress_ratio * dim(1, 32);
}

void mhc(ModelConfig& c, bool lowrank) {
  c.hc_mult = dim(1, 8);
  c.hc_sinkhorn_iters = dim(1, 30);
  c.hc_lowrank = lowrank ? dim(1, 64) : 0;
}

// Independent feature flags, drawn on top of any family.
void features(ModelConfig& c) {
  if (flag()) {
    c.mrope_section = {dim(0, 40), dim(0, 40), dim(0, 40)};
    c.mrope_interleaved = flag();
  }
  if (flag() && c.layer_types.empty()) {
    for (uint64_t i = 0; i < c.num_hidden_layers; ++i)
      c.layer_types.push_back(i % 2 ? LayerType::full_attention : LayerType::sliding_attention);
  }
  if (flag()) {
    std::vector<uint64_t> divisors;
    for (uint64_t g = 1; g <= c.num_attention_heads; ++g)
      if (c.num_attention_heads % g == 0) divisors.push_back(g);
    c.o_groups = *rc::gen::elementOf(divisors);
    c.o_lora_rank = dim(1, 1100);
  }
  if (flag()) c.adapter_max_rank = dim(1, 256);
  if (flag()) c.swiglu_limit = *rc::gen::element(7.0, 10.0);
  if (flag() && c.hc_mult == 0) mhc(c, flag());
  if (flag() && c.index_topk == 0) index_selection(c);
}

ModelConfig make(const std::string& family) {
  ModelConfig c;
  base(c);
  if (family == "moe") moe(c);
  if (family == "gdn") {
    gdn(c);
    if (flag()) moe(c);
  }
  if (family == "mamba") {
    if (flag()) moe(c);
    mamba(c);
  }
  if (family == "mla") {
    mla(c);
    moe(c);
  }
  if (family == "mhc" || family == "mhc-lowrank") {
    mhc(c, family == "mhc-lowrank");
    if (flag()) moe(c);
  }
  if (family == "qsa") {
    if (flag()) mla(c);
    index_selection(c);
  }
  if (family == "lora") c.adapter_max_rank = dim(1, 256);
  features(c);
  if (c.num_experts == 0 && c.intermediate_size == 0) c.intermediate_size = dim(1, 30000);
  return c;
}

}  // namespace

const std::vector<std::string>& family_names() {
  static const std::vector<std::string> names = {"dense", "moe",         "gdn", "mamba", "mla",
                                                 "mhc",   "mhc-lowrank", "qsa", "lora"};
  return names;
}

rc::Gen<ModelConfig> config_of_family(const std::string& family) {
  return rc::gen::exec([family] { return make(family); });
}

rc::Gen<ModelConfig> valid_config() {
  return rc::gen::map(family_and_config(), [](const auto& drawn) { return drawn.second; });
}

rc::Gen<std::pair<std::string, ModelConfig>> family_and_config() {
  return rc::gen::exec([] {
    const std::string family = *rc::gen::elementOf(family_names());
    return std::make_pair(family, make(family));
  });
}

rc::Gen<RunShape> run_shape() {
  return rc::gen::exec([] {
    RunShape s;
    s.max_batch_tokens =
        *rc::gen::oneOf(rc::gen::inRange<uint64_t>(1, 65537),
                        rc::gen::element<uint64_t>(1, 2, 3, 15, 16, 17, 63, 64, 65, 159, 160, 161,
                                                   8191, 8192, 65536));
    s.max_batch_size = dim(1, 192);
    s.kv_block_size = *rc::gen::element<uint64_t>(0, 16, 64);
    s.max_seq_len = *rc::gen::element<uint64_t>(1, 4095, 4096, 32768, 131072, 1048576);
    return s;
  });
}

rc::Gen<Target> target() {
  return rc::gen::exec([] {
    Target t = Target::named(*rc::gen::elementOf(Target::names()));
    const int policy = *rc::gen::inRange(0, 4);
    if (policy == 1) t.set_splitk("legacy");
    if (policy == 2) t.set_splitk("auto");
    if (policy == 3) t.set_splitk(std::to_string(dim(1, 20)));
    t.q2_dequant = flag();
    t.q2_mmq = flag();
    return t;
  });
}

}  // namespace gen
}  // namespace bufferlab
