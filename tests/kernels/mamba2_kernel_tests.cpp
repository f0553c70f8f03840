// Mamba-2's kernels (docs/spec/numerics.md §6, core ops/mamba2.h) on the backend under test
// (tests/support/backend_under_test.h), each stage op on small cases of its own inputs against
// the oracle's stage reference fed the backend's STORED inputs (docs/spec/numerics.md §9), under
// the oracle's derived per-element bounds (oracle::judge_mamba2_stage: the checks judge_mamba2
// makes, written in oracle/src/mamba2_bounds.cpp; the device bound model on a backend other than
// the CPU):
//   - conv1d: L < K − 1 keeps part of the old tail, decode batches, taps and rows past the
//     kernel's tiles, the tail exact; split calls equal one call bit for bit;
//   - chunked SSD (cumsum, bmm, scan): dt, dA_cumsum, CB, y and the final state, zeros past a
//     partial chunk, the scan's inputs intact; L = 1, 63, 64, 65, 127, H/G = 1 and 2, P ≠ N,
//     state slices that split P unevenly (N = 200) or fill a block, N = 40 (a partial tile),
//     P = N = 256, row0 > 0 (the rows before it untouched), nc above the chunk count (the
//     head-stride gaps untouched); dt clamps and the softplus threshold;
//   - both paths against the FP64 definition under a written chain bound;
//   - recurrence: sequences and decode batches; gated norm over groups; M-SSDSTATE; errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend_under_test.h"
#include "bf16_shorthands.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/oracle/compare.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_judge.h"
#include "bufferlab/oracle/mamba2_stages.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/pool_placement.h"
#include "gdn_mamba2_geometry.h"
#include "mamba2_chain_bound.h"
#include "seeded_values.h"
#include "workspace_rig.h"

