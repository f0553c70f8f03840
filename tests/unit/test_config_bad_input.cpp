// Bad input never crashes and never passes silently: malformed or wrongly typed config.json,
// every validation rule of docs/spec/buffers.md §1 (one test each), overflowing sizes, bad files,
// unknown presets. Each test asserts a bufferlab::Error and what its message names.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

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

// Runs `f`, expecting a bufferlab::Error whose message contains every fragment.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "no bufferlab::Error thrown";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message: " << message << "\nmissing: " << fragment;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a bufferlab::Error: " << e.what();
  }
}

void expect_invalid(const ModelConfig& c, std::initializer_list<std::string> fragments) {
  expect_error([&] { c.validate(); }, fragments);
}

void expect_bad_text(const std::string& text, std::initializer_list<std::string> fragments) {
  expect_error([&] { config_from_json_text(text, "bad.json"); }, fragments);
}

void expect_bad_json(const json& j, std::initializer_list<std::string> fragments) {
  expect_bad_text(j.dump(), fragments);
}

// dense_json() with the keys of `patch` set over it fails to load, naming every fragment.
void expect_bad_patch(const json& patch, std::initializer_list<std::string> fragments) {
  SCOPED_TRACE("dense_json() patched with " + patch.dump());
  json j = dense_json();
  j.update(patch);
  expect_bad_json(j, fragments);
}

// `c` after `change` fails validate(), naming every fragment.
template <class Change>
void expect_invalid_after(ModelConfig c, Change change,
                          std::initializer_list<std::string> fragments) {
  change(c);
  expect_invalid(c, fragments);
}

std::string write_temp_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/bufferlab_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// ---- JSON text and types ----

TEST(ConfigBadJson, MalformedJsonNamesLineAndColumn) {
  expect_bad_text("{\n  \"hidden_size\": 4096,\n  \"vocab_size\": ,\n}",
                  {"bad.json: ", "malformed JSON", "line 3, column 17"});
}

TEST(ConfigBadJson, PositionsCountTheOriginalText) {
  // Quoting the bare NaN/Infinity before parsing must not shift the reported column.
  expect_bad_text("{\"a\": NaN, \"b\": Infinity, \"c\": x}", {"line 1, column 32"});
}

TEST(ConfigBadJson, TruncatedJson) { expect_bad_text("{\"hidden_size\": 4096", {"malformed"}); }

TEST(ConfigBadJson, EmptyText) { expect_bad_text("", {"bad.json", "empty"}); }

TEST(ConfigBadJson, WhitespaceOnly) { expect_bad_text(" \n\t ", {"empty"}); }

TEST(ConfigBadJson, TopLevelArray) { expect_bad_text("[1, 2, 3]", {"top level", "[1,2,3]"}); }

TEST(ConfigBadJson, TopLevelNumber) { expect_bad_text("42", {"top level", "42"}); }

TEST(ConfigBadJson, NumberOutOfDoubleRange) {
  expect_bad_text("{\"hidden_size\": 1e999}", {"malformed JSON", "1e999"});
}

TEST(ConfigBadJson, DeeplyNestedValueIsNoCrash) {
  const std::string text =
      R"({"hidden_size": 256, "x": )" + std::string(20000, '[') + std::string(20000, ']') + "}";
  expect_bad_text(text, {"nested deeper than 256 levels", "line 1, column 282"});
}

TEST(ConfigBadJson, BracketsInStringsDoNotCountAsNesting) {
  json j = {{"hidden_size", 256},     {"intermediate_size", 512},
            {"vocab_size", 1000},     {"num_attention_heads", 8},
            {"num_hidden_layers", 2}, {"note", std::string(1000, '[')}};
  EXPECT_NO_THROW(config_from_json_text(j.dump(), "ok.json"));
}

TEST(ConfigBadJson, MissingHiddenSize) {
  json j = dense_json();
  j.erase("hidden_size");
  expect_bad_json(j, {"missing required key", "hidden_size"});
}

TEST(ConfigBadJson, MissingVocabSize) {
  json j = dense_json();
  j.erase("vocab_size");
  expect_bad_json(j, {"missing required key", "vocab_size"});
}

TEST(ConfigBadJson, NullRequiredKeyIsMissing) {
  expect_bad_patch({{"num_attention_heads", nullptr}},
                   {"missing required key", "num_attention_heads"});
}

TEST(ConfigBadJson, NegativeNumber) {
  expect_bad_patch({{"vocab_size", -5}}, {"vocab_size = -5", "non-negative integer", "negative"});
}

TEST(ConfigBadJson, StringTypedNumber) {
  expect_bad_patch({{"hidden_size", "4096"}}, {"hidden_size = \"4096\"", "a string"});
}

TEST(ConfigBadJson, FractionalInteger) {
  expect_bad_patch({{"num_attention_heads", 7.5}}, {"num_attention_heads = 7.5", "fractional"});
}

