// The config.json loader (docs/spec/buffers.md §1.1): each real file of data/configs loads to the
// values written below BY HAND from reading the file (never from the loader's output), the
// mapping rules one by one (text_config, head_dim fallbacks, aliases, null, Infinity), and
// the normalized form's round trip.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/presets.h"
#include "config_checks.h"
#include "test_fixtures.h"

namespace bufferlab {
namespace {

using bufferlab::testing::dense_json;

using nlohmann::json;

ModelConfig load(const std::string& file) {
  return load_config_file(std::string(BUFFERLAB_CONFIGS_DIR) + "/" + file);
}

ModelConfig from_json(const json& j) { return config_from_json_text(j.dump(), "test.json"); }

// dense_json() with the keys of `patch` set over it.
json dense_json_with(const json& patch) {
  json j = dense_json();
  j.update(patch);
  return j;
}

// ---- the twelve real files ----

TEST(ConfigLoaderFiles, Qwen3_8B) {
  ModelConfig e;
  e.hidden_size = 4096;
  e.intermediate_size = 12288;
  e.vocab_size = 151936;
  e.num_attention_heads = 32;
  e.num_key_value_heads = 8;
  e.head_dim = 128;
  e.num_hidden_layers = 36;
  e.rms_norm_eps = 1e-6;
  e.rope_theta = 1e6;
  e.qk_norm = true;  // model_type qwen3
  EXPECT_CONFIG_EQ(load("Qwen3-8B.json"), e);
}

TEST(ConfigLoaderFiles, Qwen3_30B_A3B) {
  ModelConfig e;
  e.hidden_size = 2048;
  e.intermediate_size = 6144;
  e.vocab_size = 151936;
  e.num_attention_heads = 32;
  e.num_key_value_heads = 4;
  e.head_dim = 128;
  e.num_hidden_layers = 48;
  e.num_experts = 128;
  e.num_experts_per_tok = 8;
  e.moe_intermediate_size = 768;
  e.norm_topk_prob = true;
  e.moe_layer_freq = 1;  // decoder_sparse_step
  e.rms_norm_eps = 1e-6;
  e.rope_theta = 1e6;
  e.qk_norm = true;  // model_type qwen3_moe
  const ModelConfig c = load("Qwen3-30B-A3B.json");
  EXPECT_CONFIG_EQ(c, e);
  EXPECT_TRUE(c.mlp_only_layers.empty());
}

TEST(ConfigLoaderFiles, Qwen3_Next_80B_Thinking) {
  ModelConfig e;
  e.hidden_size = 2048;
  e.intermediate_size = 5120;
  e.vocab_size = 151936;
  e.num_attention_heads = 16;
  e.num_key_value_heads = 2;
  e.head_dim = 256;
  e.attn_gated = true;  // model_type qwen3_next, no attn_output_gate key
  e.num_hidden_layers = 48;
  e.full_attention_interval = 4;
  e.linear_num_key_heads = 16;
  e.linear_key_head_dim = 128;
  e.linear_num_value_heads = 32;
  e.linear_value_head_dim = 128;
  e.linear_conv_kernel_dim = 4;
  e.num_experts = 512;
  e.num_experts_per_tok = 10;
  e.moe_intermediate_size = 512;
  e.shared_expert_intermediate_size = 512;
  e.norm_topk_prob = true;
  e.rms_norm_eps = 1e-6;
  const ModelConfig c = load("Qwen3-Next-80B-A3B-Thinking.json");
  e.rope_theta = 1e7;
  e.partial_rotary_factor = 0.25;
  e.qk_norm = true;  // model_type qwen3_next
  EXPECT_CONFIG_EQ(c, e);
  EXPECT_TRUE(c.attn_gated);
  EXPECT_TRUE(c.layer_types.empty());
}

TEST(ConfigLoaderFiles, DeepSeek_V3_2) {
  ModelConfig e;
  e.hidden_size = 7168;
  e.intermediate_size = 18432;
  e.vocab_size = 129280;
  e.num_attention_heads = 128;
  e.num_key_value_heads = 128;
  e.head_dim = 128 + 64;  // no head_dim: qk_nope_head_dim + qk_rope_head_dim (MLA)
  e.num_hidden_layers = 61;
  e.first_k_dense = 3;
  e.moe_layer_freq = 1;
  e.num_experts = 256;
  e.num_experts_per_tok = 8;
  e.moe_intermediate_size = 2048;
  e.shared_expert_intermediate_size = 1 * 2048;  // n_shared_experts × moe_intermediate_size
  e.norm_topk_prob = true;
  e.use_routing_bias = true;  // topk_method noaux_tc
  e.router_groups = 8;        // n_group, applied under noaux_tc
  e.router_topk_groups = 4;   // topk_group
  e.scoring_func = "sigmoid";
  e.routed_scaling_factor = 2.5;
  e.kv_lora_rank = 512;
  e.q_lora_rank = 1536;
  e.qk_rope_head_dim = 64;
  e.qk_nope_head_dim = 128;
  e.v_head_dim = 128;
  e.index_n_heads = 64;
  e.index_head_dim = 128;
  e.index_topk = 2048;
  e.rms_norm_eps = 1e-6;
  const ModelConfig c = load("DeepSeek-V3.2.json");
  e.rope_type = "yarn";  // rope_scaling.type (legacy key), MLA's rotary part
  e.rope_factor = 40;
  e.rope_original_max_position = 4096;
  e.rope_beta_fast = 32;
  e.rope_beta_slow = 1;
  e.rope_mscale = 1.0;
  e.rope_mscale_all_dim = 1.0;
  EXPECT_CONFIG_EQ(c, e);
  EXPECT_EQ(c.head_dim, 192u);
  EXPECT_EQ(c.n_groups, 0u) << "n_group (router groups) is not Mamba's n_groups";
}

TEST(ConfigLoaderFiles, DeepSeek_V4_Flash) {
  ModelConfig e;
  e.hidden_size = 4096;
  e.vocab_size = 129280;
  e.num_attention_heads = 64;
  e.num_key_value_heads = 1;
  e.head_dim = 512;
  e.num_hidden_layers = 43;
  e.num_experts = 256;
  e.num_experts_per_tok = 6;
  e.moe_intermediate_size = 2048;
  e.shared_expert_intermediate_size = 2048;  // n_shared_experts 1 × 2048
  e.num_hash_layers = 3;
  e.norm_topk_prob = true;
  e.use_routing_bias = true;  // noaux_tc
  e.scoring_func = "sqrtsoftplus";
  e.routed_scaling_factor = 1.5;
  e.swiglu_limit = 10.0;
  e.q_lora_rank = 1024;
  e.qk_rope_head_dim = 64;
  e.o_groups = 8;
  e.o_lora_rank = 1024;
  e.hc_mult = 4;
  e.hc_sinkhorn_iters = 20;
  e.hc_eps = 1e-6;
  e.index_n_heads = 64;
  e.index_head_dim = 128;
  e.index_topk = 512;
  e.rms_norm_eps = 1e-6;
  const ModelConfig c = load("DeepSeek-V4-Flash.json");
  e.rope_type = "yarn";  // rope_scaling.type; the compress set's scaling (docs/findings.md)
  e.rope_factor = 16;
  e.rope_original_max_position = 65536;
  e.rope_beta_fast = 32;
  e.rope_beta_slow = 1;
  e.sliding_window = 128;  // no layer_types: every attention layer slides
  EXPECT_CONFIG_EQ(c, e);
  EXPECT_EQ(c.intermediate_size, 0u) << "the file has no intermediate_size";
  EXPECT_EQ(c.kv_lora_rank, 0u) << "V4 attention is modelled as MQA, not MLA";
}

// The pattern of the file, decomposed by hand: "M-M-M-M*-", nine times "M-M-M-M-M*-", and
// "M-M-M-M-M-" (9 + 99 + 10 = 118 layers).
std::vector<LayerType> nemotron_56b_layer_types() {
  using enum LayerType;
  std::vector<LayerType> t = {mamba, mlp, mamba, mlp, mamba, mlp, mamba, full_attention, mlp};
  for (int i = 0; i < 9; ++i)
    t.insert(t.end(), {mamba, mlp, mamba, mlp, mamba, mlp, mamba, mlp, mamba, full_attention, mlp});
  t.insert(t.end(), {mamba, mlp, mamba, mlp, mamba, mlp, mamba, mlp, mamba, mlp});
  return t;
}

TEST(ConfigLoaderFiles, Nemotron_H_56B) {
  ModelConfig e;
  e.hidden_size = 8192;
  e.intermediate_size = 32768;
  e.vocab_size = 131072;
  e.num_attention_heads = 64;
  e.num_key_value_heads = 8;
  e.head_dim = 128;  // attention_head_dim
  e.num_hidden_layers = 118;
  e.layer_types = nemotron_56b_layer_types();
  e.mamba_num_heads = 256;
  e.mamba_head_dim = 64;
  e.ssm_state_size = 256;
  e.n_groups = 8;
  e.conv_kernel = 4;
  e.rms_norm_eps = 1e-5;  // rms_norm_eps and layer_norm_epsilon, both 1e-05
  const ModelConfig c = load("Nemotron-H-56B-Base-8K.json");  // contains a bare Infinity
  EXPECT_CONFIG_EQ(c, e);
  ASSERT_EQ(c.layer_types.size(), 118u);
  EXPECT_EQ(std::count(c.layer_types.begin(), c.layer_types.end(), LayerType::mamba), 54);
  EXPECT_EQ(std::count(c.layer_types.begin(), c.layer_types.end(), LayerType::full_attention), 10);
  EXPECT_EQ(std::count(c.layer_types.begin(), c.layer_types.end(), LayerType::mlp), 54);
  EXPECT_EQ(c.layer_types[7], LayerType::full_attention);
  EXPECT_EQ(c.layer_types[106], LayerType::full_attention);
}

TEST(ConfigLoaderFiles, Qwen2_5_VL_7B) {
  ModelConfig e;
  e.hidden_size = 3584;
  e.intermediate_size = 18944;
  e.vocab_size = 152064;
  e.num_attention_heads = 28;
  e.num_key_value_heads = 4;
  e.head_dim = 3584 / 28;  // no head_dim: h / nq = 128
  e.num_hidden_layers = 28;
  e.mrope_section = {16, 24, 24};  // rope_scaling.mrope_section
  e.rms_norm_eps = 1e-6;
  e.rope_theta = 1e6;  // rope_scaling.type "mrope": the default type
  const ModelConfig c = load("Qwen2.5-VL-7B-Instruct.json");
  EXPECT_CONFIG_EQ(c, e);
  EXPECT_TRUE(c.uses_mrope());
  EXPECT_FALSE(c.mrope_interleaved);
}

TEST(ConfigLoaderFiles, Llama_3_1_8B) {
  ModelConfig e;
  e.hidden_size = 4096;
  e.intermediate_size = 14336;
  e.vocab_size = 128256;
  e.num_attention_heads = 32;
  e.num_key_value_heads = 8;
  e.head_dim = 4096 / 32;
  e.num_hidden_layers = 32;
  e.rms_norm_eps = 1e-5;
  e.rope_theta = 500000;
  e.rope_type = "llama3";
  e.rope_factor = 8;
  e.rope_low_freq_factor = 1;
  e.rope_high_freq_factor = 4;
  e.rope_original_max_position = 8192;
  const ModelConfig c = load("Meta-Llama-3.1-8B.json");
  EXPECT_CONFIG_EQ(c, e);
  EXPECT_FALSE(c.uses_mrope()) << "rope_scaling without mrope_section";
}

TEST(ConfigLoaderFiles, Mixtral_8x7B) {
  ModelConfig e;
  e.hidden_size = 4096;
  e.intermediate_size = 14336;
  e.vocab_size = 32000;
  e.num_attention_heads = 32;
  e.num_key_value_heads = 8;
  e.head_dim = 128;
  e.num_hidden_layers = 32;
  e.num_experts = 8;  // num_local_experts
  e.num_experts_per_tok = 2;
  e.moe_intermediate_size = 14336;  // absent on a MoE model: = intermediate_size
  e.rms_norm_eps = 1e-5;
  e.rope_theta = 1e6;
  e.sliding_window = 0;  // null
  EXPECT_CONFIG_EQ(load("Mixtral-8x7B-v0.1.json"), e);
}

TEST(ConfigLoaderFiles, GptOss_20B) {
  ModelConfig e;
  e.hidden_size = 2880;
  e.intermediate_size = 2880;
  e.vocab_size = 201088;
  e.num_attention_heads = 64;
  e.num_key_value_heads = 8;
  e.head_dim = 64;
  e.num_hidden_layers = 24;
  for (int i = 0; i < 12; ++i)
    e.layer_types.insert(e.layer_types.end(),
                         {LayerType::sliding_attention, LayerType::full_attention});
  e.num_experts = 32;         // num_local_experts
  e.num_experts_per_tok = 4;  // experts_per_token and num_experts_per_tok, both 4
  e.moe_intermediate_size = 2880;
  e.swiglu_limit = 7.0;
  e.rms_norm_eps = 1e-5;
  e.rope_theta = 150000;
  e.rope_type = "yarn";
  e.rope_factor = 32;
  e.rope_original_max_position = 4096;
  e.rope_beta_fast = 32;
  e.rope_beta_slow = 1;
  e.rope_truncate = false;
  e.sliding_window = 128;
  e.attn_sinks = true;  // model_type gpt_oss
  EXPECT_CONFIG_EQ(load("gpt-oss-20b.json"), e);
}

// head_dim 64 is taken as given although nope + rope = 256 (docs/spec/buffers.md §1.1):
// the corrected sizing holds MLA's q_b output (finding F9), the loader does not rewrite it.
TEST(ConfigLoaderFiles, Glm_5) {
  ModelConfig e;
  e.hidden_size = 6144;
  e.intermediate_size = 12288;
  e.vocab_size = 154880;
  e.num_attention_heads = 64;
  e.num_key_value_heads = 64;
  e.head_dim = 64;
  e.num_hidden_layers = 78;
  e.first_k_dense = 3;
  e.moe_layer_freq = 1;
  e.num_experts = 256;  // n_routed_experts
  e.num_experts_per_tok = 8;
  e.moe_intermediate_size = 2048;
  e.shared_expert_intermediate_size = 1 * 2048;  // n_shared_experts × moe_intermediate_size
  e.norm_topk_prob = true;
  e.use_routing_bias = true;  // topk_method noaux_tc
  e.scoring_func = "sigmoid";
  e.routed_scaling_factor = 2.5;
  e.kv_lora_rank = 512;
  e.q_lora_rank = 2048;
  e.qk_rope_head_dim = 64;
  e.qk_nope_head_dim = 192;
  e.v_head_dim = 256;
  e.index_n_heads = 32;
  e.index_head_dim = 128;
  e.index_topk = 2048;
  e.rms_norm_eps = 1e-5;
  e.rope_theta = 1e6;         // rope_parameters.rope_theta (transformers 5 layout)
  e.rope_interleaved = true;  // rope_interleave
  EXPECT_CONFIG_EQ(load("GLM-5.json"), e);
}

// The pattern of the file, decomposed by hand: five times "MEMEM*E", "MEMEMEM*E", "MEMEMEME"
// (35 + 9 + 8 = 52 layers: 23 Mamba-2, 23 MoE, 6 attention).
std::vector<LayerType> nemotron_3_nano_layer_types() {
  using enum LayerType;
  std::vector<LayerType> t;
  for (int i = 0; i < 5; ++i)
    t.insert(t.end(), {mamba, moe, mamba, moe, mamba, full_attention, moe});
  t.insert(t.end(), {mamba, moe, mamba, moe, mamba, moe, mamba, full_attention, moe});
  t.insert(t.end(), {mamba, moe, mamba, moe, mamba, moe, mamba, moe});
  return t;
}

TEST(ConfigLoaderFiles, Nemotron_3_Nano_30B) {
  ModelConfig e;
  e.hidden_size = 2688;
  e.intermediate_size = 1856;
  e.vocab_size = 131072;
  e.num_attention_heads = 32;
  e.num_key_value_heads = 2;
  e.head_dim = 128;
  e.num_hidden_layers = 52;
  e.layer_types = nemotron_3_nano_layer_types();
  e.num_experts = 128;  // n_routed_experts
  e.num_experts_per_tok = 6;
  e.moe_intermediate_size = 1856;
  // moe_shared_expert_intermediate_size, an explicit width: wins over n_shared_experts 1 ×
  // moe_intermediate_size 1856 (docs/spec/buffers.md §1.1)
  e.shared_expert_intermediate_size = 3712;
  e.norm_topk_prob = true;
  e.routed_scaling_factor = 2.5;
  e.mamba_num_heads = 64;
  e.mamba_head_dim = 64;
  e.ssm_state_size = 128;
  e.n_groups = 8;
  e.conv_kernel = 4;
  e.rms_norm_eps = 1e-5;  // layer_norm_epsilon and norm_eps, both 1e-05
  const ModelConfig c = load("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json");
  EXPECT_CONFIG_EQ(c, e);
  EXPECT_EQ(std::count(c.layer_types.begin(), c.layer_types.end(), LayerType::moe), 23);
}

// ---- the table of what was read (config --explain) ----

// The row of `uses` for `field` (or, for an ignored key, `key`) of `kind`; nullptr if none.
const ConfigKeyUse* row(const std::vector<ConfigKeyUse>& uses, ConfigKeyUse::Kind kind,
                        const std::string& key, const std::string& field) {
  for (const ConfigKeyUse& u : uses)
    if (u.kind == kind && u.key == key && u.field == field) return &u;
  return nullptr;
}

TEST(ConfigExplain, ReadDerivedDefaultedAndIgnored) {
  using Kind = ConfigKeyUse::Kind;
  json j = dense_json_with({{"n_routed_experts", 8},
                            {"moe_topk", 2},
                            {"n_shared_experts", 2},
                            {"moe_intermediate_size", 64},
                            {"topk_group", 4},
                            {"qk_head_dim", 99},
                            {"text_config", {{"hidden_size", 320}}}});
  const ExplainedConfig e = explain_config_json_text(j.dump(), "x.json");
  EXPECT_EQ(e.config, from_json(j));
  ASSERT_TRUE(row(e.uses, Kind::read, "n_routed_experts", "num_experts"));
  EXPECT_EQ(row(e.uses, Kind::read, "n_routed_experts", "num_experts")->note, "8");
  EXPECT_TRUE(row(e.uses, Kind::read, "moe_topk", "num_experts_per_tok"));
  EXPECT_TRUE(row(e.uses, Kind::read, "text_config.hidden_size", "hidden_size"));
  EXPECT_TRUE(row(e.uses, Kind::ignored, "hidden_size", ""));  // shadowed by text_config
  ASSERT_TRUE(row(e.uses, Kind::derived, "", "shared_expert_intermediate_size"));
  EXPECT_NE(row(e.uses, Kind::derived, "", "shared_expert_intermediate_size")->note.find("= 128"),
            std::string::npos);
  ASSERT_TRUE(row(e.uses, Kind::derived, "", "num_key_value_heads"));  // = nq, key absent
  ASSERT_TRUE(row(e.uses, Kind::derived, "", "head_dim"));             // = h / nq
  EXPECT_NE(row(e.uses, Kind::derived, "", "head_dim")->note.find("= 40"), std::string::npos);
  ASSERT_TRUE(row(e.uses, Kind::defaulted, "", "hc_sinkhorn_iters"));
  EXPECT_EQ(row(e.uses, Kind::defaulted, "", "hc_sinkhorn_iters")->note, "20");
  EXPECT_TRUE(row(e.uses, Kind::ignored, "topk_group", ""));
  EXPECT_TRUE(row(e.uses, Kind::ignored, "qk_head_dim", ""));
  EXPECT_FALSE(row(e.uses, Kind::defaulted, "", "num_experts"));  // read, so not defaulted
}

// An explicit shared width: n_shared_experts is listed as ignored, with the reason.
TEST(ConfigExplain, ExplicitSharedWidthShowsTheProductIgnored) {
  const ExplainedConfig e = explain_config_file(std::string(BUFFERLAB_CONFIGS_DIR) +
                                                "/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json");
  const ConfigKeyUse* shared = row(e.uses, ConfigKeyUse::Kind::ignored, "n_shared_experts", "");
  ASSERT_TRUE(shared);
  EXPECT_NE(shared->note.find("explicit shared-expert width wins"), std::string::npos);
  EXPECT_TRUE(row(e.uses, ConfigKeyUse::Kind::read, "moe_shared_expert_intermediate_size",
                  "shared_expert_intermediate_size"));
}

// The normalized form: every key is read under its own name, the rest defaulted.
TEST(ConfigExplain, NormalizedFormReadsEveryKeyByName) {
  const ExplainedConfig e = explain_config_json_text(
      R"({"bufferlab_config": 1, "config": {"hidden_size": 64, "vocab_size": 10,
          "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 8,
          "num_hidden_layers": 1, "intermediate_size": 32}})");
  EXPECT_TRUE(row(e.uses, ConfigKeyUse::Kind::read, "config.hidden_size", "hidden_size"));
  EXPECT_TRUE(row(e.uses, ConfigKeyUse::Kind::defaulted, "", "num_experts"));
  EXPECT_EQ(e.uses.size(), to_normalized_json(e.config).at("config").size());
}

