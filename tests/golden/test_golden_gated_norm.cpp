// Golden gated RMSNorms (docs/golden.md): the GDN output norm against transformers'
// Qwen3NextRMSNormGated (RMSNorm(o)·w·silu(z) per value head, the plain weight) and the Mamba-2
// output norm against NemotronHRMSNormGated (norm_before_gate = False: g = y·silu(z) normalised
// over groups of d_inner / n_groups columns, times w), each evaluated in FP64 on stored BF16
// inputs, against the FP64 oracle and every backend (docs/spec/numerics.md §1, §5, §6).
//
// Bounds. Each FP64 evaluation is within ε = γ_(n+14)(2^-53)·|y| of the exact y, n the columns
// normalised together (the head or the group): the squares (1), their sum (n − 1), / n (1),
// + eps (1), rsqrt as 1/sqrt (2), the products with the input and the weight (2), silu's exp,
// add, division and product (4), the product with it (1), one spare. Oracle vs golden: 2ε. A
// backend's BF16 output: the oracle's stage bound (gdn_detail::gated_norm_bounds,
// mamba2_detail::gated_norm_bounds: against bf16(y)) + half a BF16 ULP of y + 2ε.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/gdn_stages.h"
#include "bufferlab/oracle/mamba2_stages.h"
#include "bufferlab/oracle/pool_placement.h"
#include "gdn_mamba2_geometry.h"
#include "golden_case.h"
#include "workspace_rig.h"

namespace bufferlab::golden {
namespace {

// got against the golden `want`: bound[i] (against the exact value) + 2ε.
BoundedCheck judge(const std::vector<double>& got, const std::vector<double>& want,
                   const std::vector<double>& bound, double n, uint64_t width,
                   const std::string& name) {
  BoundedCheck check(name);
  const double gam = oracle::gamma(n + 14.0, oracle::kFp64UnitRoundoff);
  for (uint64_t i = 0; i < want.size(); ++i)
    check.add(got[i], want[i], bound[i] + 2.0 * gam * std::fabs(want[i]),
              fmt::format("row {} col {}", i / width, i % width));
  return check;
}

// ---- GDN: Qwen3NextRMSNormGated ------------------------------------------------------------

struct GdnNormCase {
  GoldenCase g = load_golden("gdn_gated_norm_qwen3_next");
  uint64_t rows = g.param("rows");
  GdnGeometry geom = testing::gdn_geometry(1, 16, g.param("nv"), g.param("vd"));
  oracle::GdnDims dims{.geom = geom, .sequences = 1, .L = rows, .eps = g.real("eps")};
  std::vector<uint16_t> deint, norm_w = bf16_bits_of(g.values("weight")),
                               o = bf16_bits_of(g.values("o"));
  std::vector<double> exact;

  GdnNormCase() {
    deint.assign(rows * geom.qkvz, 0);
    const uint64_t z_col = 2 * geom.nk * geom.kd + geom.value_dim;
    const std::vector<uint16_t> z = bf16_bits_of(g.values("z"));
    for (uint64_t t = 0; t < rows; ++t)
      for (uint64_t c = 0; c < geom.value_dim; ++c)
        deint[t * geom.qkvz + z_col + c] = z[t * geom.value_dim + c];
    exact = oracle::gdn_detail::gated_norm_stage(dims, widen_bf16(o), deint, norm_w);
  }
};

TEST(GoldenGatedNorm, GdnOracleAndBackendsMatchQwen3NextRmsNormGated) {
  const GdnNormCase c;
  const double n = static_cast<double>(c.geom.vd);
  const std::vector<double>& want = c.g.values("y");
  expect_passed(judge(c.exact, want, std::vector<double>(want.size(), 0.0), n, c.geom.value_dim,
                      "GDN gated norm oracle vs Qwen3NextRMSNormGated"));
  for (const GoldenBackend& b : golden_backends()) {
    SCOPED_TRACE(b.name);
    GdnGatedNormOp op = GdnGatedNormOp::make(c.geom, c.rows, c.dims.eps);
    const uint64_t pool = oracle::place_in_pool({&op.weight});
    testing::Rig rig(*b.backend, {op.accesses()}, pool);
    rig.put(op.io, c.o);
    rig.put(op.z, c.deint);
    rig.put(op.weight, c.norm_w);
    rig.backend->gdn_gated_norm(rig.ws, op);
    const std::vector<double> got = widen_bf16(rig.get<uint16_t>(op.io));
    std::vector<double> bound =
        oracle::gdn_detail::gated_norm_bounds(c.dims, widen_bf16(c.o), c.norm_w, c.exact, b.bm)
            .bound;
    for (uint64_t i = 0; i < bound.size(); ++i) bound[i] += 0.5 * oracle::bf16_ulp_at(c.exact[i]);
    expect_passed(judge(got, want, bound, n, c.geom.value_dim,
                        b.name + " GDN gated norm vs Qwen3NextRMSNormGated"));
  }
}

// Planted bug: the weight as an offset from 1 (the plain RMSNorm's convention) in the gated norm.
TEST(GoldenGatedNorm, GdnPlantedOffsetWeightIsCaught) {
  const GdnNormCase c;
  std::vector<double> wrong = c.exact;
  const std::vector<double>& w = c.g.values("weight");
  for (uint64_t i = 0; i < wrong.size(); ++i) {
    const double wi = w[i % c.geom.vd];
    wrong[i] = wrong[i] / wi * (1.0 + wi);
  }
  const std::vector<double>& want = c.g.values("y");
  expect_caught(judge(wrong, want, std::vector<double>(want.size(), 0.0),
                      static_cast<double>(c.geom.vd), c.geom.value_dim,
                      "planted (1 + w) in the GDN gated norm"));
}

// ---- Mamba-2: NemotronHRMSNormGated --------------------------------------------------------

struct SsdNormCase {
  GoldenCase g = load_golden("ssd_gated_norm_nemotron_h");
  uint64_t rows = g.param("rows");
  Mamba2Geometry geom =
      testing::mamba2_geometry(g.param("H"), g.param("P"), 16, g.param("n_groups"));
  oracle::Mamba2Dims dims{.geom = geom, .sequences = 1, .L = rows, .eps = g.real("eps")};
  std::vector<uint16_t> zxbcdt, norm_w = bf16_bits_of(g.values("weight")),
                                y = bf16_bits_of(g.values("y"));
  std::vector<double> exact;
  double group = static_cast<double>(geom.d_inner / geom.G);