TEST(ConfigBadJson, IntegerTooLarge) {
  expect_bad_text(
      R"({"hidden_size": 18446744073709551616, "vocab_size": 1, "num_attention_heads": 1,
          "num_hidden_layers": 1})",
      {"hidden_size = ", "too large"});
}

TEST(ConfigBadJson, BooleanWhereANumberBelongs) {
  expect_bad_patch({{"num_hidden_layers", true}}, {"num_hidden_layers = true", "a boolean"});
}

TEST(ConfigBadJson, NumberWhereABooleanBelongs) {
  expect_bad_patch({{"norm_topk_prob", 1}}, {"norm_topk_prob = 1", "true or false"});
}

TEST(ConfigBadJson, StringWhereAFloatBelongs) {
  expect_bad_patch({{"rms_norm_eps", "1e-6"}}, {"rms_norm_eps = \"1e-6\"", "a number"});
}

TEST(ConfigBadJson, NumberWhereAStringBelongs) {
  expect_bad_patch({{"scoring_func", 3}}, {"scoring_func = 3", "a string"});
}

TEST(ConfigBadJson, WrongTypeInsideTextConfigNamesThePath) {
  expect_bad_patch({{"text_config", {{"hidden_size", "wide"}}}},
                   {"text_config.hidden_size = \"wide\""});
}

TEST(ConfigBadJson, TextConfigNotAnObject) {
  expect_bad_patch({{"text_config", 5}}, {"text_config = 5", "an object"});
}

TEST(ConfigBadJson, TopKExceedsExperts) {
  expect_bad_patch({{"num_experts", 8}, {"num_experts_per_tok", 12}},
                   {"bad.json: ", "num_experts_per_tok = 12 exceeds num_experts = 8"});
}

// ---- router groups (docs/spec/numerics.md §2, docs/spec/buffers.md §1.1) ----

json grouped(json extra) {
  json j = {{"num_experts", 16},
            {"num_experts_per_tok", 4},
            {"moe_intermediate_size", 64},
            {"scoring_func", "sigmoid"},
            {"topk_method", "noaux_tc"},
            {"n_group", 4},
            {"topk_group", 2}};
  if (extra.is_object()) j.update(extra);  // `{}` is null
  return j;
}

TEST(ConfigBadJson, RouterGroupsMustDivideTheExperts) {
  expect_bad_patch(grouped({{"n_group", 3}}),
                   {"router_groups = 3 does not divide num_experts = 16"});
}

TEST(ConfigBadJson, RouterGroupsHoldTwoExpertsAtLeast) {
  expect_bad_patch(grouped({{"n_group", 16}, {"topk_group", 8}}),
                   {"router_groups = 16", "fewer than 2 experts per group"});
}

TEST(ConfigBadJson, KeptGroupsAtMostTheGroups) {
  expect_bad_patch(grouped({{"topk_group", 5}}),
                   {"router_topk_groups = 5 exceeds router_groups = 4"});
  expect_bad_patch(grouped({{"topk_group", 0}}), {"router_topk_groups = 0"});
}

TEST(ConfigBadJson, TopKWithinTheKeptGroups) {
  expect_bad_patch(grouped({{"topk_group", 1}, {"num_experts_per_tok", 5}}),
                   {"num_experts_per_tok = 5 exceeds the 4 experts of the kept groups"});
}

TEST(ConfigBadJson, ZeroExpertsHaveNoRouterGroup) {
  expect_bad_patch(grouped({{"zero_expert_num", 2}}),
                   {"zero_expert_num = 2 with router_groups = 4"});
}

TEST(ConfigBadJson, GroupLimitedGreedyIsRefusedByName) {
  expect_bad_patch(grouped({{"topk_method", "group_limited_greedy"}}),
                   {"topk_method = \"group_limited_greedy\"", "DeepSeek-V2", "not supported"});
}

TEST(ConfigBadJson, UnknownTopKMethodIsAnError) {
  expect_bad_patch(grouped({{"topk_method", "aux_free"}}),
                   {"topk_method = \"aux_free\" is not one of noaux_tc, greedy"});
}

TEST(ConfigBadJson, NGroupWithoutTopKGroupHasNoDefault) {
  json j = grouped({});
  j.erase("topk_group");
  expect_bad_patch(j, {"n_group = 4 without topk_group"});
}

TEST(ConfigBadJson, ConflictingAliases) {
  expect_bad_patch({{"num_experts", 8}, {"num_experts_per_tok", 4}, {"experts_per_token", 2}},
                   {"conflicting", "num_experts_per_tok = 4", "experts_per_token = 2"});
}

// ---- a mechanism's sizing keys have no silent default (issue 15) ----

// Each complete mechanism loads; without any spelling of one of its keys it is an Error naming
// the trigger, the missing field and every spelling the loader knows.
struct MechanismCase {
  const char* name;
  json keys;                       // dense_json() plus these is a valid model
  const char* missing;             // the key erased
  std::vector<std::string> names;  // fragments of the message
};

