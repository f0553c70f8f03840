// The GDN / SSD case generators (properties/gdn_mamba2_generators.h): the cost formulas against
// values worked by hand, and over many draws of each range — every case fits its cost cap,
// its config validates and builds the oracle's dims, GQA and group divisibility hold, the
// chunked path only with kd = vd = 128, and the chunk edges, both paths, every regime and the
// full range's many-streams cases all occur.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <set>

#include "bufferlab/properties/gdn_mamba2_generators.h"

namespace bufferlab {
namespace {

using oracle::GdnPath;
using oracle::Mamba2Path;
using U = uint64_t;

constexpr U kDraws = 600;

// Draws `n` values of `g` at sizes 0..100 (as a RapidCheck run grows them), seeded.
template <class T>
std::vector<T> sample(const rc::Gen<T>& g, U n) {
  std::vector<T> out;
  for (U i = 0; i < n; ++i)
    out.push_back(g(rc::Random(0x5eed + i), static_cast<int>(i * 100 / n)).value());
  return out;
}

TEST(SsmGenerators, CostFormulasByHand) {
  // Chunked, kd = vd = 128: 64·256 + 3·16384 = 65536 per token and head.
  EXPECT_EQ(gen::gdn_call_cost(GdnPath::chunked, 10, 2, 128, 128), 10u * 2u * 65536u);
  // Recurrence: 3·kd·vd = 3·16·32 = 1536.
  EXPECT_EQ(gen::gdn_call_cost(GdnPath::recurrent, 7, 3, 16, 32), 7u * 3u * 1536u);
  // SSD chunked: T·H·(64·P + 2·N·P) + T·G·64·N = 5·4·(64·16 + 2·8·16) + 5·2·64·8 = 25600 + 5120.
  EXPECT_EQ(gen::mamba2_call_cost(Mamba2Path::chunked, 5, 4, 16, 8, 2), 30720u);
  EXPECT_EQ(gen::mamba2_call_cost(Mamba2Path::chunked, 5, 4, 16, 8, 0), 25600u + 2560u);  // G = 1
  EXPECT_EQ(gen::mamba2_call_cost(Mamba2Path::recurrent, 5, 4, 16, 8, 2), 5u * 4u * 2u * 8u * 16u);
}

// What both SSM generators must cover: the L edges, both paths, a zero initial state, and (on the
// full range only) 8 or more sequences of a length off the 64-token chunk grid.
template <class Path>
struct SsmCoverage {
  std::set<U> Ls;
  std::set<Path> paths;
  bool zero = false, many = false;

  template <class Case>
  void add(const Case& c) {
    Ls.insert(c.L);
    paths.insert(c.path);
    zero |= c.profile.zero_state;
    many |= c.sequences >= 8 && c.L % 64 != 0;
  }

  void expect_covered(bool full) const {
    for (U L : {1, 63, 64, 65, 127}) EXPECT_TRUE(Ls.count(L)) << "L = " << L;
    EXPECT_EQ(paths.size(), 2u);
    EXPECT_TRUE(zero);
    EXPECT_EQ(many, full);
  }
};

void check_gdn(const gen::GdnRanges& r, bool full) {
  SsmCoverage<GdnPath> covered;
  std::set<oracle::GdnGateRegime> alphas;
  bool forced_recurrent = false, parallel = false;
  for (const gen::GdnCase& c : sample(gen::gdn_case(r), kDraws)) {
    SCOPED_TRACE(c.describe());
    EXPECT_LE(c.cost(), r.cost_cap);
    EXPECT_NO_THROW(c.config.validate());
    EXPECT_NO_THROW((void)c.dims());
    EXPECT_EQ(c.nv() % c.nk(), 0u);
    EXPECT_LE(c.nv() / c.nk(), r.max_gqa);
    EXPECT_GE(c.config.linear_conv_kernel_dim, 2u);
    EXPECT_LE(c.config.linear_conv_kernel_dim, 4u);
    EXPECT_GE(c.L, 1u);
    EXPECT_LE(c.L, r.max_L);
    EXPECT_LE(c.sequences, r.max_sequences);
    if (c.path == GdnPath::chunked) {
      EXPECT_TRUE(c.chunkable());
    }
    if (!c.chunkable()) {
      EXPECT_GE(std::min(c.kd(), c.vd()), r.min_head_dim);
      EXPECT_LE(std::max(c.kd(), c.vd()), r.max_head_dim);
    }
    covered.add(c);
    alphas.insert(c.profile.alpha);
    forced_recurrent |= c.chunkable() && c.path == GdnPath::recurrent;
    parallel |= c.profile.parallel_keys;
  }
  covered.expect_covered(full);
  EXPECT_EQ(alphas.size(), 3u);
  EXPECT_TRUE(forced_recurrent);
  EXPECT_TRUE(parallel);
}

TEST(SsmGenerators, GdnCiCasesFitAndCoverTheEdges) { check_gdn(gen::ci_gdn_ranges(), false); }
TEST(SsmGenerators, GdnFullRangeCasesFitAndCoverTheEdges) {
  check_gdn(gen::full_gdn_ranges(), true);
}

void check_mamba2(const gen::Mamba2Ranges& r, bool full) {
  SsmCoverage<Mamba2Path> covered;
  std::set<oracle::Mamba2DtRegime> dts;
  bool grouped = false;
  for (const gen::Mamba2Case& c : sample(gen::mamba2_case(r), kDraws)) {
    SCOPED_TRACE(c.describe());
    EXPECT_LE(c.cost(), r.cost_cap);
    EXPECT_NO_THROW(c.config.validate());
    EXPECT_NO_THROW((void)c.dims());
    EXPECT_GE(c.ng(), 1u);
    EXPECT_EQ(c.H() % c.ng(), 0u);
    EXPECT_LE(c.P(), r.max_head_dim);
    EXPECT_LE(c.N(), r.max_state);
    EXPECT_LE(c.L, r.max_L);
    covered.add(c);
    dts.insert(c.profile.dt);
    grouped |= c.ng() > 1 && c.ng() < c.H();
  }
  covered.expect_covered(full);
  EXPECT_EQ(dts.size(), 3u);
  EXPECT_TRUE(grouped);
}

TEST(SsmGenerators, SsdCiCasesFitAndCoverTheEdges) { check_mamba2(gen::ci_mamba2_ranges(), false); }
TEST(SsmGenerators, SsdFullRangeCasesFitAndCoverTheEdges) {
  check_mamba2(gen::full_mamba2_ranges(), true);
}

}  // namespace
}  // namespace bufferlab
