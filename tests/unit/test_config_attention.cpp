// The attention fields of docs/spec/attention.md §1 as the config.json loader maps them: the
// RoPE base and partial factor from either place, the RoPE type under rope_type or the legacy
// `type` (mrope = default + MRoPE sections; other types refused by name), every scaling
// parameter, the pair layout, qk_norm and sinks by model type, the sliding window and the
// Mistral convention, Nemotron-H's ignored RoPE keys; and rope_params(), the mapping onto
// rope_table's parameters. The expected values are written by hand from the JSON given.
#include <array>
#include <cmath>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/core/rope.h"
#include "test_fixtures.h"

namespace bufferlab {
namespace {

using bufferlab::testing::dense_json;
using nlohmann::json;

// dense_json() (h 256, 8 heads of 32, 2 layers) with `patch` over it, loaded.
ModelConfig load_patched(const json& patch) {
  json j = dense_json();
  j.update(patch);
  return config_from_json_text(j.dump(), "test.json");
}

// The message of the bufferlab::Error loading the patched JSON throws ("" if none).
std::string load_error(const json& patch) {
  try {
    load_patched(patch);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- RoPE base and partial rotary factor ----

TEST(ConfigAttention, DefaultsWithoutRopeKeys) {
  const ModelConfig c = load_patched(json::object());
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_EQ(c.rotary_dim(), 32u);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.attn_sinks);
  EXPECT_EQ(c.sliding_window, 0u);
}

TEST(ConfigAttention, RopeThetaAtTheTopLevel) {
  EXPECT_EQ(load_patched({{"rope_theta", 500000.0}}).rope_theta, 500000.0);
}

TEST(ConfigAttention, RopeThetaAndPartialFactorInRopeParameters) {
  const ModelConfig c = load_patched(
      {{"rope_parameters",
        {{"rope_theta", 1e6}, {"rope_type", "default"}, {"partial_rotary_factor", 0.5}}}});
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.rotary_dim(), 16u);
}

TEST(ConfigAttention, PartialRotaryFactorAtTheTopLevel) {
  EXPECT_EQ(load_patched({{"partial_rotary_factor", 0.25}}).rotary_dim(), 8u);
}

TEST(ConfigAttention, TwoPlacesThatDisagreeAreAnError) {
  const std::string e =
      load_error({{"rope_theta", 1e6}, {"rope_parameters", {{"rope_theta", 5e5}}}});
  EXPECT_TRUE(contains(e, "conflicting values")) << e;
  EXPECT_TRUE(contains(e, "rope_parameters.rope_theta")) << e;
}

TEST(ConfigAttention, TwoPlacesThatAgreeAreRead) {
  EXPECT_EQ(
      load_patched({{"rope_theta", 1e6}, {"rope_parameters", {{"rope_theta", 1e6}}}}).rope_theta,
      1e6);
}

// ---- the RoPE type and its parameters ----

TEST(ConfigAttention, RopeTypeKey) {
  const ModelConfig c =
      load_patched({{"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}}});
  EXPECT_EQ(c.rope_type, "linear");
  EXPECT_EQ(c.rope_factor, 4.0);
}

TEST(ConfigAttention, LegacyTypeKey) {
  const ModelConfig c = load_patched({{"rope_scaling", {{"type", "linear"}, {"factor", 2.5}}}});
  EXPECT_EQ(c.rope_type, "linear");
  EXPECT_EQ(c.rope_factor, 2.5);
}

TEST(ConfigAttention, BothTypeKeysMustAgree) {
  const std::string e =
      load_error({{"rope_scaling", {{"type", "yarn"}, {"rope_type", "linear"}, {"factor", 2}}}});
  EXPECT_TRUE(contains(e, "conflicting values")) << e;
}

TEST(ConfigAttention, Llama3Parameters) {
  const ModelConfig c = load_patched({{"rope_parameters",
                                       {{"rope_type", "llama3"},
                                        {"rope_theta", 500000.0},
                                        {"factor", 8.0},
                                        {"low_freq_factor", 1.5},
                                        {"high_freq_factor", 3.0},
                                        {"original_max_position_embeddings", 8192}}}});
  EXPECT_EQ(c.rope_type, "llama3");
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_factor, 8.0);
  EXPECT_EQ(c.rope_low_freq_factor, 1.5);
  EXPECT_EQ(c.rope_high_freq_factor, 3.0);
  EXPECT_EQ(c.rope_original_max_position, 8192u);
}

TEST(ConfigAttention, YarnParameters) {
  const ModelConfig c = load_patched({{"rope_scaling",
                                       {{"rope_type", "yarn"},
                                        {"factor", 40},
                                        {"original_max_position_embeddings", 4096},
                                        {"beta_fast", 16},
                                        {"beta_slow", 2},
                                        {"mscale", 0.7},
                                        {"mscale_all_dim", 0.9},
                                        {"attention_factor", 1.25},
                                        {"truncate", false}}}});
  EXPECT_EQ(c.rope_type, "yarn");
  EXPECT_EQ(c.rope_factor, 40.0);
  EXPECT_EQ(c.rope_original_max_position, 4096u);
  EXPECT_EQ(c.rope_beta_fast, 16.0);
  EXPECT_EQ(c.rope_beta_slow, 2.0);
  EXPECT_EQ(c.rope_mscale, 0.7);
  EXPECT_EQ(c.rope_mscale_all_dim, 0.9);
  EXPECT_EQ(c.rope_attention_factor, 1.25);
  EXPECT_FALSE(c.rope_truncate);
}

TEST(ConfigAttention, YarnWithoutOriginalContextUsesMaxPositionEmbeddings) {
  const ModelConfig c = load_patched(
      {{"max_position_embeddings", 32768}, {"rope_scaling", {{"type", "yarn"}, {"factor", 4}}}});
  EXPECT_EQ(c.rope_original_max_position, 32768u);
}

TEST(ConfigAttention, MropeIsTheDefaultTypeWithSections) {
  const ModelConfig c =
      load_patched({{"rope_scaling", {{"type", "mrope"}, {"mrope_section", {4, 6, 6}}}}});
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_TRUE(c.uses_mrope());
  EXPECT_EQ(c.mrope_section, (std::array<uint64_t, 3>{4, 6, 6}));
}

// transformers 4.x wrote both keys for Qwen2-VL: "type": "mrope" and "rope_type": "default".
TEST(ConfigAttention, MropeAndDefaultTogetherAgree) {
  const ModelConfig c =
      load_patched({{"rope_scaling",
                     {{"type", "mrope"}, {"rope_type", "default"}, {"mrope_section", {4, 6, 6}}}}});
  EXPECT_EQ(c.rope_type, "default");
}

TEST(ConfigAttention, MropeWithoutSectionsIsAnError) {
  const std::string e = load_error({{"rope_scaling", {{"type", "mrope"}}}});
  EXPECT_TRUE(contains(e, "rope_scaling.type = \"mrope\" without mrope_section")) << e;
}

TEST(ConfigAttention, OtherRopeTypesAreRefusedByName) {
  for (const char* type : {"dynamic", "longrope", "su", "ntk"}) {
    SCOPED_TRACE(type);
    const std::string e = load_error({{"rope_scaling", {{"rope_type", type}, {"factor", 2}}}});
    EXPECT_TRUE(contains(e, std::string("rope_scaling.rope_type = \"") + type + "\"")) << e;
    EXPECT_TRUE(contains(e, "not supported")) << e;
  }
  const std::string legacy = load_error({{"rope_parameters", {{"type", "dynamic"}}}});
  EXPECT_TRUE(contains(legacy, "rope_parameters.type = \"dynamic\"")) << legacy;
}

TEST(ConfigAttention, RopeInterleave) {
  EXPECT_TRUE(load_patched({{"rope_interleave", true}}).rope_interleaved);
  EXPECT_FALSE(load_patched({{"rope_interleave", false}}).rope_interleaved);
}

// ---- qk_norm and sinks by model type ----

TEST(ConfigAttention, QkNormForTheListedModelTypes) {
  for (const char* type : {"qwen3", "qwen3_moe", "qwen3_next", "qwen3_vl", "qwen3_vl_text",
                           "qwen3_vl_moe", "qwen3_vl_moe_text"}) {
    SCOPED_TRACE(type);
    json patch = {{"model_type", type}};
    if (std::string(type) == "qwen3_next") patch["attn_output_gate"] = false;
    EXPECT_TRUE(load_patched(patch).qk_norm);
  }
  for (const char* type : {"llama", "qwen2", "qwen2_5_vl", "mixtral", "gpt_oss", "olmo2"}) {
    SCOPED_TRACE(type);
    EXPECT_FALSE(load_patched({{"model_type", type}}).qk_norm);
  }
}

TEST(ConfigAttention, QkNormByItsOwnNameWins) {
  EXPECT_FALSE(load_patched({{"model_type", "qwen3"}, {"qk_norm", false}}).qk_norm);
  EXPECT_TRUE(load_patched({{"model_type", "llama"}, {"qk_norm", true}}).qk_norm);
}

TEST(ConfigAttention, SinksForGptOss) {
  EXPECT_TRUE(load_patched({{"model_type", "gpt_oss"}}).attn_sinks);
  EXPECT_FALSE(load_patched({{"model_type", "llama"}}).attn_sinks);
}

// ---- sliding window ----

TEST(ConfigAttention, NullWindowIsNone) {
  EXPECT_EQ(load_patched({{"sliding_window", nullptr}}).sliding_window, 0u);
}

TEST(ConfigAttention, WindowWithoutLayerTypesSlidesEveryLayer) {
  const ModelConfig c = load_patched({{"sliding_window", 4096}});
  EXPECT_EQ(c.sliding_window, 4096u);
  EXPECT_TRUE(c.layer_types.empty());
  EXPECT_EQ(c.mixer_kind(0), MixerKind::sliding);
  EXPECT_EQ(c.mixer_kind(1), MixerKind::sliding);
}

TEST(ConfigAttention, WindowWithLayerTypesSlidesTheirSlidingLayers) {
  const ModelConfig c = load_patched(
      {{"sliding_window", 128}, {"layer_types", {"sliding_attention", "full_attention"}}});
  EXPECT_EQ(c.mixer_kind(0), MixerKind::sliding);
  EXPECT_EQ(c.mixer_kind(1), MixerKind::full);
}

TEST(ConfigAttention, UseSlidingWindowFalseMeansNoWindow) {
  const ModelConfig c = load_patched({{"sliding_window", 32768}, {"use_sliding_window", false}});
  EXPECT_EQ(c.sliding_window, 0u);
  EXPECT_EQ(c.mixer_kind(0), MixerKind::full);
}

TEST(ConfigAttention, QwenMaxWindowLayersIsRefusedWithoutLayerTypes) {
  const std::string e = load_error(
      {{"sliding_window", 4096}, {"use_sliding_window", true}, {"max_window_layers", 1}});
  EXPECT_TRUE(contains(e, "max_window_layers = 1")) << e;
}

// ---- Nemotron-H ----

TEST(ConfigAttention, NemotronHRopeKeysAreIgnoredWithTheReason) {
  const ExplainedConfig e = explain_config_json_text(
      [] {
        json j = dense_json();
        j.update({{"model_type", "nemotron_h"}, {"rope_theta", 5e5}});
        return j.dump();
      }(),
      "x.json");
  EXPECT_EQ(e.config.rope_theta, 10000.0);
  bool ignored = false;
  for (const ConfigKeyUse& u : e.uses)
    ignored = ignored || (u.kind == ConfigKeyUse::Kind::ignored && u.key == "rope_theta" &&
                          contains(u.note, "no RoPE"));
  EXPECT_TRUE(ignored);
}

// ---- the normalized form ----

TEST(ConfigAttention, NormalizedFormCarriesEveryAttentionField) {
  const ModelConfig c = preset("gpt-oss-20b");
  const json j = to_normalized_json(c);
  EXPECT_EQ(j.at("config").at("rope_type"), "yarn");
  EXPECT_EQ(j.at("config").at("sliding_window"), 128);
  EXPECT_EQ(j.at("config").at("attn_sinks"), true);
  EXPECT_EQ(j.at("config").at("rope_truncate"), false);
  EXPECT_EQ(config_from_json_text(j.dump()), c);
}

// ---- rope_params: the config onto rope_table's parameters ----

TEST(RopeParamsOfConfig, EveryFieldIsMapped) {
  ModelConfig c = load_patched({{"rope_scaling",
                                 {{"rope_type", "yarn"},
                                  {"factor", 40},
                                  {"original_max_position_embeddings", 4096},
                                  {"beta_fast", 16},
                                  {"beta_slow", 2},
                                  {"mscale", 0.7},
                                  {"mscale_all_dim", 0.9},
                                  {"attention_factor", 1.25},
                                  {"truncate", false}}},
                                {"rope_theta", 20000.0},
                                {"partial_rotary_factor", 0.5}});
  const RopeParams p = rope_params(c);
  EXPECT_EQ(p.type, RopeType::yarn);
  EXPECT_EQ(p.theta, 20000.0);
  EXPECT_EQ(p.rotary_dim, 16u);
  EXPECT_EQ(p.factor, 40.0);
  EXPECT_EQ(p.original_max_position, 4096.0);
  EXPECT_EQ(p.beta_fast, 16.0);
  EXPECT_EQ(p.beta_slow, 2.0);
  EXPECT_EQ(p.mscale, 0.7);
  EXPECT_EQ(p.mscale_all_dim, 0.9);
  EXPECT_EQ(p.attention_factor, std::optional<double>(1.25));
  EXPECT_FALSE(p.truncate);
  c.rope_attention_factor = 0;  // absent: derived from mscale by rope_table
  EXPECT_EQ(rope_params(c).attention_factor, std::nullopt);
}

TEST(RopeParamsOfConfig, Llama3FrequencyFactors) {
  const RopeParams p = rope_params(preset("llama-3.1-8b"));
  EXPECT_EQ(p.type, RopeType::llama3);
  EXPECT_EQ(p.low_freq_factor, 1.0);
  EXPECT_EQ(p.high_freq_factor, 4.0);
  EXPECT_EQ(p.original_max_position, 8192.0);
  EXPECT_EQ(p.rotary_dim, 128u);
}

// MLA rotates qk_rope_head_dim of its head (DeepSeek-V3.2: 64 of nope 128 + rope 64).
TEST(RopeParamsOfConfig, MlaRotatesItsRopePart) {
  const ModelConfig c = preset("deepseek-v3.2");
  EXPECT_EQ(c.head_dim, 192u);
  EXPECT_EQ(rope_params(c).rotary_dim, 64u);
}

TEST(RopeParamsOfConfig, PartialRotaryOfQwen3Next) {
  EXPECT_EQ(rope_params(preset("qwen3-next-80b")).rotary_dim, 64u);  // 256 · 0.25
}

TEST(RopeParamsOfConfig, InvalidConfigIsRefusedAtTheMapping) {
  ModelConfig c = preset("tiny-dense");
  c.partial_rotary_factor = 1.5;
  EXPECT_THROW(rope_params(c), Error);
}

}  // namespace
}  // namespace bufferlab