std::vector<MechanismCase> mechanism_cases() {
  const json moe = {{"num_experts", 8}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 64}};
  const json mamba = {{"mamba_num_heads", 8},
                      {"mamba_head_dim", 16},
                      {"ssm_state_size", 16},
                      {"n_groups", 2},
                      {"conv_kernel", 4}};
  const json gdn = {{"linear_num_key_heads", 2},   {"linear_key_head_dim", 32},
                    {"linear_num_value_heads", 4}, {"linear_value_head_dim", 32},
                    {"linear_conv_kernel_dim", 4}, {"full_attention_interval", 2}};
  const json mla = {
      {"kv_lora_rank", 64}, {"qk_nope_head_dim", 32}, {"qk_rope_head_dim", 16}, {"v_head_dim", 32}};
  const json indexer = {{"index_n_heads", 4}, {"index_head_dim", 32}, {"index_topk", 64}};
  const json grouped_o = {{"o_groups", 2}, {"o_lora_rank", 64}};
  return {
      {"MoE top-k",
       moe,
       "num_experts_per_tok",
       {"num_experts = 8", "MoE", "num_experts_per_tok, moe_topk, experts_per_token"}},
      {"Mamba-2 head dim", mamba, "mamba_head_dim", {"mamba_num_heads = 8", "mamba_head_dim"}},
      {"Mamba-2 state", mamba, "ssm_state_size", {"Mamba-2", "ssm_state_size"}},
      {"Mamba-2 groups", mamba, "n_groups", {"Mamba-2", "n_groups"}},
      {"Mamba-2 conv", mamba, "conv_kernel", {"Mamba-2", "conv_kernel"}},
      {"GDN conv", gdn, "linear_conv_kernel_dim", {"GDN", "linear_conv_kernel_dim"}},
      {"GDN layer pattern",
       gdn,
       "full_attention_interval",
       {"GDN", "full_attention_interval, layer_types, hybrid_override_pattern"}},
      {"MLA nope", mla, "qk_nope_head_dim", {"kv_lora_rank = 64", "MLA", "qk_nope_head_dim"}},
      {"MLA rope", mla, "qk_rope_head_dim", {"MLA", "qk_rope_head_dim"}},
      {"MLA v", mla, "v_head_dim", {"MLA", "v_head_dim"}},
      {"indexer head dim", indexer, "index_head_dim", {"index_n_heads = 4", "index_head_dim"}},
      {"indexer top-k", indexer, "index_topk", {"indexer", "index_topk"}},
      {"grouped O rank", grouped_o, "o_lora_rank", {"o_groups = 2", "o_lora_rank"}},
  };
}

TEST(ConfigBadJson, MechanismWithoutASizingKeyIsAnError) {
  for (const MechanismCase& m : mechanism_cases()) {
    SCOPED_TRACE(m.name);
    json j = dense_json();
    j.update(m.keys);
    ASSERT_NO_THROW(config_from_json_text(j.dump(), "bad.json"));
    j.erase(m.missing);
    try {
      config_from_json_text(j.dump(), "bad.json");
      ADD_FAILURE() << "no Error without " << m.missing;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("bad.json: "), std::string::npos) << message;
      EXPECT_NE(message.find("no default"), std::string::npos) << message;
      for (const std::string& fragment : m.names)
        EXPECT_NE(message.find(fragment), std::string::npos)
            << message << "\nmissing: " << fragment;
    }
    j[m.missing] = nullptr;  // null means "the default", and there is none
    EXPECT_THROW(config_from_json_text(j.dump(), "bad.json"), Error);
  }
}

// The issue's case: a MoE model whose top-k key the loader does not know is never top_k 1.
TEST(ConfigBadJson, UnknownTopKSpellingIsNotASilentOne) {
  expect_bad_patch({{"num_experts", 64}, {"top_k_experts", 8}},
                   {"num_experts = 64", "num_experts_per_tok is not given",
                    "num_experts_per_tok, moe_topk, experts_per_token"});
}

// The §1.1 defaults stay: head_dim, num_key_value_heads and (on a MoE model)
// moe_intermediate_size may be absent; q_lora_rank absent is MLA without q compression.
TEST(ConfigBadJson, DocumentedDefaultsAreNoError) {
  json j = dense_json();
  j.update({{"num_experts", 8}, {"num_experts_per_tok", 2}});
  j.update({{"kv_lora_rank", 64},
            {"qk_nope_head_dim", 32},
            {"qk_rope_head_dim", 16},
            {"v_head_dim", 32}});
  EXPECT_NO_THROW(config_from_json_text(j.dump(), "ok.json"));
}

TEST(ConfigBadJson, UnknownLayerType) {
  expect_bad_patch({{"layer_types", {"full_attention", "chunked_attention"}}},
                   {"layer_types[1] = \"chunked_attention\"", "unknown layer type"});
}

