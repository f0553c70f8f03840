// Golden RoPE tables (docs/golden.md, docs/spec/attention.md §2): rope_table() against
// transformers' RoPE initialisation — ROPE_INIT_FUNCTIONS for linear, llama3 and yarn, a model's
// compute_default_rope_parameters for default — evaluated in float64 on every shipped config
// that uses RoPE (one case per parameter set; DeepSeek-V4 has two) and on a linear case.
//
// Bound, per inv_freq entry: 1 FP32 ulp at the reference's magnitude. Ours is the FP64 formula
// rounded once to FP32 (≤ half an ulp from the exact value) and the reference the same formula
// in FP64; their two FP64 evaluations (pow, log, a few divisions) differ by a few 2^-53
// relative, far below the other half ulp — except where an FP64 value lies within that of an
// FP32 rounding boundary, which the second half ulp covers. attention_factor: relative 2^-48
// (two logs, two products, a division and an addition in FP64 on each side: 8·2^-53, doubled).
// The manifest records how far transformers' own FP32 evaluation lies from the float64 values
// (native_fp32_max_ulps, printed): the golden files are the float64 ones.
//
// Planted bugs (each must fail): yarn with `truncate` flipped (gpt-oss sets it false), llama3
// with the low and high frequency factors swapped, and Qwen3-Next's partial rotary factor
// ignored (a table for the whole head).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bufferlab/core/rope.h"
#include "golden_case.h"
#include "golden_rope.h"

namespace bufferlab::golden {
namespace {

RopeParams params_of(const GoldenCase& g) {
  const nlohmann::json& p = g.params;
  RopeParams r;
  r.type = rope_type_from_string(p.at("rope_type").get<std::string>());
  r.theta = p.at("rope_theta").get<double>();
  r.rotary_dim = p.at("rotary_dim").get<uint64_t>();
  r.factor = p.at("factor").get<double>();
  r.low_freq_factor = p.at("low_freq_factor").get<double>();
  r.high_freq_factor = p.at("high_freq_factor").get<double>();
  r.original_max_position = p.at("original_max_position_embeddings").get<double>();
  r.beta_fast = p.at("beta_fast").get<double>();
  r.beta_slow = p.at("beta_slow").get<double>();
  r.mscale = p.at("mscale").get<double>();
  r.mscale_all_dim = p.at("mscale_all_dim").get<double>();
  if (!p.at("attention_factor").is_null())
    r.attention_factor = p.at("attention_factor").get<double>();
  r.truncate = p.at("truncate").get<bool>();
  return r;
}

std::vector<std::string> rope_cases() {
  std::vector<std::string> names;
  for (const nlohmann::json& c : golden_manifest().at("cases"))
    if (c.at("family") == "rope") names.push_back(c.at("name").get<std::string>());
  return names;
}

TEST(GoldenRope, EveryShippedConfigsTableIsTransformersWithinOneUlp) {
  const std::vector<std::string> names = rope_cases();
  ASSERT_GE(names.size(), 12u) << "the rope cases of the manifest";
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const GoldenCase g = load_golden(name);
    const RopeTable t = rope_table(params_of(g));
    expect_passed(judge_rope_table(g, t, "rope_table"));
    const double af = g.params.at("attention_factor_fp64").get<double>();
    EXPECT_LE(std::fabs(t.attention_factor - af), 0x1p-48 * std::fabs(af))
        << "attention_factor " << t.attention_factor << " against " << af;
    fmt::print(
        "golden: {} ({}, rotary_dim {}): attention_factor {}; transformers' own FP32 "
        "table is up to {} ulp from the float64 one\n",
        name, g.params.at("rope_type").get<std::string>(),
        g.params.at("rotary_dim").get<uint64_t>(), t.attention_factor,
        g.params.at("native_fp32_max_ulps").get<int>());
  }
}

TEST(GoldenRope, PlantedBugsAreCaught) {
  {
    const GoldenCase g = load_golden("rope_gpt_oss_20b");
    RopeParams p = params_of(g);
    ASSERT_FALSE(p.truncate) << "gpt-oss sets truncate false";
    p.truncate = true;
    expect_caught(judge_rope_table(g, rope_table(p), "yarn with truncate flipped:"));
  }
  {
    const GoldenCase g = load_golden("rope_meta_llama_3_1_8b");
    RopeParams p = params_of(g);
    std::swap(p.low_freq_factor, p.high_freq_factor);
    expect_caught(judge_rope_table(g, rope_table(p), "llama3 with the frequency factors swapped:"));
  }
  {
    const GoldenCase g = load_golden("rope_qwen3_next_80b_a3b_thinking");
    RopeParams p = params_of(g);
    p.rotary_dim *= 4;  // partial_rotary_factor 0.25 ignored
    expect_caught(judge_rope_table(g, rope_table(p), "partial rotary factor ignored:"));
  }
}

TEST(GoldenRope, ParametersWithoutATableAreRefused) {
  RopeParams p;
  p.rotary_dim = 7;
  EXPECT_THROW(rope_table(p), Error);
  p.rotary_dim = 64;
  p.type = RopeType::yarn;
  p.factor = 4.0;
  EXPECT_THROW(rope_table(p), Error);  // no original_max_position_embeddings
  p.type = RopeType::llama3;
  p.original_max_position = 8192;
  p.low_freq_factor = p.high_freq_factor = 2.0;
  EXPECT_THROW(rope_table(p), Error);
  EXPECT_THROW(rope_type_from_string("longrope"), Error);
}

}  // namespace
}  // namespace bufferlab::golden
