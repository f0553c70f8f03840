// Presets (docs/spec/buffers.md §1.2) and the layer pattern (§1): every preset loads and
// validates, real presets equal their config.json, tiny presets keep their family's
// structure, and the mixer/FFN kind of every layer matches counts derived by hand.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/presets.h"
#include "config_checks.h"

namespace bufferlab {
namespace {

using nlohmann::json;

const std::map<std::string, std::string>& real_preset_files() {
  static const std::map<std::string, std::string> files = {
      {"qwen3-8b", "Qwen3-8B.json"},
      {"qwen3-30b-a3b", "Qwen3-30B-A3B.json"},
      {"qwen3-next-80b-thinking", "Qwen3-Next-80B-A3B-Thinking.json"},
      {"deepseek-v3.2", "DeepSeek-V3.2.json"},
      {"deepseek-v4-flash", "DeepSeek-V4-Flash.json"},
      {"nemotron-h-56b", "Nemotron-H-56B-Base-8K.json"},
      {"qwen2.5-vl-7b", "Qwen2.5-VL-7B-Instruct.json"},
      {"llama-3.1-8b", "Meta-Llama-3.1-8B.json"},
      {"mixtral-8x7b", "Mixtral-8x7B-v0.1.json"},
      {"gpt-oss-20b", "gpt-oss-20b.json"},
      {"glm-5", "GLM-5.json"},
      {"nemotron-3-nano-30b", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"},
  };
  return files;
}

const std::vector<std::string> kTinyNames = {"tiny-dense",       "tiny-moe", "tiny-gdn",
                                             "tiny-mamba",       "tiny-mla", "tiny-mhc",
                                             "tiny-mhc-lowrank", "tiny-qsa", "tiny-lora"};

// How many layers have each mixer / FFN kind.
std::map<std::string, int> mixer_counts(const ModelConfig& c) {
  std::map<std::string, int> n;
  for (uint64_t i = 0; i < c.num_hidden_layers; ++i) ++n[to_string(c.mixer_kind(i))];
  return n;
}

std::map<std::string, int> ffn_counts(const ModelConfig& c) {
  std::map<std::string, int> n;
  for (uint64_t i = 0; i < c.num_hidden_layers; ++i) ++n[to_string(c.ffn_kind(i))];
  return n;
}

using Counts = std::map<std::string, int>;

// ---- the list ----

TEST(Presets, ListHasAllTwentyTwoNames) {
  std::set<std::string> expected = {"qwen3-next-80b"};
  for (const auto& [name, file] : real_preset_files()) expected.insert(name);
  expected.insert(kTinyNames.begin(), kTinyNames.end());
  ASSERT_EQ(expected.size(), 22u);
  std::set<std::string> listed;
  for (const PresetInfo& p : list_presets()) EXPECT_TRUE(listed.insert(p.name).second) << p.name;
  EXPECT_EQ(listed, expected);
}

TEST(Presets, InfoIsConsistent) {
  for (const PresetInfo& p : list_presets()) {
    EXPECT_FALSE(p.family.empty()) << p.name;
    EXPECT_FALSE(p.description.empty()) << p.name;
    EXPECT_EQ(p.tiny, p.name.rfind("tiny-", 0) == 0) << p.name;
    if (p.tiny) {
      EXPECT_EQ(p.name, "tiny-" + p.family);
    }
  }
}

TEST(Presets, EveryPresetLoadsAndValidates) {
  for (const PresetInfo& p : list_presets()) {
    SCOPED_TRACE(p.name);
    ModelConfig c;
    ASSERT_NO_THROW(c = preset(p.name));
    EXPECT_NO_THROW(c.validate());
    EXPECT_GT(c.num_hidden_layers, 0u);
  }
}

TEST(Presets, RealPresetsEqualTheirFiles) {
  for (const auto& [name, file] : real_preset_files()) {
    SCOPED_TRACE(name);
    const ModelConfig from_file = load_config_file(std::string(BUFFERLAB_CONFIGS_DIR) + "/" + file);
    EXPECT_CONFIG_EQ(preset(name), from_file);
  }
}

// The §6 reference is written out by hand; the Thinking checkpoint's file has the same
// dimensions, so the two independent sources must agree.
TEST(Presets, Qwen3Next80bMatchesSpecAndFile) {
  const ModelConfig c = preset("qwen3-next-80b");
  EXPECT_EQ(c.hidden_size, 2048u);
  EXPECT_EQ(c.num_hidden_layers, 48u);
  EXPECT_EQ(c.full_attention_interval, 4u);
  EXPECT_EQ(c.intermediate_size, 5120u);
  EXPECT_EQ(c.vocab_size, 151936u);
  EXPECT_EQ(c.num_attention_heads, 16u);
  EXPECT_EQ(c.num_key_value_heads, 2u);
  EXPECT_EQ(c.head_dim, 256u);
  EXPECT_TRUE(c.attn_gated);
  EXPECT_EQ(c.linear_num_key_heads, 16u);
  EXPECT_EQ(c.linear_key_head_dim, 128u);
  EXPECT_EQ(c.linear_num_value_heads, 32u);
  EXPECT_EQ(c.linear_value_head_dim, 128u);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4u);
  EXPECT_EQ(c.num_experts, 512u);
  EXPECT_EQ(c.num_experts_per_tok, 10u);
  EXPECT_EQ(c.moe_intermediate_size, 512u);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512u);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  // docs/spec/attention.md §1: gated, a quarter of each head rotated, Q/K norm, θ = 10^7.
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rotary_dim(), 64u);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_EQ(c.sliding_window, 0u);
  EXPECT_FALSE(c.attn_sinks);
  EXPECT_CONFIG_EQ(c, preset("qwen3-next-80b-thinking"));
}