TEST(ConfigBadJson, BadHybridPatternCharacter) {
  expect_bad_patch({{"hybrid_override_pattern", "M*X"}}, {"hybrid_override_pattern[2] = 'X'"});
}

TEST(ConfigBadJson, LayerTypesAndHybridPatternTogether) {
  expect_bad_patch(
      {{"hybrid_override_pattern", "**"}, {"layer_types", {"full_attention", "full_attention"}}},
      {"layer_types", "hybrid_override_pattern"});
}

TEST(ConfigBadJson, MropeSectionOfWrongLength) {
  expect_bad_patch({{"rope_scaling", {{"type", "mrope"}, {"mrope_section", {16, 24}}}}},
                   {"rope_scaling.mrope_section = [16,24]", "3 non-negative integers"});
}

TEST(ConfigBadJson, RopeScalingNotAnObject) {
  expect_bad_patch({{"rope_scaling", "yarn"}}, {"rope_scaling = \"yarn\"", "an object"});
}

TEST(ConfigBadJson, OverflowingProductFromJson) {
  json j = dense_json();
  j["num_attention_heads"] = uint64_t{1} << 30;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = uint64_t{1} << 40;
  expect_bad_json(j, {"num_attention_heads * head_dim overflows 64 bits",
                      "num_attention_heads = 1073741824", "head_dim = 1099511627776"});
}

// ---- the normalized form ----

json normalized() { return to_normalized_json(preset("tiny-dense")); }

// normalized() with the keys of `patch` set over its "config" fails to load, naming every
// fragment.
void expect_bad_config_patch(const json& patch, std::initializer_list<std::string> fragments) {
  SCOPED_TRACE("normalized() config patched with " + patch.dump());
  json j = normalized();
  j["config"].update(patch);
  expect_bad_json(j, fragments);
}

TEST(ConfigBadNormalized, UnknownKeyInConfig) {
  expect_bad_config_patch({{"hiden_size", 64}}, {"unknown key \"hiden_size\""});
}

TEST(ConfigBadNormalized, HuggingFaceSpellingIsUnknown) {
  expect_bad_config_patch({{"first_k_dense_replace", 1}},
                          {"unknown key \"first_k_dense_replace\""});
}

TEST(ConfigBadNormalized, UnknownTopLevelKey) {
  json j = normalized();
  j["derived"] = json::object();
  expect_bad_json(j, {"unknown top-level key \"derived\""});
}

TEST(ConfigBadNormalized, UnsupportedVersion) {
  json j = normalized();
  j["bufferlab_config"] = 2;
  expect_bad_json(j, {"bufferlab_config = 2", "unsupported version"});
  j["bufferlab_config"] = "1";
  expect_bad_json(j, {"bufferlab_config = \"1\"", "unsupported version"});
}

TEST(ConfigBadNormalized, MissingConfigObject) {
  expect_bad_json({{"bufferlab_config", 1}}, {"without a \"config\" object"});
  expect_bad_json({{"bufferlab_config", 1}, {"config", {1, 2}}}, {"config = [1,2]", "object"});
}

TEST(ConfigBadNormalized, WrongTypes) {
  expect_bad_config_patch({{"head_dim", -1}}, {"config.head_dim = -1"});
  expect_bad_config_patch({{"attn_gated", "yes"}}, {"config.attn_gated = \"yes\""});
  expect_bad_config_patch({{"layer_types", {"full"}}}, {"config.layer_types[0] = \"full\""});
  expect_bad_config_patch({{"mlp_only_layers", 3}}, {"config.mlp_only_layers = 3"});
}

// The normalized form applies the same rule as the Hugging Face form: a MoE config that
// leaves num_experts_per_tok out (or null) is refused, never read as a top-k of 1.
TEST(ConfigBadNormalized, MoEWithoutTopKIsNotASilentOne) {
  json j = to_normalized_json(preset("tiny-moe"));
  j["config"].erase("num_experts_per_tok");
  expect_bad_json(j, {"num_experts = ", "num_experts_per_tok is not given"});
  j["config"]["num_experts_per_tok"] = nullptr;
  expect_bad_json(j, {"num_experts_per_tok is not given"});
}

TEST(ConfigBadNormalized, IsValidated) {
  expect_bad_config_patch({{"vocab_size", 0}}, {"vocab_size = 0"});
}

// ---- files and presets ----

TEST(ConfigBadFile, EmptyFile) {
  const std::string path = write_temp_file("empty.json", "");
  expect_error([&] { load_config_file(path); }, {path + ": ", "empty"});
}

TEST(ConfigBadFile, MissingFile) {
  expect_error([] { load_config_file("/nonexistent/dir/config.json"); },
               {"/nonexistent/dir/config.json", "cannot open"});
}

TEST(ConfigBadFile, Directory) {
  expect_error([] { load_config_file(::testing::TempDir()); }, {"is a directory"});
}