// ---- mapping rules ----

TEST(ConfigLoaderMapping, TextConfigTakesPrecedence) {
  const ModelConfig c = from_json(dense_json_with(
      {{"hidden_size", 1},
       {"text_config", {{"hidden_size", 320}, {"num_hidden_layers", 5}, {"rms_norm_eps", 1e-5}}}}));
  EXPECT_EQ(c.hidden_size, 320u);
  EXPECT_EQ(c.num_hidden_layers, 5u);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.vocab_size, 1000u) << "top-level keys still apply";
  EXPECT_EQ(c.head_dim, 320u / 8) << "fallback from the text model's hidden size";
}

TEST(ConfigLoaderMapping, TextConfigOnly) {
  const json j = {{"model_type", "some_vl"},
                  {"vision_config", {{"hidden_size", 1280}}},
                  {"text_config", dense_json()}};
  EXPECT_EQ(from_json(j).hidden_size, 256u);
}

TEST(ConfigLoaderMapping, HeadDimFallsBackToHiddenOverHeads) {
  EXPECT_EQ(from_json(dense_json()).head_dim, 256u / 8);
}

TEST(ConfigLoaderMapping, HeadDimFromNemotronAttentionHeadDim) {
  EXPECT_EQ(from_json(dense_json_with({{"attention_head_dim", 48}})).head_dim, 48u);
}