// ---- attention fields of the presets (docs/spec/attention.md §1), written by hand ----

TEST(PresetAttention, GptOss20b) {
  const ModelConfig c = preset("gpt-oss-20b");
  EXPECT_EQ(c.sliding_window, 128u);
  EXPECT_TRUE(c.attn_sinks);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.rope_type, "yarn");
  EXPECT_EQ(c.rope_theta, 150000.0);
  EXPECT_EQ(c.rope_factor, 32.0);
  EXPECT_EQ(c.rope_original_max_position, 4096u);
  EXPECT_EQ(c.rope_beta_fast, 32.0);
  EXPECT_EQ(c.rope_beta_slow, 1.0);
  EXPECT_FALSE(c.rope_truncate);
  EXPECT_EQ(c.rope_attention_factor, 0.0) << "absent: derived from the factor";
  for (uint64_t i = 0; i < c.num_hidden_layers; ++i)
    EXPECT_EQ(c.mixer_kind(i), i % 2 == 0 ? MixerKind::sliding : MixerKind::full) << i;
}

TEST(PresetAttention, Llama31Llama3Scaling) {
  const ModelConfig c = preset("llama-3.1-8b");
  EXPECT_EQ(c.rope_type, "llama3");
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_factor, 8.0);
  EXPECT_EQ(c.rope_low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_original_max_position, 8192u);
  EXPECT_FALSE(c.qk_norm);
}

TEST(PresetAttention, Qwen25VlMropeDefault) {
  const ModelConfig c = preset("qwen2.5-vl-7b");
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_TRUE(c.uses_mrope());
  EXPECT_EQ(c.mrope_section[0] + c.mrope_section[1] + c.mrope_section[2], c.rotary_dim() / 2);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.sliding_window, 0u);
}

TEST(PresetAttention, Qwen3PresetsNormQAndK) {
  for (const char* name :
       {"qwen3-8b", "qwen3-30b-a3b", "qwen3-next-80b-thinking", "qwen3-next-80b", "tiny-gdn"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(preset(name).qk_norm);
  }
  for (const char* name : {"llama-3.1-8b", "mixtral-8x7b", "gpt-oss-20b", "qwen2.5-vl-7b",
                           "deepseek-v3.2", "glm-5", "nemotron-h-56b", "tiny-dense"}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(preset(name).qk_norm);
  }
}

TEST(PresetAttention, TinyGdnHasQwen3NextsAttention) {
  const ModelConfig c = preset("tiny-gdn");
  EXPECT_TRUE(c.attn_gated);
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rotary_dim(), 18u);  // int(72 · 0.25)
}

