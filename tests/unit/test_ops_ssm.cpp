// GDN, Mamba-2 and mHC op descriptors: sub-layout carves and footprints checked against
// offsets worked out by hand from docs/spec/buffers.md §4.5–§4.7 (the arithmetic is in the
// comments), plus the short-layout cases whose footprints must expose the overrun.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/core/ops/mhc.h"
#include "gdn_mamba2_geometry.h"
#include "mhc_config.h"

namespace bufferlab {
namespace {

// The first access of `kind` on `buffer` whose value is `value`; fails the test when absent.
const Access& find(const std::vector<Access>& acc, AccessKind kind, const std::string& value) {
  for (const Access& a : acc)
    if (a.kind == kind && a.value == value) return a;
  ADD_FAILURE() << "no " << to_string(kind) << " of value " << value;
  static const Access none;
  return none;
}

bool overlaps(const Access& a, const Access& b) {
  return a.tensor.space == Space::arena && b.tensor.space == Space::arena &&
         a.tensor.buffer == b.tensor.buffer && a.begin() < b.end() && b.begin() < a.end();
}

// Pairs of arena operands of one step that share bytes and are not a declared in-place pair
// (identical TensorRef): what the verifier reports as an overlap.
int undeclared_overlaps(const std::vector<Access>& acc) {
  int n = 0;
  for (size_t i = 0; i < acc.size(); ++i)
    for (size_t j = i + 1; j < acc.size(); ++j) {
      const TensorRef &x = acc[i].tensor, &y = acc[j].tensor;
      const bool identical = x.offset == y.offset && x.shape == y.shape && x.dtype == y.dtype;
      if (overlaps(acc[i], acc[j]) && !identical) ++n;
    }
  return n;
}

// nk 1 × kd 128, nv 2 × vd 128, conv kernel 4.
ModelConfig gdn_config() { return testing::gdn_config(1, 128, 2, 128); }

// --- GDN -----------------------------------------------------------------------------------

TEST(GdnOps, GeometryByHand) {
  const GdnGeometry g = GdnGeometry::of(gdn_config());
  EXPECT_EQ(g.qkvz, 768u);      // 2·1·128 + 2·2·128
  EXPECT_EQ(g.conv_dim, 512u);  // 2·1·128 + 2·128
  EXPECT_EQ(g.value_dim, 256u);
}

TEST(GdnOps, ChunkCarveNv2Nt5) {
  // Regions per array: nt·nv = 10. W region 64·128·2 = 16384, U 16384, S 128·128·2 = 32768,
  // uc 16384, gc 64·4 = 256. W at 0; U at 10·16384 = 163840; S at 327680; uc at
  // 327680 + 10·32768 = 655360; gc at 655360 + 163840 = 819200; end 819200 + 2560 = 821760
  // (= nt·nv·(16384+16384+32768+16384+256), the §4.5 byte formula).
  const GdnChunkCarve c = GdnChunkCarve::make(5, 2, 128, 128);
  EXPECT_EQ(c.w, 0u);
  EXPECT_EQ(c.u, 163840u);
  EXPECT_EQ(c.s, 327680u);
  EXPECT_EQ(c.uc, 655360u);
  EXPECT_EQ(c.gc, 819200u);
  EXPECT_EQ(c.end, 821760u);
}

TEST(GdnOps, CodispatchTwoStreamsOf65) {
  // n = 2 streams of L = 65: cdiv(65,64) = 2 chunks each, 4 chunks in all ≤ nt = 5.
  // Region (b,c,v) = (b·2 + c)·2 + v: stream 0 owns regions 0..3, stream 1 regions 4..7.
  const GdnGeometry g = GdnGeometry::of(gdn_config());
  const auto wu = GdnChunkOp::make(GdnChunkOp::Stage::wu, g, 0, 2, 65, 5);
  EXPECT_EQ(wu.shape().chunks_per_stream, 2u);
  EXPECT_EQ(wu.shape().chunks, 4u);
  EXPECT_EQ(wu.shape().rows, 130u);
  EXPECT_EQ(wu.params(),
            "gdn_chunk_wu(row0=0,T=130,streams=2,L=65,chunks=4,nk=1,nv=2,kd=128,vd=128,nt=5)");
  const auto acc = wu.accesses();
  // W: stream 1 starts at region 4 → 4·16384 = 65536, 4 regions = 65536 bytes.
  const Access& w1 = find(acc, AccessKind::write, "gdn_W.s1");
  EXPECT_EQ(w1.begin(), 65536u);
  EXPECT_EQ(w1.end(), 131072u);
  EXPECT_EQ(w1.tensor.shape, (std::vector<uint64_t>{4, 64, 128}));
  // U: 163840 + 4·16384 = 229376 for stream 1.
  EXPECT_EQ(find(acc, AccessKind::write, "gdn_U.s0").begin(), 163840u);
  EXPECT_EQ(find(acc, AccessKind::write, "gdn_U.s1").begin(), 229376u);
  // gc: 819200 + 4·256 = 820224 for stream 1, 1024 bytes.
  const Access& gc1 = find(acc, AccessKind::write, "gdn_gc.s1");
  EXPECT_EQ(gc1.begin(), 820224u);
  EXPECT_EQ(gc1.end(), 821248u);
  // Inputs: all 130 prefill rows of conv_out [130, 512] f32 and gates [130, 2, 2] f32.
  EXPECT_EQ(find(acc, AccessKind::read, "conv_out").end(), 130u * 512 * 4);
  EXPECT_EQ(find(acc, AccessKind::read, "gates").end(), 130u * 2 * 2 * 4);
  EXPECT_EQ(undeclared_overlaps(acc), 0);

  const auto st = GdnChunkOp::make(GdnChunkOp::Stage::state, g, 0, 2, 65, 5).accesses();
  // S: 327680 + 4·32768 = 458752 for stream 1; uc: 655360 + 4·16384 = 720896.
  EXPECT_EQ(find(st, AccessKind::write, "gdn_S.s1").begin(), 458752u);
  EXPECT_EQ(find(st, AccessKind::write, "gdn_uc.s1").begin(), 720896u);
  EXPECT_EQ(undeclared_overlaps(st), 0);

  const auto out = GdnChunkOp::make(GdnChunkOp::Stage::output, g, 0, 2, 65, 5).accesses();
  const Access& o = find(out, AccessKind::write, "gdn_core");
  EXPECT_EQ(o.tensor.buffer, BufferId::attn_output);
  EXPECT_EQ(o.end(), 130u * 256 * 2);  // [130, nv·vd] bf16
}

TEST(GdnOps, ShortNtShowsOverlapAndOverrun) {
  // B15: nt = cdiv(130, 64) = 3 without the margin, 4 chunks needed. Carve: U at
  // 6·16384 = 98304, S at 196608, uc at 196608 + 6·32768 = 393216, gc at 491520, end
  // 491520 + 6·256 = 493056. Stream 1's W [65536, 131072) runs into stream 0's U at 98304,
  // and its gc [491520 + 1024, +1024) ends at 493568 > 493056: a bounds finding.
  const GdnGeometry g = GdnGeometry::of(gdn_config());
  const auto wu = GdnChunkOp::make(GdnChunkOp::Stage::wu, g, 0, 2, 65, 3);
  EXPECT_EQ(wu.carve.end, 493056u);
  const auto acc = wu.accesses();
  EXPECT_TRUE(
      overlaps(find(acc, AccessKind::write, "gdn_W.s1"), find(acc, AccessKind::write, "gdn_U.s0")));
  EXPECT_GT(undeclared_overlaps(acc), 0);
  EXPECT_EQ(find(acc, AccessKind::write, "gdn_gc.s1").end(), 493568u);
}

TEST(GdnOps, MixedStepPrefillRowsFollowDecodeRows) {
  // Mixed step n = 3 (rung 4) + t = 100: prefill rows [4, 104). conv_out row 4 at
  // 4·512·4 = 8192; attn_output row 4 at 4·256·2 = 2048; one stream of 2 chunks → regions
  // 0..3 only (single-stream value names carry no suffix).
  const GdnGeometry g = GdnGeometry::of(gdn_config());
  const auto acc = GdnChunkOp::make(GdnChunkOp::Stage::output, g, 4, 1, 100, 18).accesses();
  EXPECT_EQ(find(acc, AccessKind::read, "conv_out").begin(), 8192u);
  const Access& o = find(acc, AccessKind::write, "gdn_core");
  EXPECT_EQ(o.begin(), 2048u);
  EXPECT_EQ(o.tensor.shape, (std::vector<uint64_t>{100, 256}));
  EXPECT_EQ(find(acc, AccessKind::read, "gdn_S").tensor.shape,
            (std::vector<uint64_t>{4, 128, 128}));

  const auto rec = GdnRecurrentOp::make(g, 0, 4).accesses();
  EXPECT_EQ(find(rec, AccessKind::write, "gdn_core").end(), 2048u);  // rows [0, 4)
}

TEST(GdnOps, HomesOfTheIntermediates) {
  const GdnGeometry g = GdnGeometry::of(gdn_config());
  const auto de = GdnDeinterleaveOp::make(g, 7).accesses();
  EXPECT_EQ(find(de, AccessKind::write, "qkvz_deint").tensor.buffer, BufferId::ssm_deinterleaved);
  EXPECT_EQ(find(de, AccessKind::write, "qkvz_deint").end(), 7u * 768 * 2);
  const auto conv = GdnConvOp::make(g, 7).accesses();
  const Access& co = find(conv, AccessKind::write, "conv_out");
  EXPECT_EQ(co.tensor.buffer, BufferId::ssm_conv_out_f32);
  EXPECT_EQ(co.end(), 7u * 512 * 4);  // [7, conv_dim] f32
  const auto gates = GdnGatesOp::make(g, 7).accesses();
  EXPECT_EQ(find(gates, AccessKind::read, "ba").end(), 7u * 4 * 2);      // [7, 2nv] bf16
  EXPECT_EQ(find(gates, AccessKind::write, "gates").end(), 7u * 4 * 4);  // [7, nv, 2] f32

  // Gated norm in place: the read of the core output and the write of the normed output
  // are the identical TensorRef (a declared in-place access).
  const auto norm = GdnGatedNormOp::make(g, 7, 1e-6).accesses();
  const Access& in = find(norm, AccessKind::read, "gdn_core");
  const Access& out = find(norm, AccessKind::write, "gdn_normed");
  EXPECT_EQ(in.tensor.offset, out.tensor.offset);
  EXPECT_EQ(in.tensor.shape, out.tensor.shape);
  EXPECT_EQ(undeclared_overlaps(norm), 0);
}

// --- Mamba-2 -------------------------------------------------------------------------------

// H 4 × P 8, state 16, 2 groups, conv kernel 4.
ModelConfig mamba_config() { return testing::mamba2_config(4, 8, 16, 2); }

TEST(Mamba2Ops, GeometryAndCarveByHand) {
  // d_inner = 4·8 = 32; d_xbc = 32 + 2·2·16 = 96; in_proj = 32 + 96 + 4 = 132.
  const Mamba2Geometry g = Mamba2Geometry::of(mamba_config());
  EXPECT_EQ(g.d_inner, 32u);
  EXPECT_EQ(g.d_xbc, 96u);
  EXPECT_EQ(g.in_proj, 132u);
  // nc = 3: dt [4][3][64] f32 = 3072 bytes at 0; dA_cumsum at 3072; CB at 6144,
  // [3][2][64][64] f32 = 98304 bytes → end 104448 (= 2·H·nc·64·4 + nc·G·64·64·4).
  const Mamba2ChunkCarve c = Mamba2ChunkCarve::make(3, 4, 2);
  EXPECT_EQ(c.da, 3072u);
  EXPECT_EQ(c.cb, 6144u);
  EXPECT_EQ(c.end, 104448u);
}

TEST(Mamba2Ops, ChunkFootprintsSpanTheHeads) {
  // One sequence of 100 tokens: cdiv(100, 64) = 2 chunks. Head h's dt chunks at
  // h·nc·64·4 = h·768 bytes; the span runs from 0 to the end of head 3's second chunk:
  // (3·3 + 2)·64 rows·4 = 2816 bytes (≤ dA_cumsum at 3072); dA_cumsum spans [3072, 5888).
  const Mamba2Geometry g = Mamba2Geometry::of(mamba_config());
  const auto op = Mamba2ChunkOp::make(Mamba2ChunkOp::Stage::cumsum, g, 0, 100, 3);
  EXPECT_EQ(op.shape().chunks, 2u);
  EXPECT_EQ(op.dt_span().offset, 0u);
  EXPECT_EQ(op.dt_span().bytes(), 2816u);
  EXPECT_EQ(op.da_span().offset, 3072u);
  EXPECT_EQ(op.da_span().offset + op.da_span().bytes(), 5888u);
  EXPECT_EQ(op.cb().offset, 6144u);
  EXPECT_EQ(op.cb().bytes(), 2u * 2 * 64 * 64 * 4);
  const auto acc = op.accesses();
  EXPECT_EQ(acc.size(), 5u);  // zxbcdt rows, A_log, dt_bias, dt span, dA span
  EXPECT_EQ(undeclared_overlaps(acc), 0);

  // nc = 1 (short): dA_cumsum at 4·64·4 = 1024, but the dt span ends at (3·1 + 2)·256 =
  // 1280: the two writes of the cumsum step overlap.
  const auto short_nc = Mamba2ChunkOp::make(Mamba2ChunkOp::Stage::cumsum, g, 0, 100, 1);
  EXPECT_EQ(short_nc.da_span().offset, 1024u);
  EXPECT_EQ(short_nc.dt_span().bytes(), 1280u);
  EXPECT_GT(undeclared_overlaps(short_nc.accesses()), 0);
}

TEST(Mamba2Ops, CodispatchStreamCarvesFromTheStart) {
  // Stream 1 of 2 streams of L = 50 at rows [50, 100): one chunk, carve from offset 0;
  // xbc rows at 50·96·2 = 9600; attn_output rows at 50·32·2 = 3200; values suffixed .s1.
  const Mamba2Geometry g = Mamba2Geometry::of(mamba_config());
  const auto scan = Mamba2ChunkOp::make(Mamba2ChunkOp::Stage::scan, g, 50, 50, 3, 1, 2);
  const auto acc = scan.accesses();
  EXPECT_EQ(find(acc, AccessKind::read, "xbc").begin(), 9600u);
  EXPECT_EQ(find(acc, AccessKind::read, "ssd_CB.s1").begin(), 6144u);
  EXPECT_EQ(find(acc, AccessKind::read, "ssd_dt.s1").begin(), 0u);
  const Access& y = find(acc, AccessKind::write, "ssd_out");
  EXPECT_EQ(y.begin(), 3200u);
  EXPECT_EQ(y.end(), 6400u);
}

TEST(Mamba2Ops, ConvAndGatedNormHomes) {
  const Mamba2Geometry g = Mamba2Geometry::of(mamba_config());
  const auto conv = Mamba2ConvOp::make(g, 5).accesses();
  EXPECT_EQ(find(conv, AccessKind::read, "zxbcdt").end(), 5u * 132 * 2);
  const Access& x = find(conv, AccessKind::write, "xbc");
  EXPECT_EQ(x.tensor.buffer, BufferId::ssm_deinterleaved);
  EXPECT_EQ(x.end(), 5u * 96 * 2);
  const auto op = Mamba2GatedNormOp::make(g, 5, 1e-5);
  EXPECT_EQ(op.shape().group_size, 16u);  // d_inner / G = 32 / 2
  const auto acc = op.accesses();
  const Access& n = find(acc, AccessKind::write, "mamba_normed");
  EXPECT_EQ(n.tensor.buffer, BufferId::norm_output);
  EXPECT_EQ(n.end(), 5u * 32 * 2);
}

// --- mHC -----------------------------------------------------------------------------------

using testing::mhc_layout_config;

TEST(MhcOps, LowRankSplitLayoutAtT64) {
  // hc = 4, h = 16, r = 8, T = 64: normed [64, 64] f32 = 16384 bytes at 0, low [64, 8] f32
  // at 16384 → end 18432 = t·(hc·h + r)·4 of the §3 formula with t = 64.
  const ModelConfig c = mhc_layout_config(8);
  const MhcSplitCarve k = MhcSplitCarve::make(64, 4, 16, 8);
  EXPECT_EQ(k.low, 16384u);
  EXPECT_EQ(k.end, 18432u);
  const auto down = MhcLowRankSplitOp::make(MhcLowRankSplitOp::Stage::down, c, 64).accesses();
  const Access& low = find(down, AccessKind::write, "hc_low");
  EXPECT_EQ(low.begin(), 16384u);
  EXPECT_EQ(low.end(), 18432u);
  EXPECT_EQ(find(down, AccessKind::write, "hc_post").tensor.buffer, BufferId::hc_post);
  const auto col = MhcLowRankSplitOp::make(MhcLowRankSplitOp::Stage::collapse, c, 64).accesses();
  EXPECT_EQ(find(col, AccessKind::write, "norm").end(), 64u * 16 * 2);
}

TEST(MhcOps, LowRankGemmLayoutAtT65) {
  // m = 100 → Ts = min(100, 2048) = 100 rows carved: normed [100, 64] bf16 at 0 (12800
  // bytes); up_pre at 12800; low at 25600; inj_pre at 25600 + 100·8·2 = 27200; end
  // 27200 + 100·4·2 = 28000 = ts·(2·hc·h + r + hc)·2. T = 65 writes 65 rows of each.
  const ModelConfig c = mhc_layout_config(8);
  const MhcGemmCarve k = MhcGemmCarve::make(100, 4, 16, 8);
  EXPECT_EQ(k.slab_rows, 100u);
  EXPECT_EQ(k.up_pre, 12800u);
  EXPECT_EQ(k.low, 25600u);
  EXPECT_EQ(k.inj_pre, 27200u);
  EXPECT_EQ(k.end, 28000u);
  using Stage = MhcLowRankSlabOp::Stage;
  const auto up = MhcLowRankSlabOp::make(Stage::up, c, 100, 0, 65).accesses();
  const Access& u = find(up, AccessKind::write, "hc_up_pre");
  EXPECT_EQ(u.begin(), 12800u);
  EXPECT_EQ(u.end(), 12800u + 65 * 64 * 2);
  EXPECT_EQ(find(up, AccessKind::read, "hc_low").end(), 25600u + 65 * 8 * 2);
  const auto col = MhcLowRankSlabOp::make(Stage::collapse, c, 100, 0, 65).accesses();
  EXPECT_EQ(find(col, AccessKind::read, "hc_inj_pre").begin(), 27200u);
  EXPECT_EQ(undeclared_overlaps(col), 0);
}

TEST(MhcOps, SecondSlabReadsItsOwnStreamRows) {
  // T = 2500 with m = 3000: slabs of 2048 and 452 rows; Ts = 2048. The second slab's
  // norm reads hc_streams from row 2048 (2048·4·16·4 = 524288) and writes normed at 0.
  const ModelConfig c = mhc_layout_config(8);
  using Stage = MhcLowRankSlabOp::Stage;
  const auto acc = MhcLowRankSlabOp::make(Stage::norm, c, 3000, 2048, 452).accesses();
  const Access& x = find(acc, AccessKind::read, "@hc");
  EXPECT_EQ(x.begin(), 524288u);
  EXPECT_EQ(x.tensor.shape, (std::vector<uint64_t>{452, 4, 16}));
  EXPECT_EQ(find(acc, AccessKind::write, "hc_normed").begin(), 0u);
  const auto col = MhcLowRankSlabOp::make(Stage::collapse, c, 3000, 2048, 452).accesses();
  EXPECT_EQ(find(col, AccessKind::write, "norm").begin(), 2048u * 16 * 2);
  EXPECT_EQ(find(col, AccessKind::write, "hc_post").begin(), 2048u * 4 * 4);
}

TEST(MhcOps, SinkhornPrePostAndHead) {
  const ModelConfig c = mhc_layout_config(0);
  const auto pre = MhcPreOp::make(c, 7).accesses();
  EXPECT_EQ(find(pre, AccessKind::write, "hc_comb").end(), 7u * 4 * 4 * 4);  // [7, hc, hc] f32
  EXPECT_EQ(find(pre, AccessKind::write, "hc_post").end(), 7u * 4 * 4);      // [7, hc] f32
  EXPECT_EQ(find(pre, AccessKind::write, "norm").tensor.buffer, BufferId::norm_output);

  // Post updates the streams in place (identical read and write) and reads comb.
  const auto post = MhcPostOp::make(c, 7).accesses();
  const Access& r = find(post, AccessKind::read, "@hc");
  const Access& w = find(post, AccessKind::write, "@hc");
  EXPECT_EQ(r.tensor.shape, w.tensor.shape);
  EXPECT_EQ(r.end(), 7u * 4 * 16 * 4);
  EXPECT_EQ(find(post, AccessKind::read, "@block_out").end(), 7u * 16 * 2);
  find(post, AccessKind::read, "hc_comb");
  EXPECT_EQ(undeclared_overlaps(post), 0);

  // The low-rank post does not read hc_comb (docs/spec/numerics.md §4).
  for (const Access& a : MhcPostOp::make(mhc_layout_config(8), 7).accesses())
    EXPECT_NE(a.value, "hc_comb");

  const auto head = MhcHeadOp::make(c, 7).accesses();
  const Access& y = find(head, AccessKind::write, "@hc_head");
  EXPECT_EQ(y.tensor.buffer, BufferId::hidden_states);
  EXPECT_EQ(y.end(), 7u * 16 * 2);
}

}  // namespace
}  // namespace bufferlab