  SsdNormCase() {
    zxbcdt.assign(rows * geom.in_proj, 0);
    const std::vector<uint16_t> z = bf16_bits_of(g.values("z"));
    for (uint64_t t = 0; t < rows; ++t)
      for (uint64_t c = 0; c < geom.d_inner; ++c)
        zxbcdt[t * geom.in_proj + c] = z[t * geom.d_inner + c];
    exact = oracle::mamba2_detail::gated_norm_fp64(dims, widen_bf16(y), zxbcdt, norm_w);
  }
};

TEST(GoldenGatedNorm, SsdOracleAndBackendsMatchNemotronHRmsNormGated) {
  const SsdNormCase c;
  const std::vector<double>& want = c.g.values("out");
  expect_passed(judge(c.exact, want, std::vector<double>(want.size(), 0.0), c.group, c.geom.d_inner,
                      "Mamba-2 gated norm oracle vs NemotronHRMSNormGated"));
  for (const GoldenBackend& b : golden_backends()) {
    SCOPED_TRACE(b.name);
    Mamba2GatedNormOp op = Mamba2GatedNormOp::make(c.geom, c.rows, c.dims.eps);
    const uint64_t pool = oracle::place_in_pool({&op.weight});
    testing::Rig rig(*b.backend, {op.accesses()}, pool);
    rig.put(op.input, c.y);
    rig.put(op.z, c.zxbcdt);
    rig.put(op.weight, c.norm_w);
    rig.backend->mamba2_gated_norm(rig.ws, op);
    const std::vector<double> got = widen_bf16(rig.get<uint16_t>(op.output));
    std::vector<double> bound =
        oracle::mamba2_detail::gated_norm_bounds(c.dims, widen_bf16(c.y), c.zxbcdt, c.norm_w, b.bm);
    for (uint64_t i = 0; i < bound.size(); ++i) bound[i] += 0.5 * oracle::bf16_ulp_at(c.exact[i]);
    expect_passed(judge(got, want, bound, c.group, c.geom.d_inner,
                        b.name + " Mamba-2 gated norm vs NemotronHRMSNormGated"));
  }
}

// Planted bug: one RMS over the whole d_inner instead of one per group.
TEST(GoldenGatedNorm, SsdPlantedUngroupedNormIsCaught) {
  const SsdNormCase c;
  oracle::Mamba2Dims one_group = c.dims;
  one_group.geom.G = 1;
  const std::vector<double> wrong =
      oracle::mamba2_detail::gated_norm_fp64(one_group, widen_bf16(c.y), c.zxbcdt, c.norm_w);
  const std::vector<double>& want = c.g.values("out");
  expect_caught(judge(wrong, want, std::vector<double>(want.size(), 0.0), c.group, c.geom.d_inner,
                      "planted ungrouped Mamba-2 gated norm"));
}

}  // namespace
}  // namespace bufferlab::golden