// The DeepSeek and Kimi-style configs keep loading: their yarn scaling is mapped (it applies
// to MLA's rotary part), never refused.
TEST(PresetAttention, DeepSeekYarnLoads) {
  const ModelConfig v32 = preset("deepseek-v3.2");
  EXPECT_EQ(v32.rope_type, "yarn");
  EXPECT_EQ(v32.rope_factor, 40.0);
  EXPECT_EQ(v32.rope_mscale, 1.0);
  EXPECT_EQ(v32.rope_mscale_all_dim, 1.0);
  const ModelConfig v4 = preset("deepseek-v4-flash");
  EXPECT_EQ(v4.rope_type, "yarn");
  EXPECT_EQ(v4.sliding_window, 128u);
}

// ---- tiny presets keep their family's structure ----

TEST(TinyPresets, DimensionsAreSmallAndNotAllMultiplesOf16) {
  for (const std::string& name : kTinyNames) {
    SCOPED_TRACE(name);
    const ModelConfig c = preset(name);
    const std::vector<uint64_t> dims = {c.hidden_size, c.intermediate_size, c.vocab_size,
                                        c.head_dim, c.moe_intermediate_size};
    for (uint64_t d : dims) EXPECT_LE(d, 1024u);
    EXPECT_GE(c.hidden_size, 10u);
    EXPECT_TRUE(std::any_of(dims.begin(), dims.end(), [](uint64_t d) { return d % 16 != 0; }));
  }
}

TEST(TinyPresets, FamilyStructure) {
  const ModelConfig moe = preset("tiny-moe");
  EXPECT_GT(moe.num_experts, 0u);
  EXPECT_GT(moe.shared_expert_intermediate_size, 0u);

  const ModelConfig gdn = preset("tiny-gdn");
  EXPECT_EQ(gdn.linear_key_head_dim, 128u) << "the chunked GDN scratch needs kd = vd = 128";
  EXPECT_EQ(gdn.linear_value_head_dim, 128u);
  EXPECT_EQ(gdn.full_attention_interval, 4u);
  EXPECT_TRUE(gdn.attn_gated);
  EXPECT_GT(gdn.num_experts, 0u);

  const ModelConfig mamba = preset("tiny-mamba");
  EXPECT_GT(mamba.mamba_num_heads, 0u);
  EXPECT_GT(mamba.ssm_state_size, 0u);
  for (LayerType t : {LayerType::mamba, LayerType::full_attention, LayerType::mlp})
    EXPECT_NE(std::count(mamba.layer_types.begin(), mamba.layer_types.end(), t), 0) << to_string(t);

  const ModelConfig mla = preset("tiny-mla");
  EXPECT_GT(mla.kv_lora_rank, 0u);
  EXPECT_EQ(mla.head_dim, mla.qk_nope_head_dim + mla.qk_rope_head_dim);
  EXPECT_EQ(mla.scoring_func, "sigmoid");
  EXPECT_TRUE(mla.use_routing_bias);
  EXPECT_GT(mla.first_k_dense, 0u);
  EXPECT_GT(mla.index_topk, 0u);

  const ModelConfig mhc = preset("tiny-mhc");
  EXPECT_EQ(mhc.hc_mult, 4u);
  EXPECT_EQ(mhc.hc_lowrank, 0u);
  EXPECT_GT(mhc.o_groups, 0u);
  EXPECT_GT(mhc.num_hash_layers, 0u);
  EXPECT_EQ(mhc.scoring_func, "sqrtsoftplus");

  EXPECT_GT(preset("tiny-mhc-lowrank").hc_lowrank, 0u);
  const ModelConfig qsa = preset("tiny-qsa");
  EXPECT_GT(qsa.index_topk, 0u);
  EXPECT_GT(qsa.index_compress_ratio, 0u);
  const ModelConfig lora = preset("tiny-lora");
  EXPECT_GT(lora.adapter_max_rank, 0u);
  EXPECT_EQ(lora.num_experts, 0u);
}

// ---- layer patterns of the real presets, counted by hand ----

TEST(LayerPattern, Qwen3Next80b) {
  // Full attention at layers 3, 7, ..., 47 (12 layers), GDN elsewhere; every layer MoE.
  const ModelConfig c = preset("qwen3-next-80b");
  EXPECT_EQ(mixer_counts(c), (Counts{{"full", 12}, {"gdn", 36}}));
  EXPECT_EQ(ffn_counts(c), (Counts{{"moe", 48}}));
  EXPECT_EQ(c.mixer_kind(0), MixerKind::gdn);
  EXPECT_EQ(c.mixer_kind(3), MixerKind::full);
  EXPECT_EQ(c.mixer_kind(47), MixerKind::full);
}