TEST(ConfigLoaderMapping, HeadDimOfMlaIsNopePlusRope) {
  json j = dense_json();
  j["kv_lora_rank"] = 64;
  j["qk_nope_head_dim"] = 40;
  j["qk_rope_head_dim"] = 24;
  j["v_head_dim"] = 32;  // an MLA model must give it (no silent default)
  EXPECT_EQ(from_json(j).head_dim, 64u);
  j["head_dim"] = 80;  // an explicit head_dim wins
  EXPECT_EQ(from_json(j).head_dim, 80u);
}

TEST(ConfigLoaderMapping, KvHeadsDefaultToQueryHeads) {
  EXPECT_EQ(from_json(dense_json()).num_key_value_heads, 8u);
}

TEST(ConfigLoaderMapping, NullMeansDefault) {
  json j = dense_json();
  for (const char* key :
       {"num_key_value_heads", "full_attention_interval", "rms_norm_eps", "num_experts_per_tok",
        "rope_scaling", "routed_scaling_factor", "scoring_func", "head_dim", "layer_types",
        "text_config", "linear_conv_kernel_dim", "hc_sinkhorn_iters"})
    j[key] = nullptr;
  const ModelConfig c = from_json(j);
  ModelConfig e;
  e.hidden_size = 256;
  e.intermediate_size = 512;
  e.vocab_size = 1000;
  e.num_attention_heads = 8;
  e.num_key_value_heads = 8;
  e.head_dim = 32;
  e.num_hidden_layers = 2;
  EXPECT_CONFIG_EQ(c, e);
}