TEST(ConfigBadFile, MalformedFileNamesTheFile) {
  const std::string path = write_temp_file("truncated.json", "{\"hidden_size\": 4");
  expect_error([&] { load_config_file(path); }, {path + ": ", "malformed JSON", "line 1"});
}

TEST(ConfigBadPreset, UnknownPresetListsTheKnownNames) {
  expect_error([] { preset("qwen4-1t"); },
               {"unknown preset \"qwen4-1t\"", "qwen3-next-80b", "tiny-dense", "gpt-oss-20b"});
}

// ---- every validation rule of docs/spec/buffers.md §1, one test each ----

ModelConfig dense() { return preset("tiny-dense"); }  // nq 6, nkv 2, hd 40
ModelConfig moe() { return preset("tiny-moe"); }      // E 12, top_k 3
ModelConfig gdn() { return preset("tiny-gdn"); }      // nk 2 × 128, nv 4 × 128
ModelConfig mamba() { return preset("tiny-mamba"); }  // 6 heads, 2 groups
ModelConfig mhc() { return preset("tiny-mhc"); }      // hc_mult 4, o_groups 3

TEST(ConfigValidation, BasesAreValid) {
  for (const ModelConfig& c : {dense(), moe(), gdn(), mamba(), mhc()})
    EXPECT_NO_THROW(c.validate());
}

TEST(ConfigValidation, HiddenSizeZero) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.hidden_size = 0; }, {"hidden_size = 0"});
}

TEST(ConfigValidation, VocabSizeZero) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.vocab_size = 0; }, {"vocab_size = 0"});
}

TEST(ConfigValidation, NoQueryHeads) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.num_attention_heads = 0; },
                       {"num_attention_heads = 0", "attention"});
}

TEST(ConfigValidation, HeadDimZero) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.head_dim = 0; },
                       {"head_dim = 0", "attention"});
}

TEST(ConfigValidation, NoKeyValueHeads) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.num_key_value_heads = 0; },
                       {"num_key_value_heads = 0"});
}

TEST(ConfigValidation, QueryHeadsNotMultipleOfKeyValueHeads) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.num_key_value_heads = 4; },
                       {"num_attention_heads = 6", "not a multiple", "num_key_value_heads = 4"});
}

TEST(ConfigValidation, DenseModelWithoutIntermediateSize) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.intermediate_size = 0; },
                       {"intermediate_size = 0", "num_experts = 0"});
}

TEST(ConfigValidation, MoeModelWithoutAnyExpertWidth) {
  expect_invalid_after(moe(),
                       [](ModelConfig& c) {
                         c.moe_intermediate_size = 0;
                         c.intermediate_size = 0;
                       },
                       {"moe_intermediate_size = 0", "intermediate_size = 0", "num_experts = 12"});
}

TEST(ConfigValidation, MoeWidthMayComeFromIntermediateSize) {
  ModelConfig c = moe();
  c.moe_intermediate_size = 0;
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigValidation, TopKZero) {
  expect_invalid_after(moe(), [](ModelConfig& c) { c.num_experts_per_tok = 0; },
                       {"num_experts_per_tok = 0", "num_experts = 12"});
}

TEST(ConfigValidation, TopKExceedsExperts) {
  expect_invalid_after(moe(), [](ModelConfig& c) { c.num_experts_per_tok = 13; },
                       {"num_experts_per_tok = 13 exceeds num_experts = 12"});
}

TEST(ConfigValidation, TopKIsFreeWithoutExperts) {
  ModelConfig c = dense();
  c.num_experts_per_tok = 0;
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigValidation, GdnValueHeadsNotMultipleOfKeyHeads) {
  expect_invalid_after(
      gdn(), [](ModelConfig& c) { c.linear_num_value_heads = 3; },
      {"linear_num_value_heads = 3", "not a multiple", "linear_num_key_heads = 2"});
}

TEST(ConfigValidation, GdnKeyHeadsWithZeroKeyHeadDim) {
  expect_invalid_after(gdn(), [](ModelConfig& c) { c.linear_key_head_dim = 0; },
                       {"linear_key_head_dim = 0", "linear_num_key_heads = 2"});
}

TEST(ConfigValidation, GdnValueHeadsWithZeroValueHeadDim) {
  expect_invalid_after(gdn(), [](ModelConfig& c) { c.linear_value_head_dim = 0; },
                       {"linear_value_head_dim = 0", "linear_num_value_heads = 4"});
}

TEST(ConfigValidation, GdnKeyHeadDimWithZeroKeyHeads) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.linear_key_head_dim = 128; },
                       {"linear_num_key_heads = 0", "linear_key_head_dim = 128"});
}

TEST(ConfigValidation, GdnValueHeadDimWithZeroValueHeads) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.linear_value_head_dim = 128; },
                       {"linear_num_value_heads = 0", "linear_value_head_dim = 128"});
}

