// Bad input never crashes and never passes silently: malformed or wrongly typed config.json,
// every validation rule of spec/buffers.md §1 (one test each), overflowing sizes, bad files,
// unknown presets. Each test asserts a bufferlab::Error and what its message names.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/presets.h"
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
  json j = dense_json();
  j["num_attention_heads"] = nullptr;
  expect_bad_json(j, {"missing required key", "num_attention_heads"});
}

TEST(ConfigBadJson, NegativeNumber) {
  json j = dense_json();
  j["vocab_size"] = -5;
  expect_bad_json(j, {"vocab_size = -5", "non-negative integer", "negative"});
}

TEST(ConfigBadJson, StringTypedNumber) {
  json j = dense_json();
  j["hidden_size"] = "4096";
  expect_bad_json(j, {"hidden_size = \"4096\"", "a string"});
}

TEST(ConfigBadJson, FractionalInteger) {
  json j = dense_json();
  j["num_attention_heads"] = 7.5;
  expect_bad_json(j, {"num_attention_heads = 7.5", "fractional"});
}

TEST(ConfigBadJson, IntegerTooLarge) {
  expect_bad_text(
      R"({"hidden_size": 18446744073709551616, "vocab_size": 1, "num_attention_heads": 1,
          "num_hidden_layers": 1})",
      {"hidden_size = ", "too large"});
}

TEST(ConfigBadJson, BooleanWhereANumberBelongs) {
  json j = dense_json();
  j["num_hidden_layers"] = true;
  expect_bad_json(j, {"num_hidden_layers = true", "a boolean"});
}

TEST(ConfigBadJson, NumberWhereABooleanBelongs) {
  json j = dense_json();
  j["norm_topk_prob"] = 1;
  expect_bad_json(j, {"norm_topk_prob = 1", "true or false"});
}

TEST(ConfigBadJson, StringWhereAFloatBelongs) {
  json j = dense_json();
  j["rms_norm_eps"] = "1e-6";
  expect_bad_json(j, {"rms_norm_eps = \"1e-6\"", "a number"});
}

TEST(ConfigBadJson, NumberWhereAStringBelongs) {
  json j = dense_json();
  j["scoring_func"] = 3;
  expect_bad_json(j, {"scoring_func = 3", "a string"});
}

TEST(ConfigBadJson, WrongTypeInsideTextConfigNamesThePath) {
  json j = dense_json();
  j["text_config"] = {{"hidden_size", "wide"}};
  expect_bad_json(j, {"text_config.hidden_size = \"wide\""});
}

TEST(ConfigBadJson, TextConfigNotAnObject) {
  json j = dense_json();
  j["text_config"] = 5;
  expect_bad_json(j, {"text_config = 5", "an object"});
}

TEST(ConfigBadJson, TopKExceedsExperts) {
  json j = dense_json();
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 12;
  expect_bad_json(j, {"bad.json: ", "num_experts_per_tok = 12 exceeds num_experts = 8"});
}

TEST(ConfigBadJson, ConflictingAliases) {
  json j = dense_json();
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 4;
  j["experts_per_token"] = 2;
  expect_bad_json(j, {"conflicting", "num_experts_per_tok = 4", "experts_per_token = 2"});
}

TEST(ConfigBadJson, ConflictingSharedExpertSpellings) {
  json j = dense_json();
  j["num_experts"] = 8;
  j["moe_intermediate_size"] = 64;
  j["n_shared_experts"] = 2;
  j["shared_expert_intermediate_size"] = 64;
  expect_bad_json(j, {"conflicting", "shared_expert_intermediate_size = 64", "128"});
}

TEST(ConfigBadJson, UnknownLayerType) {
  json j = dense_json();
  j["layer_types"] = {"full_attention", "chunked_attention"};
  expect_bad_json(j, {"layer_types[1] = \"chunked_attention\"", "unknown layer type"});
}

TEST(ConfigBadJson, BadHybridPatternCharacter) {
  json j = dense_json();
  j["hybrid_override_pattern"] = "M*X";
  expect_bad_json(j, {"hybrid_override_pattern[2] = 'X'"});
}

TEST(ConfigBadJson, LayerTypesAndHybridPatternTogether) {
  json j = dense_json();
  j["hybrid_override_pattern"] = "**";
  j["layer_types"] = {"full_attention", "full_attention"};
  expect_bad_json(j, {"layer_types", "hybrid_override_pattern"});
}