// Router groups apply under topk_method noaux_tc only; greedy and an absent method ignore
// n_group / topk_group (config --explain says so); the fields' own names always apply.
TEST(ConfigLoaderMapping, RouterGroupsOnlyUnderNoauxTc) {
  const auto with = [](nlohmann::json extra) {
    nlohmann::json keys = {{"num_experts", 16},
                           {"num_experts_per_tok", 4},
                           {"moe_intermediate_size", 64},
                           {"scoring_func", "sigmoid"},
                           {"n_group", 4},
                           {"topk_group", 2}};
    if (extra.is_object()) keys.update(extra);  // `{}` is null
    return from_json(dense_json_with(keys));
  };
  const ModelConfig noaux = with({{"topk_method", "noaux_tc"}});
  EXPECT_EQ(noaux.router_groups, 4u);
  EXPECT_EQ(noaux.router_topk_groups, 2u);
  EXPECT_TRUE(noaux.use_routing_bias);
  for (const ModelConfig& c : {with({{"topk_method", "greedy"}}), with({})}) {
    EXPECT_EQ(c.router_groups, 1u);
    EXPECT_EQ(c.router_topk_groups, 1u);
  }
  const ModelConfig named = with({{"router_groups", 8}, {"router_topk_groups", 3}});
  EXPECT_EQ(named.router_groups, 8u);
  EXPECT_EQ(named.router_topk_groups, 3u);
}