TEST(ConfigValidation, GdnValueHeadsWithoutKeyHeads) {
  expect_invalid_after(gdn(),
                       [](ModelConfig& c) {
                         c.linear_num_key_heads = 0;
                         c.linear_key_head_dim = 0;
                       },
                       {"linear_num_key_heads = 0", "linear_num_value_heads = 4"});
}

TEST(ConfigValidation, GdnKeyHeadsWithoutValueHeads) {
  expect_invalid_after(gdn(),
                       [](ModelConfig& c) {
                         c.linear_num_value_heads = 0;
                         c.linear_value_head_dim = 0;
                       },
                       {"linear_num_value_heads = 0", "linear_num_key_heads = 2"});
}

TEST(ConfigValidation, MambaHeadsNotMultipleOfGroups) {
  expect_invalid_after(mamba(), [](ModelConfig& c) { c.n_groups = 4; },
                       {"mamba_num_heads = 6", "not a multiple", "n_groups = 4"});
}

TEST(ConfigValidation, MambaGroupsZeroCountsAsOne) {
  ModelConfig c = mamba();
  c.n_groups = 0;
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigValidation, HcLowrankWithoutHcMult) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.hc_lowrank = 8; },
                       {"hc_lowrank = 8", "hc_mult = 0"});
}

TEST(ConfigValidation, HcMultWithoutSinkhornIterations) {
  expect_invalid_after(mhc(), [](ModelConfig& c) { c.hc_sinkhorn_iters = 0; },
                       {"hc_sinkhorn_iters = 0", "hc_mult = 4"});
}

TEST(ConfigValidation, FullAttentionIntervalZero) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.full_attention_interval = 0; },
                       {"full_attention_interval = 0"});
}

TEST(ConfigValidation, IndexTopkNotMultipleOfCompressRatio) {
  expect_invalid_after(preset("tiny-qsa"), [](ModelConfig& c) { c.index_topk = 50; },
                       {"index_topk = 50", "not a multiple", "index_compress_ratio = 4"});
}

TEST(ConfigValidation, QueryHeadsNotMultipleOfOGroups) {
  expect_invalid_after(mhc(), [](ModelConfig& c) { c.o_groups = 4; },
                       {"num_attention_heads = 6", "not a multiple", "o_groups = 4"});
}

TEST(ConfigValidation, UnknownScoringFunc) {
  expect_invalid_after(moe(), [](ModelConfig& c) { c.scoring_func = "softmax2"; },
                       {"scoring_func = \"softmax2\"", "softmax, sigmoid, sqrtsoftplus"});
}

TEST(ConfigValidation, OverflowingHeadProduct) {
  ModelConfig c = dense();
  c.num_attention_heads = uint64_t{1} << 32;
  c.num_key_value_heads = 1;
  c.head_dim = uint64_t{1} << 33;
  expect_invalid(c, {"num_attention_heads * head_dim overflows 64 bits",
                     "num_attention_heads = 4294967296", "head_dim = 8589934592"});
}

TEST(ConfigValidation, OverflowingQkvDim) {
  // nq·hd = 2^63 fits; (nq + 2·nkv)·hd = 3·2^63 does not.
  ModelConfig c = dense();
  c.num_attention_heads = uint64_t{1} << 31;
  c.num_key_value_heads = uint64_t{1} << 31;
  c.head_dim = uint64_t{1} << 32;
  expect_invalid(c, {"qkv_dim overflows 64 bits", "num_key_value_heads = 2147483648"});
}

TEST(ConfigValidation, OverflowingSsmQkvzSize) {
  expect_invalid_after(gdn(),
                       [](ModelConfig& c) {
                         c.linear_num_key_heads = uint64_t{1} << 32;
                         c.linear_num_value_heads = uint64_t{1} << 32;
                         c.linear_key_head_dim = uint64_t{1} << 31;
                       },
                       {"ssm_qkvz_size overflows 64 bits", "linear_key_head_dim = 2147483648"});
}

TEST(ConfigValidation, OverflowingMambaInnerSize) {
  expect_invalid_after(mamba(),
                       [](ModelConfig& c) {
                         c.mamba_num_heads = uint64_t{1} << 33;
                         c.mamba_head_dim = uint64_t{1} << 31;
                       },
                       {"mamba2_d_inner overflows 64 bits", "mamba_num_heads = 8589934592"});
}

// ---- sanity rules beyond the spec's list ----

TEST(ConfigValidation, RmsNormEpsNaN) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.rms_norm_eps = std::nan(""); },
                       {"rms_norm_eps = NaN"});
}

TEST(ConfigValidation, RmsNormEpsNegative) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.rms_norm_eps = -1e-6; },
                       {"rms_norm_eps = -1e-06"});
}

TEST(ConfigValidation, RmsNormEpsInfinite) {
  expect_invalid_after(dense(), [](ModelConfig& c) { c.rms_norm_eps = HUGE_VAL; },
                       {"rms_norm_eps = Infinity"});
}

