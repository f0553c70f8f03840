// bind() of the mHC op descriptors (core ops/mhc.h): every operand a stage uses resolves to an
// address inside its buffer with exactly the elements of the op's shape, the operands a stage
// does not use stay null, and the post step accepts exact in-place or a disjoint target but
// refuses a partial overlap (its result would depend on the kernel's order).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "mhc_config.h"

namespace bufferlab {
namespace {

using testing::mhc_layout_config;

// A host workspace that holds the footprint of `accesses` (pool operands all at offset 0:
// enough for bind, which only resolves addresses).
Workspace footprint(Backend& b, const std::vector<Access>& accesses) {
  return b.allocate(oracle::ffn_footprint_layout(accesses),
                    oracle::ffn_weight_pool_bytes(accesses));
}

TEST(MhcBind, PreBindsEveryOperandInsideItsBuffer) {
  const auto backend = make_cpu_backend();
  const MhcPreOp op = MhcPreOp::make(mhc_layout_config(0), 3);
  const Workspace ws = footprint(*backend, op.accesses());
  const MhcPreOp::Bound b = op.bind(ws);
  EXPECT_EQ(reinterpret_cast<const std::byte*>(b.streams), ws.resolve(op.streams));
  EXPECT_NE(b.fn, nullptr);
  EXPECT_NE(b.comb, nullptr);
  EXPECT_NE(b.block_in, nullptr);
  EXPECT_EQ(op.dims.mix, 24u);  // (2 + hc)·hc
}

TEST(MhcBind, AMisShapedOperandIsAnError) {
  const auto backend = make_cpu_backend();
  MhcPreOp op = MhcPreOp::make(mhc_layout_config(0), 3);
  const Workspace ws = footprint(*backend, op.accesses());
  op.bias.shape = {23};  // one mix entry short
  EXPECT_THROW(op.bind(ws), Error);
  MhcHeadOp head = MhcHeadOp::make(mhc_layout_config(0), 3);
  head.output.dtype = DType::f32;
  head.output.shape = {3, 8};
  EXPECT_THROW(head.bind(footprint(*backend, MhcHeadOp::make(mhc_layout_config(0), 3).accesses())),
               Error);
}

TEST(MhcBind, SplitStagesBindOnlyWhatTheyUse) {
  const auto backend = make_cpu_backend();
  using Stage = MhcLowRankSplitOp::Stage;
  for (Stage s : {Stage::norm, Stage::down, Stage::collapse}) {
    const MhcLowRankSplitOp op = MhcLowRankSplitOp::make(s, mhc_layout_config(8), 5);
    const Workspace ws = footprint(*backend, op.accesses());
    const MhcLowRankSplitOp::Bound b = op.bind(ws);
    EXPECT_NE(b.normed, nullptr);
    EXPECT_EQ(b.streams != nullptr, s == Stage::norm);
    EXPECT_EQ(b.post != nullptr, s == Stage::down);
    EXPECT_EQ(b.block_in != nullptr, s == Stage::collapse);
    EXPECT_EQ(b.low != nullptr, s != Stage::norm);
  }
}

TEST(MhcBind, SlabStagesBindAtTheirRowsAndCarve) {
  const auto backend = make_cpu_backend();
  using Stage = MhcLowRankSlabOp::Stage;
  // The second slab of a 2500-token pass (m = 3000): token rows from 2048, scratch from 0.
  const MhcLowRankSlabOp norm =
      MhcLowRankSlabOp::make(Stage::norm, mhc_layout_config(8), 3000, 2048, 452);
  const Workspace ws = footprint(*backend, norm.accesses());
  const MhcLowRankSlabOp::Bound b = norm.bind(ws);
  EXPECT_EQ(
      reinterpret_cast<const std::byte*>(b.streams),
      ws.resolve(arena_tensor(BufferId::hc_streams, 0, {1}, DType::f32)) + 2048ull * 4 * 16 * 4);
  EXPECT_EQ(b.up_pre, nullptr);
  const MhcLowRankSlabOp col =
      MhcLowRankSlabOp::make(Stage::collapse, mhc_layout_config(8), 3000, 2048, 452);
  const MhcLowRankSlabOp::Bound c = col.bind(footprint(*backend, col.accesses()));
  EXPECT_NE(c.inj_pre, nullptr);
  EXPECT_NE(c.post, nullptr);
  EXPECT_EQ(c.w_up, nullptr);
}

TEST(MhcBind, PostInPlaceOrDisjointButNeverPartlyOverlapping) {
  const auto backend = make_cpu_backend();
  const std::vector<Access> big = MhcPostOp::make(mhc_layout_config(0), 4).accesses();
  const Workspace ws = footprint(*backend, big);
  MhcPostOp op = MhcPostOp::make(mhc_layout_config(0), 2);
  const MhcPostOp::Bound in_place = op.bind(ws);
  EXPECT_EQ(in_place.out, in_place.streams);
  op.out.offset = 2ull * 4 * 16 * 4;  // rows 2..3: disjoint
  EXPECT_NO_THROW(op.bind(ws));
  op.out.offset = 4;  // one float further: overlaps without being the same tensor
  EXPECT_THROW(op.bind(ws), Error);
  // The low-rank post reads no comb.
  EXPECT_EQ(MhcPostOp::make(mhc_layout_config(8), 2).bind(ws).comb, nullptr);
}

}  // namespace
}  // namespace bufferlab

namespace bufferlab {
namespace {

// The one path rule and slab split every caller uses (plans, harness, compare, generators).
TEST(MhcPaths, SplitUpTo64TokensAndSlabsOf2048) {
  EXPECT_TRUE(MhcSplitCarve::takes_split_path(64));
  EXPECT_FALSE(MhcSplitCarve::takes_split_path(65));
  EXPECT_TRUE(mhc_gemm_slabs(0).empty());
  const std::vector<MhcSlab> two = mhc_gemm_slabs(2049);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].row0, 0u);
  EXPECT_EQ(two[0].rows, 2048u);
  EXPECT_EQ(two[1].row0, 2048u);
  EXPECT_EQ(two[1].rows, 1u);
  const std::vector<MhcSlab> one = mhc_gemm_slabs(65);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].rows, 65u);
}

}  // namespace
}  // namespace bufferlab