// The Mamba-2 twins of gdn_kernel_tests.cpp's helpers (run_conv, RecRun, kC, ...) live in a
// namespace of their own: one unity batch may hold both files.
namespace bufferlab::mamba2_kernel_tests {
namespace {

using Bits = std::vector<uint16_t>;
using Floats = std::vector<float>;
using Doubles = std::vector<double>;
using Stage = Mamba2ChunkOp::Stage;
using oracle::Mamba2StageGroup;
using testing::fl;
using testing::mamba2_geometry;
using testing::Rig;
using testing::seeded_bf16_values;
using testing::seeded_values;

constexpr double kU = 0x1p-24;         // FP32 unit roundoff
constexpr double kU8 = 0x1p-8;         // BF16 unit roundoff
constexpr double kSecondOrder = 1.01;  // covers the products of first-order terms in a bound
constexpr uint64_t kC = Mamba2ChunkCarve::kChunk;
constexpr uint16_t kPoisonBf16 = 0xFFFF;  // the arena's poison pattern (all bits set)
constexpr uint32_t kPoisonF32 = 0xFFFFFFFF;

uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

oracle::Mamba2Dims dims_of(const Mamba2Geometry& g, uint64_t sequences, uint64_t L,
                           double eps = 1e-6) {
  return {.geom = g, .sequences = sequences, .L = L, .eps = eps};
}

Doubles widen(const Floats& v) { return {v.begin(), v.end()}; }
Doubles widen(const Bits& v) {
  Doubles out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = fl(v[i]);
  return out;
}

// One layer's SSD inputs for S sequences of L tokens: in_proj rows with dt_raw in [−4, −2], the
// conv output xBC, A_log in [−2, 0] (dt·|A| ≤ 0.13: a chunk decays by e^-0.15 .. e^-8, so the
// state carried between chunks is visible in y), dt_bias, D and the initial states [S, H, P, N].
struct Inputs {
  Mamba2Geometry g;
  uint64_t S = 1, L = 0;
  oracle::Mamba2Inputs in;  // zxbcdt, a_log, dt_bias, D, state
  Bits xbc;
  uint64_t rows() const { return S * L; }
};

Inputs mamba2_inputs(const Mamba2Geometry& g, uint64_t S, uint64_t L, uint64_t seed) {
  Inputs x;
  x.g = g;
  x.S = S;
  x.L = L;
  const uint64_t rows = S * L;
  x.in.zxbcdt = seeded_bf16_values(rows * g.in_proj, seed, 1.0f);
  const Bits raw = seeded_bf16_values(rows * g.H, seed + 1, 1.0f, -3.0f);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t h = 0; h < g.H; ++h)
      x.in.zxbcdt[r * g.in_proj + g.d_inner + g.d_xbc + h] = raw[r * g.H + h];
  x.xbc = seeded_bf16_values(rows * g.d_xbc, seed + 2, 1.0f);
  x.in.a_log = seeded_values(g.H, seed + 3, 1.0f, -1.0f);
  x.in.dt_bias = seeded_values(g.H, seed + 4, 0.25f, -0.25f);
  x.in.D = seeded_values(g.H, seed + 5, 1.0f);
  x.in.state = seeded_values(S * g.H * g.P * g.N, seed + 6, 0.5f);
  return x;
}

// A head-strided span (head h's chunks at h·nc) compacted to [H, chunks, 64].
Floats compact_heads(const Floats& span, uint64_t H, uint64_t nc, uint64_t chunks) {
  Floats out;
  for (uint64_t h = 0; h < H; ++h)
    out.insert(out.end(), span.begin() + static_cast<std::ptrdiff_t>(h * nc * kC),
               span.begin() + static_cast<std::ptrdiff_t>((h * nc + chunks) * kC));
  return out;
}

// The three stages of one sequence (S = 1) at rows [row0, row0 + L), on one workspace.
struct ChunkRun {
  uint64_t nc = 0;
  Floats dt_span, da_span;  // head-strided as stored: element (h·nc + c)·64 + i
  oracle::Mamba2Run run;    // compacted, with what the scan read
  Bits rows_before;         // attn_output rows [0, row0) after the call (never written)
};

ChunkRun run_chunked(const Inputs& x, uint64_t row0 = 0, Mutant mutant = Mutant::none,
                     uint64_t extra_nc = 1) {
  ChunkRun r;
  const Mamba2Geometry& g = x.g;
  const uint64_t chunks = cdiv(x.L, kC);
  r.nc = chunks + extra_nc;
  Mamba2ChunkOp cumsum = Mamba2ChunkOp::make(Stage::cumsum, g, row0, x.L, r.nc);
  const uint64_t pool =
      oracle::place_in_pool({&cumsum.a_log, &cumsum.dt_bias, &cumsum.D, &cumsum.state});
  Mamba2ChunkOp bmm = cumsum, scan = cumsum;
  bmm.stage = Stage::bmm;
  scan.stage = Stage::scan;
  Rig rig(testing::backend_under_test(), {cumsum.accesses(), bmm.accesses(), scan.accesses()},
          pool);
  rig.put(cumsum.zxbcdt_rows(), x.in.zxbcdt);
  rig.put(cumsum.xbc_rows(), x.xbc);
  rig.put(cumsum.a_log, x.in.a_log);
  rig.put(cumsum.dt_bias, x.in.dt_bias);
  rig.put(cumsum.D, x.in.D);
  rig.put(cumsum.state, x.in.state);
  oracle::Mamba2Run::Sequence s;
  rig.backend->mamba2_chunk(rig.ws, cumsum);
  r.dt_span = rig.get<float>(cumsum.dt_span());
  r.da_span = rig.get<float>(cumsum.da_span());
  s.dt = compact_heads(r.dt_span, g.H, r.nc, chunks);
  s.da = compact_heads(r.da_span, g.H, r.nc, chunks);
  rig.backend->mamba2_chunk(rig.ws, bmm);
  s.cb = rig.get<float>(bmm.cb());
  s.dt_before_scan = compact_heads(rig.get<float>(scan.dt_span()), g.H, r.nc, chunks);
  s.da_before_scan = compact_heads(rig.get<float>(scan.da_span()), g.H, r.nc, chunks);
  s.cb_before_scan = rig.get<float>(scan.cb());
  s.state_in = rig.get<float>(scan.state);
  rig.backend->set_kernel_mutant(mutant);
  try {
    rig.backend->mamba2_chunk(rig.ws, scan);
  } catch (...) {
    rig.backend->set_kernel_mutant(Mutant::none);
    throw;
  }
  rig.backend->set_kernel_mutant(Mutant::none);
  // After the scan: the head-stride gaps still hold the poison (never written).
  r.dt_span = rig.get<float>(cumsum.dt_span());
  r.da_span = rig.get<float>(cumsum.da_span());
  s.state = rig.get<float>(scan.state);
  r.run.path = oracle::Mamba2Path::chunked;
  r.run.xbc = x.xbc;
  r.run.y = rig.get<uint16_t>(scan.output_rows());
  r.run.state_in = s.state_in;
  r.run.state = s.state;
  r.run.sequences.push_back(std::move(s));
  if (row0 > 0) {
    TensorRef before = scan.output_rows();
    before.offset -= row0 * g.d_inner * sizeof(uint16_t);
    before.shape = {row0, g.d_inner};
    r.rows_before = rig.get<uint16_t>(before);
  }
  return r;
}

struct RecRun {
  Floats state;
  Bits y;
};

RecRun run_recurrent(const Inputs& x, uint64_t row0 = 0, uint64_t sequences = 0) {
  Mamba2RecurrentOp op =
      Mamba2RecurrentOp::make(x.g, row0, x.rows(), sequences == 0 ? x.S : sequences);
  const uint64_t pool = oracle::place_in_pool({&op.state, &op.a_log, &op.dt_bias, &op.D});
  Rig rig(testing::backend_under_test(), {op.accesses()}, pool);
  rig.put(op.zxbcdt, x.in.zxbcdt);
  rig.put(op.xbc, x.xbc);
  rig.put(op.a_log, x.in.a_log);
  rig.put(op.dt_bias, x.in.dt_bias);
  rig.put(op.D, x.in.D);
  rig.put(op.state, x.in.state);
  rig.backend->mamba2_recurrent(rig.ws, op);
  return {rig.get<float>(op.state), rig.get<uint16_t>(op.output)};
}

class Mamba2Kernel : public testing::KernelTest {
 protected:
  static oracle::BoundModel bounds() {
    return on_cpu() ? oracle::cpu_bounds() : oracle::device_bounds();
  }
  static oracle::AgreementReport judge(Mamba2StageGroup group, const oracle::Mamba2Dims& d,
                                       const oracle::Mamba2Inputs& in,
                                       const oracle::Mamba2Run& run) {
    oracle::AgreementReport r{"mamba2_ssd", d.geom.to_string(), backend().name(), 0, {}, {}};
    oracle::judge_mamba2_stage(group, d, in, run, bounds(), r);
    return r;
  }
  static void expect_passed(const oracle::AgreementReport& r) {
    EXPECT_FALSE(r.checks.empty());
    EXPECT_TRUE(r.passed()) << oracle::format_report(r);
  }
  // Every chunked stage of `r` on its stored inputs; the rows before row0 and the head-stride
  // gaps past the chunks untouched (still the poison).
  static void expect_chunked_passes(const Inputs& x, const ChunkRun& r) {
    expect_passed(judge(Mamba2StageGroup::core, dims_of(x.g, 1, x.L), x.in, r.run));
    for (uint16_t b : r.rows_before) EXPECT_EQ(b, kPoisonBf16) << "a row before row0 was written";
    const uint64_t chunks = cdiv(x.L, kC);
    uint64_t gaps_written = 0;
    // Chunks [chunks, nc) of every head but the last lie inside the span and belong to nobody.
    for (uint64_t h = 0; h + 1 < x.g.H; ++h)
      for (uint64_t e = (h * r.nc + chunks) * kC; e < (h + 1) * r.nc * kC; ++e)
        gaps_written += (std::bit_cast<uint32_t>(r.dt_span[e]) != kPoisonF32) +
                        (std::bit_cast<uint32_t>(r.da_span[e]) != kPoisonF32);
    EXPECT_EQ(gaps_written, 0u) << "the head-stride gaps past the chunks were written";
  }
};

// ============================================================== chunked SSD

struct ScanCase {
  uint64_t H, P, N, G, L, row0;
};

std::string describe(const ScanCase& k) {
  return "H=" + std::to_string(k.H) + " P=" + std::to_string(k.P) + " N=" + std::to_string(k.N) +
         " G=" + std::to_string(k.G) + " L=" + std::to_string(k.L) +
         " row0=" + std::to_string(k.row0);
}

// L = 1, 63, 64, 65, 127; H/G = 1 and 2; P ≠ N both ways; nonzero initial states; row0 ≠ 0.
constexpr ScanCase kScanCases[] = {
    {2, 8, 16, 2, 1, 0},  {4, 16, 8, 2, 63, 0},   {2, 8, 16, 1, 64, 0},
    {4, 16, 8, 2, 65, 3}, {2, 24, 16, 1, 127, 0},
};

using Mamba2KernelChunk = Mamba2Kernel;

TEST_F(Mamba2KernelChunk, StagesMatchTheOracle) {
  uint64_t seed = 100;
  for (const ScanCase& k : kScanCases) {
    SCOPED_TRACE(describe(k));
    const Inputs x = mamba2_inputs(mamba2_geometry(k.H, k.P, k.N, k.G), 1, k.L, seed += 10);
    expect_chunked_passes(x, run_chunked(x, k.row0));
  }
}

// P = N = kMaxMamba2Dim: the kernels' largest stack panels, two chunks.
TEST_F(Mamba2KernelChunk, LargestHeadDimAndStateSize) {
  const Inputs x = mamba2_inputs(mamba2_geometry(1, kMaxMamba2Dim, kMaxMamba2Dim, 1), 1, 65, 7);
  expect_chunked_passes(x, run_chunked(x));
}

// State slices that split P unevenly (P = 24, N = 200: slices of 10, 10, 4) and fill a block
// (P = 64, N = 32), N = 40 (a partial 32-column CB tile); L = 1, 64, 65, 127; row0 0 and 3.
TEST_F(Mamba2KernelChunk, DeviceTileShapes) {
  const ScanCase shapes[] = {{2, 16, 16, 1, 0, 0},
                             {2, 24, 200, 2, 0, 0},
                             {4, 64, 32, 2, 0, 0},
                             {2, 16, 40, 1, 0, 0},
                             {2, 16, 40, 2, 0, 0}};
  for (ScanCase k : shapes)
    for (uint64_t L : {1, 64, 65, 127})
      for (uint64_t row0 : {0, 3}) {
        k.L = L;
        k.row0 = row0;
        SCOPED_TRACE(describe(k));
        const Inputs x =
            mamba2_inputs(mamba2_geometry(k.H, k.P, k.N, k.G), 1, L, 31 * L + k.N + row0);
        expect_chunked_passes(x, run_chunked(x, row0));
      }
}

// dt clamps (huge raw → 1e9, hugely negative → 1e-9), both softplus branches around 20, a
// partial last chunk (L = 65) and nc above the chunk count (the head stride is nc, not chunks).
TEST_F(Mamba2KernelChunk, CumsumClampsThresholdAndPartialChunk) {
  Inputs x = mamba2_inputs(mamba2_geometry(3, 8, 16, 1), 1, 65, 31);
  // 95 and 1000: exp overflows FP32 there, so only the threshold branch gives dt = v (any
  // threshold in ~17..88 rounds alike in FP32).
  const float special[] = {3e38f, -3e38f, 25.0f, 20.5f, 19.5f, -25.0f, 0.0f, 95.0f, 1000.0f};
  const auto set_raw = [&](uint64_t r, uint64_t h, float v) {
    x.in.zxbcdt[r * x.g.in_proj + x.g.d_inner + x.g.d_xbc + h] = f32_to_bf16_bits(v);
  };
  for (uint64_t i = 0; i < std::size(special); ++i) {
    set_raw(i + 1, 0, special[i]);
    set_raw(64 - i, 2, special[i]);  // head 2: the end of chunk 0 and chunk 1's one row
  }
  const ChunkRun run = run_chunked(x, 0, Mutant::none, 2);
  const oracle::AgreementReport r =
      judge(Mamba2StageGroup::core, dims_of(x.g, 1, x.L), x.in, run.run);
  for (const auto& c : r.checks) {
    if (c.name.starts_with("dt") || c.name.starts_with("dA_cumsum") ||
        c.name.starts_with("partial")) {
      EXPECT_TRUE(c.passed()) << oracle::format_report(r);
    }
  }
  // The clamps hit exactly.
  EXPECT_EQ(run.dt_span[1], kMamba2DtMax);
  EXPECT_EQ(run.dt_span[2], kMamba2DtMin);
  EXPECT_EQ(run.dt_span[(2 * run.nc + 1) * kC], kMamba2DtMax);  // head 2, chunk 1, row 64
  EXPECT_EQ(run.dt_span[2 * run.nc * kC + 63], kMamba2DtMin);   // head 2, chunk 0, row 63
}

// The written chain bound of either path against the FP64 definition (tests/support/
// mamba2_chain_bound.h, shared with the golden checks), then the BF16 store for y.
void expect_chain(const Inputs& x, const Bits& y, const Floats& state, const char* path) {
  SCOPED_TRACE(path);
  const testing::Mamba2ChainBound cb =
      testing::mamba2_chain_bound(dims_of(x.g, 1, x.L), x.in, widen(x.xbc), kU);
  const oracle::Mamba2CoreResult& ref = cb.ref;
  const oracle::Mamba2CoreResult& mag = cb.mag;
  const double rho = cb.rho;
  uint64_t bad_y = 0, bad_state = 0;
  for (uint64_t i = 0; i < y.size(); ++i) {
    const double err = rho * mag.y[i];
    const double tol = kSecondOrder * (err + kU8 * (std::fabs(ref.y[i]) + err));
    bad_y += !(std::fabs(fl(y[i]) - ref.y[i]) <= tol);
  }
  for (uint64_t k = 0; k < state.size(); ++k)
    bad_state += !(std::fabs(state[k] - ref.state[k]) <= rho * mag.state[k]);
  EXPECT_EQ(bad_y, 0u) << "y outside the chain bound";
  EXPECT_EQ(bad_state, 0u) << "state outside the chain bound";
}

TEST_F(Mamba2KernelChunk, ChunkedAndRecurrenceAgreeWithTheDefinition) {
  uint64_t seed = 200;
  for (const ScanCase& k : kScanCases) {
    SCOPED_TRACE(describe(k));
    const Inputs x = mamba2_inputs(mamba2_geometry(k.H, k.P, k.N, k.G), 1, k.L, seed += 10);
    const ChunkRun chunked = run_chunked(x, k.row0);
    const RecRun rec = run_recurrent(x, k.row0);
    expect_chain(x, chunked.run.y, chunked.run.state, "chunked");
    expect_chain(x, rec.y, rec.state, "recurrent");
  }
}

// ============================================================== recurrence

class Mamba2KernelRecurrent : public Mamba2Kernel {
 protected:
  // S sequences of L tokens (decode: S sequences of one token in one op).
  static void check(const Mamba2Geometry& g, uint64_t S, uint64_t L, uint64_t row0, uint64_t seed) {
    SCOPED_TRACE("S=" + std::to_string(S) + " L=" + std::to_string(L) + " " + g.to_string());
    const Inputs x = mamba2_inputs(g, S, L, seed);
    const RecRun run = run_recurrent(x, row0);
    oracle::Mamba2Run r;
    r.path = oracle::Mamba2Path::recurrent;
    r.xbc = x.xbc;
    r.state_in = x.in.state;
    r.state = run.state;
    r.y = run.y;
    expect_passed(judge(Mamba2StageGroup::core, dims_of(g, S, L), x.in, r));
  }
};

TEST_F(Mamba2KernelRecurrent, DecodeBatchAndSequences) {
  check(mamba2_geometry(4, 16, 8, 2), 3, 1, 2, 41);  // a decode batch: 3 sequences of one token
  check(mamba2_geometry(2, 8, 16, 2), 2, 5, 0, 43);  // 2 sequences of 5 tokens, H/G = 1
}

// The device tile shapes: one token, a full chunk, a chunk and one token, two chunks, two
// sequences of 130, decode batches at row0 > 0.
TEST_F(Mamba2KernelRecurrent, DeviceTileShapes) {
  const Mamba2Geometry shapes[] = {mamba2_geometry(2, 16, 16, 1), mamba2_geometry(2, 24, 200, 2),
                                   mamba2_geometry(4, 64, 32, 2)};
  struct Case {
    uint64_t S, L;
    int shape;
    uint64_t row0;
  };
  for (const Case& c : {Case{1, 1, 0, 0}, Case{1, 64, 0, 0}, Case{1, 65, 1, 0}, Case{1, 127, 2, 0},
                        Case{2, 65, 1, 0}, Case{5, 1, 0, 2}, Case{7, 1, 1, 3}, Case{3, 1, 2, 0}})
    check(shapes[c.shape], c.S, c.L, c.row0, 100 * c.L + 10 * c.S + c.row0);
}

// ============================================================== M-SSDSTATE

// The scan with the carry dropped at every chunk start after the first, from the STORED dt,
// dA_cumsum, CB: the oracle's scan on each chunk alone, chunk 0 from the initial state, later
// chunks from zero; y within the scan's derived bounds.
void expect_reset_per_chunk(const Inputs& x, const ChunkRun& r, const oracle::BoundModel& bm) {
  const Mamba2Geometry& g = x.g;
  const uint64_t chunks = cdiv(x.L, kC), G = g.G;
  const oracle::Mamba2Run::Sequence& s = r.run.sequences.front();
  const Doubles D = widen(x.in.D);
  uint64_t bad = 0;
  for (uint64_t c = 0; c < chunks; ++c) {
    const uint64_t n = std::min(kC, x.L - c * kC);
    const oracle::Mamba2Dims one = dims_of(g, 1, n);
    Doubles xbc, dt, da, cb;
    for (uint64_t i = 0; i < n; ++i)
      for (uint64_t k = 0; k < g.d_xbc; ++k) xbc.push_back(fl(x.xbc[(c * kC + i) * g.d_xbc + k]));
    for (uint64_t h = 0; h < g.H; ++h)
      for (uint64_t i = 0; i < kC; ++i) {
        dt.push_back(s.dt_before_scan[(h * chunks + c) * kC + i]);
        da.push_back(s.da_before_scan[(h * chunks + c) * kC + i]);
      }
    for (uint64_t e = 0; e < G * kC * kC; ++e) cb.push_back(s.cb_before_scan[c * G * kC * kC + e]);
    const Doubles state = c == 0 ? widen(x.in.state) : Doubles(g.H * g.P * g.N, 0.0);
    oracle::mamba2_detail::CoreBounds bounds;
    const oracle::Mamba2CoreResult ref = oracle::mamba2_detail::scan_fp64(
        one, oracle::mamba2_detail::ScanInputs{xbc, dt, da, cb, D, state}, &bm, &bounds);
    for (uint64_t e = 0; e < ref.y.size(); ++e) {
      const double tol = oracle::mamba2_detail::stored_bf16(ref.y[e], bounds.y[e]);
      bad +=
          !(std::fabs(fl(r.run.y[c * kC * g.d_inner + e]) - oracle::round_bf16(ref.y[e])) <= tol);
    }
  }
  EXPECT_EQ(bad, 0u) << "M-SSDSTATE is not the reset-per-chunk scan";
}

TEST_F(Mamba2KernelChunk, SsdStateMutantDropsTheCarryOnlyAfterTheFirstChunk) {
  const Mamba2Geometry g = mamba2_geometry(2, 8, 16, 1);
  {
    SCOPED_TRACE("L = 64: one chunk, nothing to drop");
    const Inputs x = mamba2_inputs(g, 1, 64, 51);
    const ChunkRun ok = run_chunked(x), mut = run_chunked(x, 0, Mutant::M_SSDSTATE);
    EXPECT_EQ(mut.run.y, ok.run.y);
    EXPECT_EQ(mut.run.state, ok.run.state);
  }
  SCOPED_TRACE("L = 127");
  const Inputs x = mamba2_inputs(g, 1, 127, 53);
  const ChunkRun ok = run_chunked(x), mut = run_chunked(x, 0, Mutant::M_SSDSTATE);
  expect_reset_per_chunk(x, mut, bounds());
  // The plain scan check catches it.
  const oracle::AgreementReport r =
      judge(Mamba2StageGroup::core, dims_of(g, 1, x.L), x.in, mut.run);
  const oracle::TensorComparison* y = nullptr;
  for (const auto& c : r.checks)
    if (c.name == "y (scan)") y = &c;
  ASSERT_NE(y, nullptr);
  EXPECT_FALSE(y->passed());
  const uint64_t first = kC * g.d_inner;
  EXPECT_TRUE(std::equal(ok.run.y.begin(), ok.run.y.begin() + first, mut.run.y.begin()));
  double max_diff = 0.0, max_y = 0.0;
  for (uint64_t i = first; i < ok.run.y.size(); ++i) {
    max_diff = std::max(max_diff, double{std::fabs(fl(ok.run.y[i]) - fl(mut.run.y[i]))});
    max_y = std::max(max_y, double{std::fabs(fl(ok.run.y[i]))});
  }
  EXPECT_GT(max_diff, 16 * kU8 * max_y) << "the dropped carry must show beyond rounding";
}

// ============================================================== conv1d

struct ConvRun {
  Bits out, state;
};

ConvRun run_conv(const Mamba2Geometry& g, uint64_t S, uint64_t L, const oracle::Mamba2Inputs& in) {
  Mamba2ConvOp op = Mamba2ConvOp::make(g, S * L, S);
  const uint64_t pool = oracle::place_in_pool({&op.weight, &op.bias, &op.state});
  Rig rig(testing::backend_under_test(), {op.accesses()}, pool);
  rig.put(op.input, in.zxbcdt);
  rig.put(op.weight, in.conv_w);
  rig.put(op.bias, in.conv_b);
  rig.put(op.state, in.conv_state);
  rig.backend->mamba2_conv(rig.ws, op);
  return {rig.get<uint16_t>(op.output), rig.get<uint16_t>(op.state)};
}

class Mamba2KernelConv : public Mamba2Kernel {
 protected:
  // Inputs in [-a, a), weights in [-w, w), bias in [-0.5, 0.5), tails in [-a, a).
  static void check(const Mamba2Geometry& g, uint64_t S, uint64_t L, uint64_t seed, float a,
                    float w) {
    SCOPED_TRACE("S=" + std::to_string(S) + " L=" + std::to_string(L) +
                 " K=" + std::to_string(g.kernel));
    oracle::Mamba2Inputs in;
    in.zxbcdt = seeded_bf16_values(S * L * g.in_proj, seed, a);
    in.conv_w = seeded_bf16_values(g.d_xbc * g.kernel, seed + 1, w);
    in.conv_b = seeded_bf16_values(g.d_xbc, seed + 2, 0.5f);
    in.conv_state = seeded_bf16_values(S * g.d_xbc * (g.kernel - 1), seed + 3, a);
    const ConvRun run = run_conv(g, S, L, in);
    oracle::Mamba2Run r;
    r.xbc = run.out;
    r.conv_state = run.state;
    expect_passed(judge(Mamba2StageGroup::conv, dims_of(g, S, L), in, r));
  }
};

TEST_F(Mamba2KernelConv, MatchesTheOracleWithTailState) {
  // 96 channels: two blocks of the kernel.
  check(mamba2_geometry(4, 16, 8, 2, 4), 2, 2, 61, 1.0f, 0.5f);  // L < K − 1: part of the old tail
  check(mamba2_geometry(4, 16, 8, 2, 4), 2, 5, 62, 1.0f, 0.5f);
  check(mamba2_geometry(4, 16, 8, 2, 3), 3, 1, 63, 1.0f, 0.5f);    // a decode batch
  check(mamba2_geometry(4, 16, 8, 2, 18), 2, 37, 64, 1.0f, 0.5f);  // taps and rows past tiles of 16
}

// K = 2 and 4, 1 or 3 sequences, L = 1 (< K − 1 keeps part of the old tail), 64, 65, 127.
TEST_F(Mamba2KernelConv, DeviceShapes) {
  for (uint64_t L : {1, 64, 65, 127})
    for (uint64_t S : {1, 3})
      for (uint64_t K : {2, 4})
        check(mamba2_geometry(2, 8, 8, 2, K), S, L, 100 * L + 10 * S + K, 2.0f, 1.0f);
}

// Two calls of 2 and 3 rows carrying the tail equal one call of 5 rows, bit for bit.
TEST_F(Mamba2KernelConv, SplitCallsEqualOneCall) {
  const Mamba2Geometry g = mamba2_geometry(4, 16, 8, 2, 4);
  const uint64_t ch = g.d_xbc, T = 3, w = g.in_proj;
  oracle::Mamba2Inputs in;
  in.zxbcdt = seeded_bf16_values(5 * w, 71, 1.0f);
  in.conv_w = seeded_bf16_values(ch * 4, 72, 0.5f);
  in.conv_b = seeded_bf16_values(ch, 73, 0.5f);
  in.conv_state = seeded_bf16_values(ch * T, 74, 1.0f);
  const ConvRun whole = run_conv(g, 1, 5, in);
  oracle::Mamba2Inputs first = in, second = in;
  first.zxbcdt.assign(in.zxbcdt.begin(), in.zxbcdt.begin() + 2 * w);
  const ConvRun a = run_conv(g, 1, 2, first);
  second.zxbcdt.assign(in.zxbcdt.begin() + 2 * w, in.zxbcdt.end());
  second.conv_state = a.state;
  const ConvRun b = run_conv(g, 1, 3, second);
  Bits joined = a.out;
  joined.insert(joined.end(), b.out.begin(), b.out.end());
  EXPECT_EQ(joined, whole.out);
  EXPECT_EQ(b.state, whole.state);
}

// ============================================================== gated norm

class Mamba2KernelGatedNorm : public Mamba2Kernel {
 protected:
  static void check(uint64_t H, uint64_t P, uint64_t groups, uint64_t rows, uint64_t seed,
                    double eps) {
    SCOPED_TRACE("d_inner=" + std::to_string(H * P) + " groups=" + std::to_string(groups) +
                 " rows=" + std::to_string(rows));
    const Mamba2Geometry g = mamba2_geometry(H, P, 8, groups);
    Mamba2GatedNormOp op = Mamba2GatedNormOp::make(g, rows, eps);
    const uint64_t pool = oracle::place_in_pool({&op.weight});
    Rig rig(backend(), {op.accesses()}, pool);
    oracle::Mamba2Inputs in;
    oracle::Mamba2Run r;
    r.y = seeded_bf16_values(rows * g.d_inner, seed, 1.0f);
    in.zxbcdt = seeded_bf16_values(rows * g.in_proj, seed + 1, 3.0f);
    in.norm_w = seeded_bf16_values(g.d_inner, seed + 2, 0.5f, 1.0f);
    rig.put(op.input, r.y);
    rig.put(op.z, in.zxbcdt);
    rig.put(op.weight, in.norm_w);
    rig.backend->mamba2_gated_norm(rig.ws, op);
    r.normed = rig.get<uint16_t>(op.output);
    expect_passed(judge(Mamba2StageGroup::norm, dims_of(g, 1, rows, eps), in, r));
  }
};

TEST_F(Mamba2KernelGatedNorm, MatchesTheOracle) {
  check(4, 16, 1, 5, 81, 1e-5);
  check(4, 16, 2, 5, 82, 1e-5);
  check(17, 256, 1, 2, 83, 1e-5);  // a group of 4352 > 4096: g is computed twice
}

// Groups of 40 … 320 columns, one row and 65.
TEST_F(Mamba2KernelGatedNorm, DeviceGroupSizes) {
  for (uint64_t rows : {1, 65})
    for (uint64_t P : {20, 160})
      for (uint64_t groups : {1, 2}) check(4, P, groups, rows, 7 * rows + P + groups, 1e-6);
}

// ============================================================== errors

// `call` throws an Error whose message names the op's parameters and contains `what`.
template <class Op, class Call>
void expect_refused(const Op& op, const char* what, Call call) {
  Rig rig(testing::backend_under_test(), {op.accesses()}, uint64_t{1} << 20);
  try {
    call(*rig.backend, rig.ws, op);
    ADD_FAILURE() << op.params() << " accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(op.params()), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  }
}

using Mamba2KernelErrors = Mamba2Kernel;

TEST_F(Mamba2KernelErrors, RefusesNoGroupsUnevenGroupsAndOversizedHeads) {
  const auto chunk = [](Backend& b, const Workspace& ws, const Mamba2ChunkOp& op) {
    b.mamba2_chunk(ws, op);
  };
  const auto rec = [](Backend& b, const Workspace& ws, const Mamba2RecurrentOp& op) {
    b.mamba2_recurrent(ws, op);
  };
  struct Bad {
    Mamba2Geometry g;
    const char *chunk_msg, *rec_msg;
  };
  const Bad cases[] = {
      // ng = 0: the chunk op's layout G = 1 finds no B / C columns; the recurrence sees ng = 0.
      {mamba2_geometry(2, 8, 16, 0), "narrower than x | B | C", "n_groups = 0"},
      {mamba2_geometry(3, 8, 16, 2), "not a multiple of n_groups", "not a multiple of n_groups"},
      {mamba2_geometry(1, kMaxMamba2Dim + 1, 16, 1), "at most 256", "at most 256"},
      {mamba2_geometry(1, 8, kMaxMamba2Dim + 1, 1), "at most 256", "at most 256"},
  };
  for (const Bad& k : cases) {
    SCOPED_TRACE(k.g.to_string());
    for (const Stage s : {Stage::cumsum, Stage::bmm, Stage::scan})
      expect_refused(Mamba2ChunkOp::make(s, k.g, 0, 8, 2), k.chunk_msg, chunk);
    expect_refused(Mamba2RecurrentOp::make(k.g, 0, 8, 1), k.rec_msg, rec);
  }
}

}  // namespace
}  // namespace bufferlab::mamba2_kernel_tests