TEST(LayerPattern, NemotronH56b) {
  // Pattern: 54 M, 10 *, 54 -; each layer is a mixer or an FFN, never both.
  const ModelConfig c = preset("nemotron-h-56b");
  EXPECT_EQ(mixer_counts(c), (Counts{{"mamba2", 54}, {"full", 10}, {"none", 54}}));
  EXPECT_EQ(ffn_counts(c), (Counts{{"dense", 54}, {"none", 64}}));
  EXPECT_EQ(c.mixer_kind(0), MixerKind::mamba2);
  EXPECT_EQ(c.ffn_kind(0), FfnKind::none);
  EXPECT_EQ(c.mixer_kind(1), MixerKind::none);
  EXPECT_EQ(c.ffn_kind(1), FfnKind::dense);
  EXPECT_EQ(c.mixer_kind(7), MixerKind::full);
  EXPECT_EQ(c.ffn_kind(7), FfnKind::none);
}

TEST(LayerPattern, DeepSeekV32) {
  // MLA everywhere; first_k_dense_replace = 3 dense layers, then 58 MoE layers.
  const ModelConfig c = preset("deepseek-v3.2");
  EXPECT_EQ(mixer_counts(c), (Counts{{"mla", 61}}));
  EXPECT_EQ(ffn_counts(c), (Counts{{"dense", 3}, {"moe", 58}}));
  EXPECT_EQ(c.ffn_kind(2), FfnKind::dense);
  EXPECT_EQ(c.ffn_kind(3), FfnKind::moe);
}

TEST(LayerPattern, DeepSeekV4Flash) {
  // Sliding attention (MQA) everywhere: sliding_window 128 and no layer_types (the Mistral
  // convention of docs/spec/attention.md §1); the first 3 MoE layers are hash-routed.
  const ModelConfig c = preset("deepseek-v4-flash");
  EXPECT_EQ(mixer_counts(c), (Counts{{"sliding", 43}}));
  EXPECT_EQ(ffn_counts(c), (Counts{{"hash_moe", 3}, {"moe", 40}}));
  EXPECT_EQ(c.ffn_kind(2), FfnKind::hash_moe);
  EXPECT_EQ(c.ffn_kind(3), FfnKind::moe);
}

TEST(LayerPattern, GptOss20b) {
  // layer_types alternate sliding (even layers) and full (odd); every layer MoE.
  const ModelConfig c = preset("gpt-oss-20b");
  EXPECT_EQ(mixer_counts(c), (Counts{{"sliding", 12}, {"full", 12}}));
  EXPECT_EQ(ffn_counts(c), (Counts{{"moe", 24}}));
  EXPECT_EQ(c.mixer_kind(0), MixerKind::sliding);
  EXPECT_EQ(c.mixer_kind(1), MixerKind::full);
}

TEST(LayerPattern, DenseAndMoeRealPresets) {
  EXPECT_EQ(mixer_counts(preset("llama-3.1-8b")), (Counts{{"full", 32}}));
  EXPECT_EQ(ffn_counts(preset("llama-3.1-8b")), (Counts{{"dense", 32}}));
  EXPECT_EQ(ffn_counts(preset("qwen3-30b-a3b")), (Counts{{"moe", 48}}));
  EXPECT_EQ(ffn_counts(preset("mixtral-8x7b")), (Counts{{"moe", 32}}));
}

TEST(LayerPattern, TinyPresets) {
  // tiny-mamba "M-M*-MM-"; tiny-gdn: full at 3 and 7; tiny-mla: 2 dense then 3 MoE;
  // tiny-mhc: 5 MoE layers, the first 2 hash-routed.
  EXPECT_EQ(mixer_counts(preset("tiny-mamba")), (Counts{{"mamba2", 4}, {"full", 1}, {"none", 3}}));
  EXPECT_EQ(ffn_counts(preset("tiny-mamba")), (Counts{{"dense", 3}, {"none", 5}}));
  EXPECT_EQ(mixer_counts(preset("tiny-gdn")), (Counts{{"full", 2}, {"gdn", 6}}));
  EXPECT_EQ(mixer_counts(preset("tiny-mla")), (Counts{{"mla", 5}}));
  EXPECT_EQ(ffn_counts(preset("tiny-mla")), (Counts{{"dense", 2}, {"moe", 3}}));
  EXPECT_EQ(ffn_counts(preset("tiny-mhc")), (Counts{{"hash_moe", 2}, {"moe", 3}}));
}