TEST(ConfigLoaderMapping, ExpertAliases) {
  ModelConfig c = from_json(dense_json_with({{"n_routed_experts", 16},
                                             {"moe_topk", 3},
                                             {"expert_ffn_hidden_size", 96},
                                             {"moe_shared_expert_intermediate_size", 112}}));
  EXPECT_EQ(c.num_experts, 16u);
  EXPECT_EQ(c.num_experts_per_tok, 3u);
  EXPECT_EQ(c.moe_intermediate_size, 96u);
  EXPECT_EQ(c.shared_expert_intermediate_size, 112u);
}

TEST(ConfigLoaderMapping, SharedExpertCountTimesExpertWidth) {
  const ModelConfig c = from_json(dense_json_with({{"num_experts", 16},
                                                   {"num_experts_per_tok", 2},
                                                   {"moe_intermediate_size", 96},
                                                   {"n_shared_experts", 2}}));
  EXPECT_EQ(c.shared_expert_intermediate_size, 192u);
}

// docs/spec/buffers.md §1.1: the first present explicit width wins over n_shared_experts ×
// moe_intermediate_size (Nemotron-3-Nano: 3712, not 1 × 1856).
TEST(ConfigLoaderMapping, ExplicitSharedExpertWidthWinsOverTheProduct) {
  json j = dense_json_with({{"num_experts", 16},
                            {"num_experts_per_tok", 2},
                            {"moe_intermediate_size", 96},
                            {"n_shared_experts", 2},
                            {"moe_shared_expert_intermediate_size", 100}});
  EXPECT_EQ(from_json(j).shared_expert_intermediate_size, 100u);
  j["shared_expert_intermediate_size"] = 120;  // the first spelling of §1.1 wins
  EXPECT_EQ(from_json(j).shared_expert_intermediate_size, 120u);
  j.erase("shared_expert_intermediate_size");
  j.erase("moe_shared_expert_intermediate_size");
  EXPECT_EQ(from_json(j).shared_expert_intermediate_size, 192u);  // 2 × 96
}

