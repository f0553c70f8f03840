// Layout placement, the registry against the spec's field list, and the registry /
// ledger mutants B8 and B12 of the bug catalogue, caught with the expected finding.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/plan_report.h"
#include "bufferlab/properties/sizing_checks.h"
#include "spec_fields.h"

namespace bufferlab {
namespace {

ModelConfig small_moe() {
  ModelConfig c;
  c.hidden_size = 72;
  c.intermediate_size = 0;
  c.vocab_size = 500;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 3;
  c.head_dim = 20;
  c.num_hidden_layers = 4;
  c.num_experts = 9;
  c.num_experts_per_tok = 3;
  c.moe_intermediate_size = 33;
  c.o_groups = 2;
  c.o_lora_rank = 40;
  return c;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

using testing::kSpecFields;

TEST(Registry, MatchesTheSpecFieldListInOrder) {
  ASSERT_EQ(kSpecFields.size(), 41u);
  ASSERT_EQ(kNumBuffers, kSpecFields.size());
  for (size_t i = 0; i < kNumBuffers; ++i) EXPECT_EQ(kBufferRegistry[i].name, kSpecFields[i]);
}

TEST(Registry, EveryFieldIsInTheLayoutAndTheJson) {
  const auto s = BufferSizes::from_config(small_moe(), RunShape{}, Target{}, Sizing::corrected());
  const auto layout = Layout::build(s);
  EXPECT_TRUE(checks::ledger_complete(s, layout).empty());
  EXPECT_EQ(layout.entries().size(), kNumBuffers);
}

TEST(Layout, AlignedInOrderNullBuffersWithoutStorage) {
  const auto s = BufferSizes::from_config(small_moe(), 37, 1000, 16, 5);
  const auto layout = Layout::build(s, 256, 0);
  uint64_t cursor = 0;
  for (const auto& e : layout.entries()) {
    if (e.is_null()) continue;
    EXPECT_EQ(e.offset % 256, 0u) << buffer_name(e.id);
    EXPECT_GE(e.offset, cursor) << buffer_name(e.id);
    EXPECT_LT(e.offset - cursor, 256u) << buffer_name(e.id);  // no gap beyond alignment
    cursor = e.end();
  }
  EXPECT_EQ(layout.arena_bytes(), cursor);
  EXPECT_TRUE(layout.entry(BufferId::ffn_act_q8).is_null());  // MoE model: no dense scratch
  EXPECT_TRUE(layout.entry(BufferId::lora_xa).is_null());
}

TEST(Layout, RedzoneAfterEveryBuffer) {
  const auto s = BufferSizes::from_config(small_moe(), 37, 1000, 16, 5);
  const auto layout = Layout::build(s, 64, 100);
  EXPECT_TRUE(
      checks::layout_disjoint_and_aligned(layout.entries(), 64, 100, layout.arena_bytes()).empty());
  const auto first = layout.entry(BufferId::hidden_states);
  const auto second = layout.entry(BufferId::residual);
  EXPECT_GE(second.offset, first.end() + 100);
}

TEST(Layout, RejectsAlignmentThatIsNotAPowerOfTwo) {
  const auto s = BufferSizes::from_config(small_moe(), 1, 1, 16, 1);
  EXPECT_THROW(Layout::build(s, 3), Error);
  EXPECT_THROW(Layout::build(s, 0), Error);
}

TEST(Layout, ArenaOverflowIsAnError) {
  auto s = BufferSizes::from_config(small_moe(), 1, 1, 16, 1);
  s.hidden_states = ~uint64_t{0} - 100;
  EXPECT_THROW(Layout::build(s), Error);
}

// B8: total_bytes() that forgot o_latent. The ledger check must fail, naming total_bytes.
TEST(Mutants, B8LedgerMissingAFieldIsCaught) {
  const auto good =
      BufferSizes::from_config(small_moe(), RunShape{}, Target{}, Sizing::corrected());
  ASSERT_GT(good.o_latent, 0u);
  const auto bad = BufferSizes::from_config(small_moe(), RunShape{}, Target{},
                                            Sizing::mutant_of_corrected(Mutant::B8));
  EXPECT_EQ(bad.total_bytes() + bad.o_latent, good.total_bytes());
  const auto v = checks::ledger_complete(bad, Layout::build(bad));
  ASSERT_FALSE(v.empty()) << "mutant B8 survived";
  EXPECT_TRUE(any_contains(v, "total_bytes() = " + std::to_string(bad.total_bytes())));
}

// B12: a field left out of an enumeration (the layout). The completeness check must fail
// and name the field.
TEST(Mutants, B12FieldMissingFromAnEnumerationIsCaught) {
  const auto bad = BufferSizes::from_config(small_moe(), RunShape{}, Target{},
                                            Sizing::mutant_of_corrected(Mutant::B12));
  const auto layout = Layout::build(bad);
  EXPECT_EQ(layout.entries().size(), kNumBuffers - 1);
  const auto v = checks::ledger_complete(bad, layout);
  ASSERT_FALSE(v.empty()) << "mutant B12 survived";
  EXPECT_TRUE(any_contains(v, "norm_unit_w: missing from the layout"));
}

// B6: dense-FFN scratch per layer. The layer-independence check must fail.
TEST(Mutants, B6PerLayerScratchIsCaught) {
  ModelConfig dense = small_moe();
  dense.num_experts = 0;
  dense.intermediate_size = 130;
  ModelConfig deeper = dense;
  deeper.num_hidden_layers = 9;
  const auto sizing = Sizing::mutant_of_corrected(Mutant::B6);
  const auto a = Layout::build(BufferSizes::from_config(dense, RunShape{}, Target{}, sizing));
  const auto b = Layout::build(BufferSizes::from_config(deeper, RunShape{}, Target{}, sizing));
  const auto v = checks::arena_independent_of_layers(a, b);
  ASSERT_FALSE(v.empty()) << "mutant B6 survived";
  EXPECT_TRUE(any_contains(v, "ffn_act_q8"));
  // The real sizing is independent of the layer count.
  const auto c =
      Layout::build(BufferSizes::from_config(dense, RunShape{}, Target{}, Sizing::corrected()));
  const auto d =
      Layout::build(BufferSizes::from_config(deeper, RunShape{}, Target{}, Sizing::corrected()));
  EXPECT_TRUE(checks::arena_independent_of_layers(c, d).empty());
}

// Each check fails on a planted bug (a check that cannot fail is a defect).
TEST(Checks, OverlapAndMisalignmentAreReported) {
  std::vector<LayoutEntry> entries = {{BufferId::hidden_states, 0, 300},
                                      {BufferId::residual, 256, 10},
                                      {BufferId::norm_output, 513, 8}};
  const auto v = checks::layout_disjoint_and_aligned(entries, 256, 0, 1024);
  EXPECT_TRUE(any_contains(v, "hidden_states [0, 300) overlaps residual"));
  EXPECT_TRUE(any_contains(v, "norm_output at offset 513 is not aligned"));
  EXPECT_TRUE(
      any_contains(checks::layout_disjoint_and_aligned(entries, 1, 0, 400), "past the arena"));
}

TEST(Checks, ZeroFieldAndUnexpectedStorageAreReported) {
  const ModelConfig c = small_moe();
  auto s = BufferSizes::from_config(c, RunShape{});
  EXPECT_TRUE(checks::null_fields_as_specified(c, Target{}, s).empty());
  s.o_latent = 0;
  s.ffn_act_a = 64;
  const auto v = checks::null_fields_as_specified(c, Target{}, s);
  EXPECT_TRUE(any_contains(v, "o_latent is 0 bytes"));
  EXPECT_TRUE(any_contains(v, "ffn_act_a has 64 bytes"));
}

TEST(Checks, ShrinkingFieldIsReported) {
  const auto small = BufferSizes::from_config(small_moe(), 10, 100, 16, 1);
  auto large = BufferSizes::from_config(small_moe(), 20, 100, 16, 1);
  EXPECT_TRUE(checks::sizes_not_decreasing(small, large).empty());
  large.logits = small.logits - 2;
  EXPECT_TRUE(any_contains(checks::sizes_not_decreasing(small, large), "logits shrank"));
}

}  // namespace
}  // namespace bufferlab