TEST(ConfigValidation, HcEpsNegative) {
  expect_invalid_after(mhc(), [](ModelConfig& c) { c.hc_eps = -1; }, {"hc_eps = -1"});
}

TEST(ConfigValidation, SwigluLimitNegativeOrNaN) {
  ModelConfig c = dense();
  c.swiglu_limit = -7;
  expect_invalid(c, {"swiglu_limit = -7"});
  c.swiglu_limit = std::nan("");
  expect_invalid(c, {"swiglu_limit = NaN"});
}

TEST(ConfigValidation, SwigluLimitInfinityMeansNoClamp) {
  ModelConfig c = dense();
  c.swiglu_limit = HUGE_VAL;
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigValidation, RoutedScalingFactorNotPositive) {
  ModelConfig c = moe();
  c.routed_scaling_factor = 0;
  expect_invalid(c, {"routed_scaling_factor = 0"});
  c.routed_scaling_factor = std::nan("");
  expect_invalid(c, {"routed_scaling_factor = NaN"});
}

TEST(ConfigValidation, MoeLayerFreqZero) {
  expect_invalid_after(moe(), [](ModelConfig& c) { c.moe_layer_freq = 0; }, {"moe_layer_freq = 0"});
}

TEST(ConfigValidation, LayerTypesLengthDiffersFromLayerCount) {
  expect_invalid_after(mamba(), [](ModelConfig& c) { c.num_hidden_layers = 9; },
                       {"layer_types has 8 entries", "num_hidden_layers = 9"});
}

TEST(ConfigValidation, MlpOnlyLayerOutOfRange) {
  expect_invalid_after(moe(),
                       [](ModelConfig& c) {
                         c.mlp_only_layers = {1, 4};
                       },
                       {"mlp_only_layers contains layer 4", "num_hidden_layers = 4"});
}

TEST(ConfigValidation, LayerKindsNeedTheirFields) {
  ModelConfig c = dense();
  c.layer_types.assign(4, LayerType::full_attention);
  c.layer_types[2] = LayerType::linear_attention;
  expect_invalid(c, {"layer_types[2] = linear_attention", "linear_num_value_heads = 0"});
  c.layer_types[2] = LayerType::mamba;
  expect_invalid(c, {"layer_types[2] = mamba", "mamba_num_heads = 0"});
  c.layer_types[2] = LayerType::mla;
  expect_invalid(c, {"layer_types[2] = mla", "kv_lora_rank = 0"});
  c.layer_types[2] = LayerType::moe;
  expect_invalid(c, {"layer_types[2] = moe", "num_experts = 0"});
}

TEST(ConfigValidation, ConvKernelsZero) {
  ModelConfig c = gdn();
  c.linear_conv_kernel_dim = 0;
  expect_invalid(c, {"linear_conv_kernel_dim = 0"});
  c = mamba();
  c.conv_kernel = 0;
  expect_invalid(c, {"conv_kernel = 0"});
}

TEST(ConfigValidation, LayerIndexOutOfRange) {
  const ModelConfig c = dense();
  expect_error([&] { c.mixer_kind(4); }, {"layer 4", "4 layers"});
  expect_error([&] { c.ffn_kind(100); }, {"layer 100"});
}

// ---- attention rules (docs/spec/attention.md §1; validate_attention in rope.h) ----

// `c` after `change` fails validate_attention(), naming every fragment; validate() (the sizing
// rules) still accepts it.
template <class Change>
void expect_bad_attention(ModelConfig c, Change change,
                          std::initializer_list<std::string> fragments) {
  change(c);
  EXPECT_NO_THROW(c.validate());
  expect_error([&] { validate_attention(c); }, fragments);
}

TEST(ConfigBadAttention, ShippedConfigsAndPresetsPass) {
  for (const PresetInfo& p : list_presets()) {
    SCOPED_TRACE(p.name);
    EXPECT_NO_THROW(validate_attention(preset(p.name)));
  }
}

TEST(ConfigBadAttention, PartialRotaryFactorAboveOne) {
  expect_bad_attention(preset("tiny-dense"), [](ModelConfig& c) { c.partial_rotary_factor = 1.5; },
                       {"partial_rotary_factor = 1.5", "(0, 1]"});
}

TEST(ConfigBadAttention, PartialRotaryFactorZeroOrNaN) {
  expect_bad_attention(preset("tiny-dense"), [](ModelConfig& c) { c.partial_rotary_factor = 0; },
                       {"partial_rotary_factor = 0"});
  expect_bad_attention(preset("tiny-dense"),
                       [](ModelConfig& c) { c.partial_rotary_factor = std::nan(""); },
                       {"partial_rotary_factor = NaN"});
}

TEST(ConfigBadAttention, OddRotaryDim) {
  // tiny-dense: head_dim 40; int(40 · 0.275) = 11.
  expect_bad_attention(
      preset("tiny-dense"), [](ModelConfig& c) { c.partial_rotary_factor = 0.275; },
      {"rotary_dim = 11", "head_dim = 40", "partial_rotary_factor = 0.275", "even"});
}