TEST(ConfigLoaderMapping, MoeWidthDefaultsToIntermediateOnlyOnMoeModels) {
  json j = dense_json();
  EXPECT_EQ(from_json(j).moe_intermediate_size, 0u);
  j["num_local_experts"] = 4;
  j["num_experts_per_tok"] = 2;
  EXPECT_EQ(from_json(j).moe_intermediate_size, 512u);
}

TEST(ConfigLoaderMapping, ExpertLayerKeys) {
  const ModelConfig c = from_json(dense_json_with({{"num_hidden_layers", 8},
                                                   {"num_experts", 4},
                                                   {"num_experts_per_tok", 2},
                                                   {"first_k_dense_replace", 1},
                                                   {"decoder_sparse_step", 2},
                                                   {"mlp_only_layers", {3}}}));
  EXPECT_EQ(c.first_k_dense, 1u);
  EXPECT_EQ(c.moe_layer_freq, 2u);
  EXPECT_EQ(c.mlp_only_layers, std::vector<uint64_t>{3});
}

// DeepSeek's moe_layer_freq: MoE iff i >= first_k_dense_replace and i % freq == 0.
TEST(ConfigLoaderMapping, DeepSeekMoeLayerFreqBecomesDenseLayerList) {
  const ModelConfig c = from_json(dense_json_with({{"num_hidden_layers", 7},
                                                   {"n_routed_experts", 4},
                                                   {"moe_topk", 2},
                                                   {"first_k_dense_replace", 1},
                                                   {"moe_layer_freq", 2}}));
  EXPECT_EQ(c.moe_layer_freq, 1u);
  EXPECT_EQ(c.mlp_only_layers, (std::vector<uint64_t>{1, 3, 5}));
  const std::vector<FfnKind> expected = {FfnKind::dense, FfnKind::dense, FfnKind::moe,
                                         FfnKind::dense, FfnKind::moe,   FfnKind::dense,
                                         FfnKind::moe};
  for (uint64_t i = 0; i < 7; ++i) EXPECT_EQ(c.ffn_kind(i), expected[i]) << "layer " << i;
}

TEST(ConfigLoaderMapping, RoutingBiasFromNoauxTcOrCorrectionBias) {
  json j = dense_json();
  EXPECT_FALSE(from_json(j).use_routing_bias);
  j["topk_method"] = "greedy";
  EXPECT_FALSE(from_json(j).use_routing_bias);
  j["topk_method"] = "noaux_tc";
  EXPECT_TRUE(from_json(j).use_routing_bias);
  j.erase("topk_method");
  j["e_score_correction_bias"] = json::array({0.0, 0.1});
  EXPECT_TRUE(from_json(j).use_routing_bias);
}