TEST(ConfigBadJson, MropeSectionOfWrongLength) {
  json j = dense_json();
  j["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {16, 24}}};
  expect_bad_json(j, {"rope_scaling.mrope_section = [16,24]", "3 non-negative integers"});
}

TEST(ConfigBadJson, RopeScalingNotAnObject) {
  json j = dense_json();
  j["rope_scaling"] = "yarn";
  expect_bad_json(j, {"rope_scaling = \"yarn\"", "an object"});
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

TEST(ConfigBadNormalized, UnknownKeyInConfig) {
  json j = normalized();
  j["config"]["hiden_size"] = 64;
  expect_bad_json(j, {"unknown key \"hiden_size\""});
}

TEST(ConfigBadNormalized, HuggingFaceSpellingIsUnknown) {
  json j = normalized();
  j["config"]["first_k_dense_replace"] = 1;
  expect_bad_json(j, {"unknown key \"first_k_dense_replace\""});
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
  json j = normalized();
  j["config"]["head_dim"] = -1;
  expect_bad_json(j, {"config.head_dim = -1"});
  j = normalized();
  j["config"]["attn_gated"] = "yes";
  expect_bad_json(j, {"config.attn_gated = \"yes\""});
  j = normalized();
  j["config"]["layer_types"] = {"full"};
  expect_bad_json(j, {"config.layer_types[0] = \"full\""});
  j = normalized();
  j["config"]["mlp_only_layers"] = 3;
  expect_bad_json(j, {"config.mlp_only_layers = 3"});
}

TEST(ConfigBadNormalized, IsValidated) {
  json j = normalized();
  j["config"]["vocab_size"] = 0;
  expect_bad_json(j, {"vocab_size = 0"});
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

// ---- every validation rule of spec §1, one test each ----

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
  ModelConfig c = dense();
  c.hidden_size = 0;
  expect_invalid(c, {"hidden_size = 0"});
}

TEST(ConfigValidation, VocabSizeZero) {
  ModelConfig c = dense();
  c.vocab_size = 0;
  expect_invalid(c, {"vocab_size = 0"});
}

TEST(ConfigValidation, NoQueryHeads) {
  ModelConfig c = dense();
  c.num_attention_heads = 0;
  expect_invalid(c, {"num_attention_heads = 0", "attention"});
}

TEST(ConfigValidation, HeadDimZero) {
  ModelConfig c = dense();
  c.head_dim = 0;
  expect_invalid(c, {"head_dim = 0", "attention"});
}

TEST(ConfigValidation, NoKeyValueHeads) {
  ModelConfig c = dense();
  c.num_key_value_heads = 0;
  expect_invalid(c, {"num_key_value_heads = 0"});
}

TEST(ConfigValidation, QueryHeadsNotMultipleOfKeyValueHeads) {
  ModelConfig c = dense();
  c.num_key_value_heads = 4;
  expect_invalid(c, {"num_attention_heads = 6", "not a multiple", "num_key_value_heads = 4"});
}

TEST(ConfigValidation, DenseModelWithoutIntermediateSize) {
  ModelConfig c = dense();
  c.intermediate_size = 0;
  expect_invalid(c, {"intermediate_size = 0", "num_experts = 0"});
}

TEST(ConfigValidation, MoeModelWithoutAnyExpertWidth) {
  ModelConfig c = moe();
  c.moe_intermediate_size = 0;
  c.intermediate_size = 0;
  expect_invalid(c, {"moe_intermediate_size = 0", "intermediate_size = 0", "num_experts = 12"});
}

TEST(ConfigValidation, MoeWidthMayComeFromIntermediateSize) {
  ModelConfig c = moe();
  c.moe_intermediate_size = 0;
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigValidation, TopKZero) {
  ModelConfig c = moe();
  c.num_experts_per_tok = 0;
  expect_invalid(c, {"num_experts_per_tok = 0", "num_experts = 12"});
}

TEST(ConfigValidation, TopKExceedsExperts) {
  ModelConfig c = moe();
  c.num_experts_per_tok = 13;
  expect_invalid(c, {"num_experts_per_tok = 13 exceeds num_experts = 12"});
}

TEST(ConfigValidation, TopKIsFreeWithoutExperts) {
  ModelConfig c = dense();
  c.num_experts_per_tok = 0;
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigValidation, GdnValueHeadsNotMultipleOfKeyHeads) {
  ModelConfig c = gdn();
  c.linear_num_value_heads = 3;
  expect_invalid(c, {"linear_num_value_heads = 3", "not a multiple", "linear_num_key_heads = 2"});
}

TEST(ConfigValidation, GdnKeyHeadsWithZeroKeyHeadDim) {
  ModelConfig c = gdn();
  c.linear_key_head_dim = 0;
  expect_invalid(c, {"linear_key_head_dim = 0", "linear_num_key_heads = 2"});
}

TEST(ConfigValidation, GdnValueHeadsWithZeroValueHeadDim) {
  ModelConfig c = gdn();
  c.linear_value_head_dim = 0;
  expect_invalid(c, {"linear_value_head_dim = 0", "linear_num_value_heads = 4"});
}

TEST(ConfigValidation, GdnKeyHeadDimWithZeroKeyHeads) {
  ModelConfig c = dense();
  c.linear_key_head_dim = 128;
  expect_invalid(c, {"linear_num_key_heads = 0", "linear_key_head_dim = 128"});
}

TEST(ConfigValidation, GdnValueHeadDimWithZeroValueHeads) {
  ModelConfig c = dense();
  c.linear_value_head_dim = 128;
  expect_invalid(c, {"linear_num_value_heads = 0", "linear_value_head_dim = 128"});
}

TEST(ConfigValidation, GdnValueHeadsWithoutKeyHeads) {
  ModelConfig c = gdn();
  c.linear_num_key_heads = 0;
  c.linear_key_head_dim = 0;
  expect_invalid(c, {"linear_num_key_heads = 0", "linear_num_value_heads = 4"});
}

TEST(ConfigValidation, GdnKeyHeadsWithoutValueHeads) {
  ModelConfig c = gdn();
  c.linear_num_value_heads = 0;
  c.linear_value_head_dim = 0;
  expect_invalid(c, {"linear_num_value_heads = 0", "linear_num_key_heads = 2"});
}

TEST(ConfigValidation, MambaHeadsNotMultipleOfGroups) {
  ModelConfig c = mamba();
  c.n_groups = 4;
  expect_invalid(c, {"mamba_num_heads = 6", "not a multiple", "n_groups = 4"});
}

TEST(ConfigValidation, MambaGroupsZeroCountsAsOne) {
  ModelConfig c = mamba();
  c.n_groups = 0;
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigValidation, HcLowrankWithoutHcMult) {
  ModelConfig c = dense();
  c.hc_lowrank = 8;
  expect_invalid(c, {"hc_lowrank = 8", "hc_mult = 0"});
}

TEST(ConfigValidation, HcMultWithoutSinkhornIterations) {
  ModelConfig c = mhc();
  c.hc_sinkhorn_iters = 0;
  expect_invalid(c, {"hc_sinkhorn_iters = 0", "hc_mult = 4"});
}

TEST(ConfigValidation, FullAttentionIntervalZero) {
  ModelConfig c = dense();
  c.full_attention_interval = 0;
  expect_invalid(c, {"full_attention_interval = 0"});
}

TEST(ConfigValidation, IndexTopkNotMultipleOfCompressRatio) {
  ModelConfig c = preset("tiny-qsa");
  c.index_topk = 50;
  expect_invalid(c, {"index_topk = 50", "not a multiple", "index_compress_ratio = 4"});
}

TEST(ConfigValidation, QueryHeadsNotMultipleOfOGroups) {
  ModelConfig c = mhc();
  c.o_groups = 4;
  expect_invalid(c, {"num_attention_heads = 6", "not a multiple", "o_groups = 4"});
}

TEST(ConfigValidation, UnknownScoringFunc) {
  ModelConfig c = moe();
  c.scoring_func = "softmax2";
  expect_invalid(c, {"scoring_func = \"softmax2\"", "softmax, sigmoid, sqrtsoftplus"});
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
  ModelConfig c = gdn();
  c.linear_num_key_heads = uint64_t{1} << 32;
  c.linear_num_value_heads = uint64_t{1} << 32;
  c.linear_key_head_dim = uint64_t{1} << 31;
  expect_invalid(c, {"ssm_qkvz_size overflows 64 bits", "linear_key_head_dim = 2147483648"});
}

TEST(ConfigValidation, OverflowingMambaInnerSize) {
  ModelConfig c = mamba();
  c.mamba_num_heads = uint64_t{1} << 33;
  c.mamba_head_dim = uint64_t{1} << 31;
  expect_invalid(c, {"mamba2_d_inner overflows 64 bits", "mamba_num_heads = 8589934592"});
}

// ---- sanity rules beyond the spec's list ----

TEST(ConfigValidation, RmsNormEpsNaN) {
  ModelConfig c = dense();
  c.rms_norm_eps = std::nan("");
  expect_invalid(c, {"rms_norm_eps = NaN"});
}

TEST(ConfigValidation, RmsNormEpsNegative) {
  ModelConfig c = dense();
  c.rms_norm_eps = -1e-6;
  expect_invalid(c, {"rms_norm_eps = -1e-06"});
}

TEST(ConfigValidation, RmsNormEpsInfinite) {
  ModelConfig c = dense();
  c.rms_norm_eps = HUGE_VAL;
  expect_invalid(c, {"rms_norm_eps = Infinity"});
}

TEST(ConfigValidation, HcEpsNegative) {
  ModelConfig c = mhc();
  c.hc_eps = -1;
  expect_invalid(c, {"hc_eps = -1"});
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
  ModelConfig c = moe();
  c.moe_layer_freq = 0;
  expect_invalid(c, {"moe_layer_freq = 0"});
}

TEST(ConfigValidation, LayerTypesLengthDiffersFromLayerCount) {
  ModelConfig c = mamba();
  c.num_hidden_layers = 9;
  expect_invalid(c, {"layer_types has 8 entries", "num_hidden_layers = 9"});
}

TEST(ConfigValidation, MlpOnlyLayerOutOfRange) {
  ModelConfig c = moe();
  c.mlp_only_layers = {1, 4};
  expect_invalid(c, {"mlp_only_layers contains layer 4", "num_hidden_layers = 4"});
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

}  // namespace
}  // namespace bufferlab
