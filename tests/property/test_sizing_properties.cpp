// Property tests of BufferSizes and Layout over random valid configs, run shapes and targets
// (issue: foundation, item 8). Bodies live in properties/ so `bufferlab fuzz` runs the same.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <algorithm>

#include <limits>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/config_json.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/properties/generators.h"
#include "bufferlab/properties/sizing_checks.h"

namespace bufferlab {
namespace {

// Properties default to the `corrected` sizing (spec: verify/fuzz/properties), which must
// be clean.

void assert_none(const checks::Violations& v) {
  for (const auto& line : v) RC_LOG() << line << "\n";
  RC_ASSERT(v.empty());
}

RC_GTEST_PROP(SizingProperty, LayoutBuffersNeverOverlapAndAreAligned, ()) {
  const auto [family, config] = *gen::family_and_config();
  RC_TAG(family);
  const auto shape = *gen::run_shape();
  const auto target = *gen::target();
  const uint64_t alignment = uint64_t{1} << *rc::gen::inRange(0, 13);
  const uint64_t redzone = *rc::gen::element<uint64_t>(0, 64, 100, 4096);
  const auto sizes = BufferSizes::from_config(config, shape, target, Sizing::corrected());
  const auto layout = Layout::build(sizes, alignment, redzone);
  assert_none(checks::layout_disjoint_and_aligned(layout.entries(), alignment, redzone,
                                                  layout.arena_bytes()));
}

RC_GTEST_PROP(SizingProperty, NullExactlyForNullWhenZeroFieldsOtherwisePositive, ()) {
  const auto config = *gen::valid_config();
  const auto target = *gen::target();
  const auto sizes =
      BufferSizes::from_config(config, *gen::run_shape(), target, Sizing::corrected());
  assert_none(checks::null_fields_as_specified(config, target, sizes));
}

// The ledger adds up and every registry field is in the layout and the JSON.
void ledger_property(Sizing sizing) {
  const auto sizes =
      BufferSizes::from_config(*gen::valid_config(), *gen::run_shape(), *gen::target(), sizing);
  assert_none(checks::ledger_complete(sizes, Layout::build(sizes)));
}

RC_GTEST_PROP(SizingProperty, TotalBytesIsTheSumOfEveryFieldAndEveryAllocation, ()) {
  ledger_property(Sizing::corrected());
}

RC_GTEST_PROP(SizingProperty, SizesNeverDecreaseWhenTheRunShapeGrows, ()) {
  const auto config = *gen::valid_config();
  const auto target = *gen::target();
  const auto small = *gen::run_shape();
  RunShape large = small;
  const int axis = *rc::gen::inRange(0, 3);
  const uint64_t grow = *rc::gen::inRange<uint64_t>(1, 70000);
  if (axis == 0) large.max_batch_tokens += grow;
  if (axis == 1) large.max_seq_len += grow;
  if (axis == 2) large.max_batch_size += *rc::gen::inRange<uint64_t>(1, 200);
  RC_TAG(axis == 0 ? "m" : axis == 1 ? "max_seq_len" : "max_batch_size");
  assert_none(checks::sizes_not_decreasing(
      BufferSizes::from_config(config, small, target, Sizing::corrected()),
      BufferSizes::from_config(config, large, target, Sizing::corrected())));
}

void layers_property(Sizing sizing) {
  const auto config = *gen::valid_config();
  const auto shape = *gen::run_shape();
  const auto target = *gen::target();
  const auto other = checks::with_num_hidden_layers(config, *rc::gen::inRange<uint64_t>(1, 200));
  assert_none(checks::arena_independent_of_layers(
      Layout::build(BufferSizes::from_config(config, shape, target, sizing)),
      Layout::build(BufferSizes::from_config(other, shape, target, sizing))));
}

RC_GTEST_PROP(SizingProperty, ArenaBytesDoNotDependOnNumHiddenLayers, ()) {
  layers_property(Sizing::corrected());
}

// The same property bodies, run on catalogued mutants of `corrected`, must fail (RapidCheck
// prints the shrunk counterexample as config JSON plus the seed to reproduce it).
bool property_holds_under(Mutant m, void (*property)(Sizing)) {
  return rc::check(std::string("property under mutant ") + to_string(m),
                   [m, property] { property(Sizing::mutant_of_corrected(m)); });
}

TEST(SizingPropertyMutants, B8LedgerWithoutAFieldFailsTheLedgerProperty) {
  EXPECT_FALSE(property_holds_under(Mutant::B8, ledger_property)) << "mutant B8 survived";
}

TEST(SizingPropertyMutants, B12FieldMissingFromTheLayoutFailsTheLedgerProperty) {
  EXPECT_FALSE(property_holds_under(Mutant::B12, ledger_property)) << "mutant B12 survived";
}

TEST(SizingPropertyMutants, B6PerLayerScratchFailsTheLayerIndependenceProperty) {
  EXPECT_FALSE(property_holds_under(Mutant::B6, layers_property)) << "mutant B6 survived";
}

// One broken validation rule of docs/spec/buffers.md §1 per case.
ModelConfig break_one_rule(ModelConfig c, int rule) {
  switch (rule) {
    case 0:
      c.hidden_size = 0;
      break;
    case 1:
      c.vocab_size = 0;
      break;
    case 2:
      c.head_dim = 0;
      break;
    case 3:
      c.num_key_value_heads = 0;
      break;
    case 4:
      c.num_key_value_heads = c.num_attention_heads + 1;
      break;  // nq % nkv != 0
    case 5:
      c.num_experts = 0;
      c.intermediate_size = 0;
      break;
    case 6:
      c.num_experts = 3;
      c.moe_intermediate_size = 0;
      c.intermediate_size = 0;
      break;
    case 7:
      c.num_experts = 3;
      c.moe_intermediate_size = 5;
      c.num_experts_per_tok = 4;
      break;
    case 8:
      c.num_experts = 3;
      c.moe_intermediate_size = 5;
      c.num_experts_per_tok = 0;
      break;
    case 9:
      c.linear_num_key_heads = 3;
      c.linear_num_value_heads = 4;
      c.linear_key_head_dim = c.linear_value_head_dim = 8;
      break;
    case 10:
      c.linear_num_key_heads = 2;
      c.linear_num_value_heads = 4;
      c.linear_key_head_dim = 0;
      c.linear_value_head_dim = 8;
      break;
    case 11:
      c.mamba_num_heads = 7;
      c.n_groups = 2;
      c.mamba_head_dim = 4;
      break;
    case 12:
      c.hc_mult = 0;
      c.hc_lowrank = 4;
      break;
    case 13:
      c.hc_mult = 4;
      c.hc_sinkhorn_iters = 0;
      break;
    case 14:
      c.full_attention_interval = 0;
      c.layer_types.clear();
      break;
    case 15:
      c.index_compress_ratio = 4;
      c.index_topk = 6;
      break;
    case 16:
      c.o_groups = c.num_attention_heads + 1;
      c.o_lora_rank = 8;
      break;
    case 17:
      c.scoring_func = "tanh";
      break;
  }
  return c;
}

constexpr int kValidationRules = 18;

// Every rule is broken in every case (a drawn rule index would favour the first rules).
RC_GTEST_PROP(SizingProperty, ConfigsBreakingAValidationRuleAreRejectedWithAnError, ()) {
  const auto config = *gen::valid_config();
  const auto shape = *gen::run_shape();
  BufferSizes::from_config(config, shape, Target{},
                           Sizing::corrected());  // the unbroken one is fine
  for (int rule = 0; rule < kValidationRules; ++rule) {
    RC_LOG() << "rule " << rule << "\n";
    RC_ASSERT_THROWS_AS(BufferSizes::from_config(break_one_rule(config, rule), shape, Target{},
                                                 Sizing::corrected()),
                        Error);
  }
}

using u128 = unsigned __int128;
constexpr u128 kMax64 = std::numeric_limits<uint64_t>::max();

// Configs with huge dimensions: either an Error, or exact sizes (compared in 128 bits).
RC_GTEST_PROP(SizingProperty, SizesOverflowing64BitsGiveAnErrorNeverAWrappedSize, ()) {
  // Magnitudes 2^e with e drawn so the products straddle 2^64 (both outcomes are common).
  const auto huge = [](int min_exp, int max_exp) {
    const int e = *rc::gen::resize(100, rc::gen::inRange(min_exp, max_exp + 1));
    return *rc::gen::inRange<uint64_t>(uint64_t{1} << e, (uint64_t{1} << e) * 2 - 1) | 1;
  };
  ModelConfig c = *gen::valid_config();
  c.hidden_size = huge(20, 50);
  if (*rc::gen::arbitrary<bool>()) c.vocab_size = huge(0, 50);
  if (*rc::gen::arbitrary<bool>()) c.head_dim = huge(0, 40);
  RunShape shape = *gen::run_shape();
  shape.max_batch_tokens = huge(0, 30);
  const u128 m = shape.max_batch_tokens, h = c.hidden_size;
  const u128 m_pad = (m + 15) / 16 * 16;
  const u128 hidden = m * h * 2;
  const u128 router = c.num_experts > 0 ? m * h * 4 : 256;
  // F9 (corrected): an MLA model's qkv_output also holds nq·(nope + rope) columns.
  const u128 mla_q = c.kv_lora_rank > 0 ? (u128)c.num_attention_heads *
                                              ((u128)c.qk_nope_head_dim + c.qk_rope_head_dim)
                                        : 0;
  const u128 qkv = m_pad *
                   std::max<u128>(((u128)c.num_attention_heads * c.q_proj_mul() +
                                   2 * (u128)c.num_key_value_heads) *
                                      c.head_dim,
                                  mla_q) *
                   2;
  const u128 moe_out = m_pad * h * 2;
  const bool must_fail = hidden > kMax64 || router > kMax64 || qkv > kMax64 || moe_out > kMax64;
  RC_CLASSIFY(must_fail, "overflows");
  BufferSizes sizes;
  try {
    sizes = BufferSizes::from_config(c, shape, Target{}, Sizing::corrected());
  } catch (const Error&) {
    return;  // an Error is always acceptable for these sizes; other exceptions fail the test
  }
  RC_CLASSIFY(true, "sized without error");
  RC_ASSERT(!must_fail);
  RC_ASSERT(u128(sizes.hidden_states) == hidden);
  RC_ASSERT(u128(sizes.moe_router_in_f32) == router);
  RC_ASSERT(u128(sizes.qkv_output) == qkv);
  RC_ASSERT(u128(sizes.moe_output) == moe_out);
  u128 sum = 0;
  for (const auto& info : kBufferRegistry) sum += sizes.bytes(info.id);
  if (sum > kMax64) {
    RC_ASSERT_THROWS_AS(sizes.total_bytes(), Error);
  } else {
    RC_ASSERT(u128(sizes.total_bytes()) == sum);
  }
}

RC_GTEST_PROP(SizingProperty, NormalizedJsonRoundTripsToTheSameSizes, ()) {
  const auto config = *gen::valid_config();
  const auto shape = *gen::run_shape();
  const auto target = *gen::target();
  const auto reloaded = config_from_json_text(to_normalized_json(config).dump(), "round-trip");
  RC_ASSERT(reloaded == config);
  const auto a = BufferSizes::from_config(config, shape, target, Sizing::corrected());
  const auto b = BufferSizes::from_config(reloaded, shape, target, Sizing::corrected());
  for (const auto& info : kBufferRegistry) RC_ASSERT(a.bytes(info.id) == b.bytes(info.id));
}

}  // namespace
}  // namespace bufferlab