TEST(ConfigLoaderMapping, RouterGroupsAreIgnored) {
  const ModelConfig c = from_json(dense_json_with({{"n_group", 8}, {"topk_group", 4}}));
  EXPECT_EQ(c.n_groups, 0u);
  EXPECT_EQ(c.mamba_num_heads, 0u);
}

TEST(ConfigLoaderMapping, HybridOverridePattern) {
  json j = dense_json();
  j["num_hidden_layers"] = 5;
  j["num_experts"] = 4;
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 64;
  j["mamba_num_heads"] = 8;
  j["mamba_head_dim"] = 16;
  j["ssm_state_size"] = 16;
  j["n_groups"] = 2;
  j["conv_kernel"] = 4;
  j["hybrid_override_pattern"] = "M*-EM";
  using enum LayerType;
  EXPECT_EQ(from_json(j).layer_types,
            (std::vector<LayerType>{mamba, full_attention, mlp, moe, mamba}));
}

TEST(ConfigLoaderMapping, AttnGated) {
  json j = dense_json();
  EXPECT_FALSE(from_json(j).attn_gated);
  j["model_type"] = "qwen3_next";
  EXPECT_TRUE(from_json(j).attn_gated);
  j["attn_output_gate"] = false;
  EXPECT_FALSE(from_json(j).attn_gated);
  j["model_type"] = "qwen3";
  j["attn_output_gate"] = true;
  EXPECT_TRUE(from_json(j).attn_gated);
}

TEST(ConfigLoaderMapping, MropeFromRopeParameters) {
  json j = dense_json();
  j["head_dim"] = 128;  // the sections sum to rotary_dim / 2 (docs/spec/attention.md §1)
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"mrope_section", {24, 20, 20}}, {"mrope_interleaved", true}};
  const ModelConfig c = from_json(j);
  EXPECT_EQ(c.mrope_section, (std::array<uint64_t, 3>{24, 20, 20}));
  EXPECT_TRUE(c.mrope_interleaved);
}

TEST(ConfigLoaderMapping, EpsSpellings) {
  for (const char* key : {"rms_norm_eps", "layer_norm_epsilon", "norm_eps"}) {
    json j = dense_json();
    j[key] = 3e-5;
    EXPECT_EQ(from_json(j).rms_norm_eps, 3e-5) << key;
  }
}

TEST(ConfigLoaderMapping, SameNameKeys) {
  json j = dense_json();
  j["num_attention_heads"] = 6;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = 64;
  j.update(json{{"hc_mult", 4},
                {"hc_sinkhorn_iters", 7},
                {"hc_eps", 1e-4},
                {"hc_lowrank", 12},
                {"o_groups", 3},
                {"o_lora_rank", 40},
                {"num_hash_layers", 1},
                {"scoring_func", "sqrtsoftplus"},
                {"index_n_heads", 4},
                {"index_head_dim", 32},
                {"index_topk", 48},
                {"index_compress_ratio", 4},
                {"zero_expert_num", 2},
                {"moe_latent_size", 72},
                {"full_attention_interval", 3}});
  const ModelConfig c = from_json(j);
  EXPECT_EQ(c.hc_mult, 4u);
  EXPECT_EQ(c.hc_sinkhorn_iters, 7u);
  EXPECT_EQ(c.hc_eps, 1e-4);
  EXPECT_EQ(c.hc_lowrank, 12u);
  EXPECT_EQ(c.o_groups, 3u);
  EXPECT_EQ(c.o_lora_rank, 40u);
  EXPECT_EQ(c.num_hash_layers, 1u);
  EXPECT_EQ(c.scoring_func, "sqrtsoftplus");
  EXPECT_EQ(c.index_n_heads, 4u);
  EXPECT_EQ(c.index_head_dim, 32u);
  EXPECT_EQ(c.index_topk, 48u);
  EXPECT_EQ(c.index_compress_ratio, 4u);
  EXPECT_EQ(c.zero_expert_num, 2u);
  EXPECT_EQ(c.moe_latent_size, 72u);
  EXPECT_EQ(c.full_attention_interval, 3u);
}

TEST(ConfigLoaderMapping, UnknownKeysAreIgnored) {
  const json unknown = {{"some_future_key", {{"nested", {1, 2, 3}}}}, {"architectures", {"X"}}};
  EXPECT_EQ(from_json(dense_json_with(unknown)).hidden_size, 256u);
}

TEST(ConfigLoaderMapping, BareInfinityAndNanLiterals) {
  const std::string text = R"({
    "hidden_size": 256, "intermediate_size": 512, "vocab_size": 1000,
    "num_attention_heads": 8, "num_hidden_layers": 2,
    "swiglu_limit": Infinity,
    "time_step_limit": [0.0, Infinity, -Infinity, NaN],
    "name": "Infinity and NaN stay text inside strings \" Infinity"
  })";
  const ModelConfig c = config_from_json_text(text, "inf.json");
  EXPECT_TRUE(std::isinf(c.swiglu_limit) && c.swiglu_limit > 0);
}