// ---- layer pattern rules on hand-built configs ----

ModelConfig moe_base(uint64_t layers) {
  ModelConfig c = preset("tiny-moe");
  c.num_hidden_layers = layers;
  return c;
}

std::vector<FfnKind> ffn_kinds(const ModelConfig& c) {
  std::vector<FfnKind> kinds;
  for (uint64_t i = 0; i < c.num_hidden_layers; ++i) kinds.push_back(c.ffn_kind(i));
  return kinds;
}

TEST(LayerPatternRules, MoeLayerRule) {
  using enum FfnKind;
  ModelConfig c = moe_base(6);
  c.first_k_dense = 1;
  c.moe_layer_freq = 2;  // Qwen decoder_sparse_step: (i+1) % 2 == 0
  c.mlp_only_layers = {3};
  EXPECT_EQ(ffn_kinds(c), (std::vector<FfnKind>{dense, moe, dense, dense, dense, moe}));
}

TEST(LayerPatternRules, HashLayersAreTheFirstMoeLayers) {
  using enum FfnKind;
  ModelConfig c = moe_base(6);
  c.first_k_dense = 2;
  c.num_hash_layers = 2;
  EXPECT_EQ(ffn_kinds(c), (std::vector<FfnKind>{dense, dense, hash_moe, hash_moe, moe, moe}));
}

TEST(LayerPatternRules, IntervalWithoutGdnIsAllFull) {
  ModelConfig c = preset("tiny-dense");
  c.full_attention_interval = 4;
  EXPECT_EQ(mixer_counts(c), (Counts{{"full", 4}}));
}

TEST(LayerPatternRules, AttentionOfAnMlaModelIsMla) {
  ModelConfig c = preset("tiny-mla");
  c.layer_types = {LayerType::sliding_attention, LayerType::full_attention,
                   LayerType::sliding_attention, LayerType::mla, LayerType::full_attention};
  EXPECT_EQ(mixer_counts(c), (Counts{{"mla", 5}}));
}

TEST(LayerPatternRules, NonHybridLayerTypesKeepTheFfnRule) {
  ModelConfig c = preset("tiny-gdn");
  c.layer_types.assign(8, LayerType::linear_attention);
  c.layer_types[5] = LayerType::sliding_attention;
  EXPECT_EQ(mixer_counts(c), (Counts{{"gdn", 7}, {"sliding", 1}}));
  EXPECT_EQ(ffn_counts(c), (Counts{{"moe", 8}}));
}

TEST(LayerPatternRules, HybridMoeEntries) {
  ModelConfig c = preset("tiny-mamba");
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 40;
  c.num_hash_layers = 1;
  c.layer_types = {LayerType::mamba, LayerType::moe, LayerType::full_attention, LayerType::moe,
                   LayerType::mamba, LayerType::mlp, LayerType::mamba,          LayerType::moe};
  using enum FfnKind;
  EXPECT_EQ(ffn_kinds(c),
            (std::vector<FfnKind>{none, hash_moe, none, moe, none, dense, none, moe}));
  EXPECT_EQ(c.mixer_kind(1), MixerKind::none);
}

TEST(LayerPatternRules, LayerTypeNames) {
  for (LayerType t :
       {LayerType::full_attention, LayerType::sliding_attention, LayerType::linear_attention,
        LayerType::mamba, LayerType::mla, LayerType::mlp, LayerType::moe})
    EXPECT_EQ(layer_type_from_string(to_string(t)), t);
  EXPECT_STREQ(to_string(LayerType::linear_attention), "linear_attention");
  EXPECT_STREQ(to_string(MixerKind::mamba2), "mamba2");
  EXPECT_STREQ(to_string(FfnKind::hash_moe), "hash_moe");
  EXPECT_THROW(layer_type_from_string("full"), Error);
}

}  // namespace
}  // namespace bufferlab