TEST(ConfigBadAttention, OddHeadDim) {
  expect_bad_attention(preset("tiny-dense"), [](ModelConfig& c) { c.head_dim = 33; },
                       {"rotary_dim = 33", "head_dim = 33"});
}

TEST(ConfigBadAttention, MlaModelsAreOutsideTheRotaryRule) {
  ModelConfig c = preset("tiny-mla");
  c.head_dim = 33;  // MLA rotates qk_rope_head_dim; no full or sliding layer
  EXPECT_NO_THROW(validate_attention(c));
}

TEST(ConfigBadAttention, MropeSectionsNotHalfTheRotaryDim) {
  // tiny-dense: rotary_dim 40, so the sections must sum to 20.
  expect_bad_attention(preset("tiny-dense"),
                       [](ModelConfig& c) {
                         c.mrope_section = {8, 6, 4};
                       },
                       {"mrope_section = [8, 6, 4]", "sums to 18", "rotary_dim / 2 = 20"});
  ModelConfig ok = preset("tiny-dense");
  ok.mrope_section = {8, 6, 6};
  EXPECT_NO_THROW(validate_attention(ok));
}

TEST(ConfigBadAttention, MropeSectionsAgainstThePartialRotaryDim) {
  // tiny-gdn: head_dim 72 · 0.25 = 18 rotated, so 9 frequencies.
  expect_bad_attention(preset("tiny-gdn"),
                       [](ModelConfig& c) {
                         c.mrope_section = {12, 12, 12};
                       },
                       {"sums to 36", "rotary_dim / 2 = 9"});
}

TEST(ConfigBadAttention, FactorNotPositive) {
  for (double f : {0.0, -2.0}) {
    expect_bad_attention(preset("tiny-dense"),
                         [f](ModelConfig& c) {
                           c.rope_type = "linear";
                           c.rope_factor = f;
                         },
                         {"rope_factor = " + std::string(f == 0 ? "0" : "-2"), "> 0"});
  }
}

TEST(ConfigBadAttention, SlidingLayerWithoutWindow) {
  expect_bad_attention(
      preset("tiny-dense"),
      [](ModelConfig& c) {
        using enum LayerType;
        c.layer_types = {full_attention, sliding_attention, full_attention, full_attention};
      },
      {"layer_types[1] = sliding_attention", "sliding_window = 0"});
}

TEST(ConfigBadAttention, UnknownRopeType) {
  expect_bad_attention(preset("tiny-dense"), [](ModelConfig& c) { c.rope_type = "dynamic"; },
                       {"rope_type = \"dynamic\"", "default, linear, llama3, yarn"});
}

TEST(ConfigBadAttention, ThetaNotAFiniteNumberAboveOne) {
  for (double theta : {1.0, 0.5, static_cast<double>(INFINITY)}) {
    SCOPED_TRACE(theta);
    expect_bad_attention(preset("tiny-dense"), [theta](ModelConfig& c) { c.rope_theta = theta; },
                         {"rope_theta = ", "finite number > 1"});
  }
}

TEST(ConfigBadAttention, Llama3OrYarnWithoutOriginalContext) {
  expect_bad_attention(preset("tiny-dense"), [](ModelConfig& c) { c.rope_type = "yarn"; },
                       {"rope_original_max_position = 0", "rope_type = \"yarn\""});
}

TEST(ConfigBadAttention, Llama3EqualFrequencyFactors) {
  expect_bad_attention(preset("llama-3.1-8b"),
                       [](ModelConfig& c) { c.rope_low_freq_factor = c.rope_high_freq_factor; },
                       {"rope_low_freq_factor = 4", "rope_high_freq_factor = 4"});
}

// The loader applies the same rules to a config.json, naming the field and value.
TEST(ConfigBadAttention, ConfigJsonIsChecked) {
  expect_bad_patch({{"partial_rotary_factor", 1.25}}, {"bad.json", "partial_rotary_factor = 1.25"});
  expect_bad_patch({{"rope_scaling", {{"type", "mrope"}, {"mrope_section", {4, 4, 4}}}}},
                   {"mrope_section = [4, 4, 4]", "rotary_dim / 2 = 16"});
  expect_bad_patch({{"rope_scaling", {{"rope_type", "linear"}, {"factor", 0}}}},
                   {"rope_factor = 0"});
  expect_bad_patch({{"layer_types", {"sliding_attention", "full_attention"}}},
                   {"layer_types[0] = sliding_attention", "sliding_window = 0"});
  expect_bad_patch({{"rope_scaling", {{"rope_type", "longrope"}}}},
                   {"rope_scaling.rope_type = \"longrope\"", "not supported"});
  expect_bad_patch({{"rope_theta", 1}}, {"rope_theta = 1"});
}

}  // namespace
}  // namespace bufferlab