TEST(ConfigLoaderMapping, IntegralFloatsAreIntegers) {
  EXPECT_EQ(from_json(dense_json_with({{"num_hidden_layers", 4.0}})).num_hidden_layers, 4u);
}

TEST(ConfigLoaderMapping, AgreeingAliasesAreAccepted) {
  const ModelConfig c = from_json(dense_json_with({{"num_local_experts", 4},
                                                   {"num_experts_per_tok", 2},
                                                   {"experts_per_token", 2},
                                                   {"rms_norm_eps", 1e-5},
                                                   {"layer_norm_epsilon", 1e-5}}));
  EXPECT_EQ(c.num_experts_per_tok, 2u);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
}

// ---- the normalized form ----

TEST(ConfigNormalized, Shape) {
  const json j = to_normalized_json(preset("tiny-mamba"));
  EXPECT_EQ(j.at("bufferlab_config"), 1);
  const json& c = j.at("config");
  EXPECT_EQ(c.at("hidden_size"), 136);
  EXPECT_EQ(c.at("scoring_func"), "softmax");
  EXPECT_EQ(c.at("rope_type"), "default");
  EXPECT_EQ(c.at("layer_types")[0], "mamba");
  EXPECT_EQ(c.at("mrope_section"), json::array({0, 0, 0}));
  EXPECT_TRUE(c.at("mlp_only_layers").is_array());
  // Every field of §1: the X-macro lists, scoring_func, rope_type and the three lists.
  size_t fields = 5;
#define BUFFERLAB_COUNT_FIELD(name, def) \
  ++fields;                              \
  EXPECT_TRUE(c.contains(#name)) << #name;
  BUFFERLAB_CONFIG_INT_FIELDS(BUFFERLAB_COUNT_FIELD)
  BUFFERLAB_CONFIG_BOOL_FIELDS(BUFFERLAB_COUNT_FIELD)
  BUFFERLAB_CONFIG_FLOAT_FIELDS(BUFFERLAB_COUNT_FIELD)
#undef BUFFERLAB_COUNT_FIELD
  EXPECT_EQ(c.size(), fields);
}

TEST(ConfigNormalized, RoundTripsEveryPreset) {
  for (const PresetInfo& p : list_presets()) {
    const ModelConfig c = preset(p.name);
    EXPECT_CONFIG_EQ(config_from_json_text(to_normalized_json(c).dump(), p.name), c) << p.name;
  }
}

TEST(ConfigNormalized, RoundTripsEveryFile) {
  for (const char* file :
       {"Qwen3-8B.json", "Qwen3-30B-A3B.json", "Qwen3-Next-80B-A3B-Thinking.json",
        "DeepSeek-V3.2.json", "DeepSeek-V4-Flash.json", "Nemotron-H-56B-Base-8K.json",
        "Qwen2.5-VL-7B-Instruct.json", "Meta-Llama-3.1-8B.json", "Mixtral-8x7B-v0.1.json",
        "gpt-oss-20b.json"}) {
    const ModelConfig c = load(file);
    EXPECT_CONFIG_EQ(config_from_json_text(to_normalized_json(c).dump(2), file), c) << file;
  }
}

TEST(ConfigNormalized, RoundTripsNonTrivialValues) {
  ModelConfig c = preset("tiny-moe");
  c.swiglu_limit = HUGE_VAL;  // +Infinity = no clamp, written as the string "Infinity"
  c.rms_norm_eps = 1.0 / 3.0;
  c.routed_scaling_factor = 2.718281828459045;
  c.mlp_only_layers = {0, 2};
  c.mrope_section = {16, 24, 24};
  c.mrope_interleaved = true;
  c.layer_types = {LayerType::sliding_attention, LayerType::full_attention,
                   LayerType::sliding_attention, LayerType::full_attention};
  const json j = to_normalized_json(c);
  EXPECT_EQ(j["config"]["swiglu_limit"], "Infinity");
  EXPECT_CONFIG_EQ(config_from_json_text(j.dump(), "rt"), c);
}

TEST(ConfigNormalized, MissingKeysTakeDefaults) {
  const json j = {{"bufferlab_config", 1},
                  {"config",
                   {{"hidden_size", 64},
                    {"intermediate_size", 100},
                    {"vocab_size", 10},
                    {"num_attention_heads", 2},
                    {"num_key_value_heads", 1},
                    {"head_dim", 32},
                    {"rms_norm_eps", nullptr}}}};
  ModelConfig e;
  e.hidden_size = 64;
  e.intermediate_size = 100;
  e.vocab_size = 10;
  e.num_attention_heads = 2;
  e.num_key_value_heads = 1;
  e.head_dim = 32;
  EXPECT_CONFIG_EQ(from_json(j), e);
}

TEST(ConfigNormalized, IsNotReadAsHuggingFace) {
  // In the normalized form head_dim is taken as written (no h / nq fallback) and
  // first_k_dense is our own name.
  json j = to_normalized_json(preset("tiny-mla"));
  j["config"]["first_k_dense"] = 3;
  EXPECT_EQ(from_json(j).first_k_dense, 3u);
}

}  // namespace
}  // namespace bufferlab
