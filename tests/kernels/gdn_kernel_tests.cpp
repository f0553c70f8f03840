// Gated DeltaNet's kernels (docs/spec/numerics.md §5, core ops/gdn.h) on the backend under test
// (tests/support/backend_under_test.h), each stage op on small cases of its own inputs against
// the oracle's stage reference fed the backend's STORED inputs (docs/spec/numerics.md §9), under
// the oracle's derived per-element bounds (oracle::judge_gdn_stage: the checks judge_gdn makes,
// written in oracle/src/gdn_bounds.cpp; the device bound model on a backend other than the CPU):
//   - conv: odd and decode-sized sequences, L < K − 1 (old tail entries shift in), the tail
//     state exact; splitting a sequence carries the state bit for bit;
//   - gates: ±Inf, NaN and softplus arguments at its threshold 20, the extremes where the
//     definition puts them;
//   - chunked core: wu, state, output (gc, W, U, S snapshots, uc, final state, core output, the
//     rows past a partial chunk zero, each stage's inputs intact), GQA, row0 > 0, several
//     streams; against the recurrent op (a whole-chain bound written on paper) and the FP64
//     recurrence; M-GDNCARRY fails the state pass;
//   - recurrence: kd ≠ vd, heads up to 256, decode batches, row0 > 0;
//   - gated norm: head_dim over a CUDA block, a zero head; launch errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend_under_test.h"
#include "bf16_shorthands.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/oracle/compare.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_judge.h"
#include "bufferlab/oracle/pool_placement.h"
#include "gdn_mamba2_geometry.h"
#include "seeded_values.h"
#include "workspace_rig.h"

// The GDN twins of mamba2_kernel_tests.cpp's helpers (run_conv, RecRun, kC, ...) live in a
// namespace of their own: one unity batch may hold both files.
namespace bufferlab::gdn_kernel_tests {
namespace {

using Bits = std::vector<uint16_t>;
using Floats = std::vector<float>;
using Array = GdnChunkOp::Array;
using Stage = GdnChunkOp::Stage;
using oracle::GdnStageGroup;
using testing::fl;
using testing::gdn_geometry;
using testing::Rig;
using testing::seeded_bf16_values;
using testing::seeded_values;

constexpr double kU8 = 0x1p-8;  // BF16 unit roundoff (8 significant bits, round to nearest)
constexpr uint64_t kC = GdnChunkCarve::kChunk;
constexpr uint64_t kD = kGdnChunkedHeadDim;  // the chunked path's kd = vd

oracle::GdnDims dims_of(const GdnGeometry& g, uint64_t sequences, uint64_t L, double eps = 1e-6) {
  return {.geom = g, .sequences = sequences, .L = L, .eps = eps};
}

// Values in [lo, hi) (seeded_values' grid).
Floats values_in(uint64_t n, uint64_t seed, double lo, double hi) {
  return seeded_values(n, seed, static_cast<float>((hi - lo) / 2),
                       static_cast<float>((hi + lo) / 2));
}
Bits bf16_values_in(uint64_t n, uint64_t seed, double lo, double hi) {
  return seeded_bf16_values(n, seed, static_cast<float>((hi - lo) / 2),
                            static_cast<float>((hi + lo) / 2));
}

// (β, α) pairs [pairs, 2] with β in [beta_lo, beta_hi), α in [alpha_lo, alpha_hi).
struct GateRange {
  double beta_lo, beta_hi, alpha_lo, alpha_hi;
};
// A slow decay (e^gc over a chunk ≈ 0.2): the carried state still weighs in a chunk's last rows.
constexpr GateRange kSlowDecay{0.05, 0.95, 0.94, 0.999};
// Long memory: the chunk decays matter.
constexpr GateRange kLongMemory{0.1, 0.9, 0.85, 1.0};

Floats gate_values(uint64_t pairs, uint64_t seed, const GateRange& r) {
  const Floats beta = values_in(pairs, seed, r.beta_lo, r.beta_hi);
  const Floats alpha = values_in(pairs, seed + 1, r.alpha_lo, r.alpha_hi);
  Floats gates(pairs * 2);
  for (uint64_t k = 0; k < pairs; ++k) {
    gates[2 * k] = beta[k];
    gates[2 * k + 1] = alpha[k];
  }
  return gates;
}

class GdnKernel : public testing::KernelTest {
 protected:
  static oracle::BoundModel bounds() {
    return on_cpu() ? oracle::cpu_bounds() : oracle::device_bounds();
  }
  // The oracle's checks of `groups` on `run` (the fields those groups read): at least one, all
  // passed.
  static oracle::AgreementReport judge(std::initializer_list<GdnStageGroup> groups,
                                       const oracle::GdnDims& d, const oracle::GdnInputs& in,
                                       const oracle::GdnRun& run) {
    oracle::AgreementReport r{"gdn", d.geom.to_string(), backend().name(), 0, {}, {}};
    for (GdnStageGroup g : groups) oracle::judge_gdn_stage(g, d, in, run, bounds(), r);
    return r;
  }
  static void expect_passed(const oracle::AgreementReport& r) {
    EXPECT_FALSE(r.checks.empty());
    EXPECT_TRUE(r.passed()) << oracle::format_report(r);
  }
};

// ============================================================================= conv1d

struct ConvRun {
  Floats out;
  Bits state;
};

ConvRun run_conv(const GdnGeometry& g, uint64_t sequences, uint64_t L, const Bits& deint,
                 const Bits& weight, const Bits& state) {
  GdnConvOp op = GdnConvOp::make(g, sequences * L, sequences);
  const uint64_t pool = oracle::place_in_pool({&op.weight, &op.state});
  Rig rig(testing::backend_under_test(), {op.accesses()}, pool);
  rig.put(op.input, deint);
  rig.put(op.weight, weight);
  rig.put(op.state, state);
  rig.backend->gdn_conv(rig.ws, op);
  return {rig.get<float>(op.output), rig.get<uint16_t>(op.state)};
}

class GdnKernelConv : public GdnKernel {
 protected:
  // Inputs in [-2, 2), weights in [-w, w), tails in [-2, 2).
  static void check(const GdnGeometry& g, uint64_t sequences, uint64_t L, uint64_t seed, float w) {
    SCOPED_TRACE("sequences " + std::to_string(sequences) + ", L " + std::to_string(L));
    const uint64_t C = g.conv_dim, T = g.kernel - 1, rows = sequences * L;
    oracle::GdnInputs in;
    in.deint = seeded_bf16_values(rows * g.qkvz, seed, 2.0f);
    in.conv_w = seeded_bf16_values(C * g.kernel, seed + 1, w);
    in.conv_state = seeded_bf16_values(sequences * C * T, seed + 2, 2.0f);
    const ConvRun run = run_conv(g, sequences, L, in.deint, in.conv_w, in.conv_state);
    oracle::GdnRun r;
    r.conv = run.out;
    r.conv_state = run.state;
    expect_passed(judge({GdnStageGroup::conv}, dims_of(g, sequences, L), in, r));
  }
};

const GdnGeometry kConvSmall = gdn_geometry(1, 8, 2, 4, 4);
const GdnGeometry kConv64Channels = gdn_geometry(1, 16, 2, 16, 4);  // 64 channels in rows of 96

TEST_F(GdnKernelConv, OneSequence) { check(kConvSmall, 1, 7, 10, 1.0f); }
TEST_F(GdnKernelConv, ShorterThanTheTailShiftsOldEntriesIn) { check(kConvSmall, 3, 2, 11, 1.0f); }
TEST_F(GdnKernelConv, DecodeBatchOfOneTokenEach) { check(kConvSmall, 4, 1, 12, 1.0f); }
TEST_F(GdnKernelConv, SeveralSequencesLongerThanTheKernel) { check(kConvSmall, 2, 9, 13, 1.0f); }
TEST_F(GdnKernelConv, SixtyFourChannelsShiftTheTails) {
  for (const auto& [seqs, L] :
       std::vector<std::pair<uint64_t, uint64_t>>{{2, 1}, {2, 2}, {2, 65}, {1, 3}})
    check(kConv64Channels, seqs, L, 100 * L + seqs, 0.5f);
}

// A sequence split into calls of 2 and 3 tokens carrying the tail state equals one call of 5,
// bit for bit (same products, same FP32 order).
TEST_F(GdnKernelConv, SplitSequenceCarriesTheStateExactly) {
  const GdnGeometry g = kConvSmall;
  const uint64_t C = g.conv_dim, T = g.kernel - 1, W = g.qkvz;
  const Bits deint = seeded_bf16_values(5 * W, 20, 2.0f);
  const Bits weight = seeded_bf16_values(C * g.kernel, 21, 1.0f);
  const Bits state = seeded_bf16_values(C * T, 22, 2.0f);
  const ConvRun whole = run_conv(g, 1, 5, deint, weight, state);
  const Bits first_rows(deint.begin(), deint.begin() + static_cast<int64_t>(2 * W));
  const Bits last_rows(deint.begin() + static_cast<int64_t>(2 * W), deint.end());
  const ConvRun a = run_conv(g, 1, 2, first_rows, weight, state);
  const ConvRun b = run_conv(g, 1, 3, last_rows, weight, a.state);
  Floats split = a.out;
  split.insert(split.end(), b.out.begin(), b.out.end());
  EXPECT_EQ(0, std::memcmp(split.data(), whole.out.data(), split.size() * sizeof(float)));
  EXPECT_EQ(b.state, whole.state);
}

// ============================================================================= gates

class GdnKernelGates : public GdnKernel {
 protected:
  static Floats run(const GdnGeometry& g, uint64_t rows, const oracle::GdnInputs& in) {
    GdnGatesOp op = GdnGatesOp::make(g, rows);
    const uint64_t pool = oracle::place_in_pool({&op.a_log, &op.dt_bias});
    Rig rig(backend(), {op.accesses()}, pool);
    rig.put(op.ba, in.ba);
    rig.put(op.a_log, in.a_log);
    rig.put(op.dt_bias, in.dt_bias);
    rig.backend->gdn_gates(rig.ws, op);
    Floats gates = rig.get<float>(op.gates);
    oracle::GdnRun r;
    r.gates = gates;
    expect_passed(judge({GdnStageGroup::gates}, dims_of(g, 1, rows), in, r));
    return gates;
  }
};

TEST_F(GdnKernelGates, MatchTheOracleIncludingExtremes) {
  const uint64_t nv = 4, rows = 10;
  const GdnGeometry g = gdn_geometry(1, 8, nv, 4);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Floats b_vals = {0.0f, 1.5f, -3.0f, 100.0f, -100.0f, inf, -inf, nan, 0.3f, -0.7f};
  const Floats a_vals = {0.0f, 25.0f, 19.5f, -100.0f, 2.0f, inf, -inf, nan, -5.0f, 40.0f};
  oracle::GdnInputs in;
  in.a_log = {-2.0f, 0.0f, 1.5f, 10.0f};
  in.dt_bias = {0.5f, -1.0f, 2.0f, 0.0f};
  in.ba.resize(rows * 2 * nv);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t v = 0; v < nv; ++v) {
      in.ba[r * 2 * nv + v] = f32_to_bf16_bits(b_vals[(r + v) % b_vals.size()]);
      in.ba[r * 2 * nv + nv + v] = f32_to_bf16_bits(a_vals[(r + 3 * v) % a_vals.size()]);
    }
  const Floats gates = run(g, rows, in);
  // The extremes land where the definition puts them.
  EXPECT_EQ(gates[(5 * nv + 0) * 2], 1.0f);          // b = +Inf → β = 1
  EXPECT_EQ(gates[(6 * nv + 0) * 2], 0.0f);          // b = −Inf → β = 0
  EXPECT_TRUE(std::isnan(gates[(7 * nv + 0) * 2]));  // b = NaN
}

// Row 0: softplus arguments exactly 20 (log1p(exp(20)) side) and 20.5 (identity side).
TEST_F(GdnKernelGates, SoftplusThresholdAndWideArguments) {
  const GdnGeometry g = gdn_geometry(2, 8, 4, 8);
  const uint64_t rows = 7, nv = g.nv;
  oracle::GdnInputs in;
  in.ba = bf16_values_in(rows * 2 * nv, 7, -8.0, 8.0);
  const Bits a = bf16_values_in(rows * nv, 8, -30.0, 25.0);
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t h = 0; h < nv; ++h) in.ba[t * 2 * nv + nv + h] = a[t * nv + h];
  in.dt_bias = values_in(nv, 9, -1.0, 1.0);
  in.a_log = values_in(nv, 10, -2.0, 0.5);
  in.dt_bias[0] = 0.5f;
  in.dt_bias[1] = 0.5f;
  in.ba[nv + 0] = f32_to_bf16_bits(19.5f);
  in.ba[nv + 1] = f32_to_bf16_bits(20.0f);
  run(g, rows, in);
}

// ============================================================================= gated norm

class GdnKernelGatedNorm : public GdnKernel {
 protected:
  // y = RMSNorm(io)·w·silu(z) in place on `io`; z is the Z part of the de-interleaved rows.
  static void check(const GdnGeometry& g, uint64_t rows, const oracle::GdnInputs& in,
                    const Bits& io) {
    const double eps = 1e-6;
    GdnGatedNormOp op = GdnGatedNormOp::make(g, rows, eps);
    const uint64_t pool = oracle::place_in_pool({&op.weight});
    Rig rig(backend(), {op.accesses()}, pool);
    rig.put(op.io, io);
    rig.put(op.z, in.deint);
    rig.put(op.weight, in.norm_w);
    rig.backend->gdn_gated_norm(rig.ws, op);
    oracle::GdnRun r;
    r.core = io;
    r.normed = rig.get<uint16_t>(op.io);
    expect_passed(judge({GdnStageGroup::norm}, dims_of(g, 1, rows, eps), in, r));
  }
};

TEST_F(GdnKernelGatedNorm, MatchesTheOracle) {
  const GdnGeometry g = gdn_geometry(1, 16, 2, 32);
  const uint64_t rows = 5;
  oracle::GdnInputs in;
  in.deint = seeded_bf16_values(rows * g.qkvz, 301, 4.0f);
  in.norm_w = seeded_bf16_values(g.vd, 302, 1.5f);
  check(g, rows, in, seeded_bf16_values(rows * g.value_dim, 300, 2.0f));
}

// head_dim 160: more columns than a CUDA block's 128 threads; one head all zero.
TEST_F(GdnKernelGatedNorm, WideHeadsAndAZeroHead) {
  const GdnGeometry g = gdn_geometry(2, 8, 4, 160);
  const uint64_t rows = 3, heads = g.nv, hd = g.vd;
  Bits o = bf16_values_in(rows * heads * hd, 11, -3.0, 3.0);
  std::fill(o.begin() + static_cast<std::ptrdiff_t>((1 * heads + 2) * hd),
            o.begin() + static_cast<std::ptrdiff_t>((1 * heads + 3) * hd), uint16_t{0});
  oracle::GdnInputs in;
  in.deint = bf16_values_in(rows * g.qkvz, 12, -4.0, 4.0);
  in.norm_w = bf16_values_in(hd, 13, 0.5, 1.5);
  check(g, rows, in, o);
}

// ============================================================================= recurrence

struct RecRun {
  Bits out;
  Floats state;
};

RecRun run_recurrent(GdnRecurrentOp& op, uint64_t pool, const Floats& conv, const Floats& gates,
                     const Floats& state) {
  Rig rig(testing::backend_under_test(), {op.accesses()}, pool);
  rig.put(op.conv, conv);
  rig.put(op.gates, gates);
  rig.put(op.state, state);
  rig.backend->gdn_recurrent(rig.ws, op);
  return {rig.get<uint16_t>(op.output), rig.get<float>(op.state)};
}

struct RecurrenceCase {
  GdnGeometry g;
  uint64_t row0, rows, sequences;  // sequences 0: a decode batch (one token each)
  uint64_t seed;
  GateRange gates;
  float state_scale;
};

class GdnKernelRecurrent : public GdnKernel {
 protected:
  static void check(const RecurrenceCase& c) {
    GdnRecurrentOp op = GdnRecurrentOp::make(c.g, c.row0, c.rows, c.sequences);
    SCOPED_TRACE(op.params());
    const uint64_t sequences = c.sequences == 0 ? c.rows : c.sequences;
    const uint64_t pool = oracle::place_in_pool({&op.state});
    oracle::GdnRun r;
    r.path = oracle::GdnPath::recurrent;
    r.conv = values_in(c.rows * c.g.conv_dim, c.seed, -1.0, 1.0);
    r.gates = gate_values(c.rows * c.g.nv, c.seed + 1, c.gates);
    r.state_in = seeded_values(sequences * c.g.nv * c.g.kd * c.g.vd, c.seed + 3, c.state_scale);
    const RecRun run = run_recurrent(op, pool, r.conv, r.gates, r.state_in);
    r.core = run.out;
    r.state = run.state;
    expect_passed(judge({GdnStageGroup::core}, dims_of(c.g, sequences, c.rows / sequences), {}, r));
  }
};

TEST_F(GdnKernelRecurrent, SmallHeadsTwoSequences) {
  check({gdn_geometry(1, 32, 2, 32), 2, 40, 2, 200, kSlowDecay, 0.5f});
}
TEST_F(GdnKernelRecurrent, KdDiffersFromVd) {
  check({gdn_geometry(2, 32, 4, 48), 2, 9, 1, 201, kSlowDecay, 0.5f});
}
TEST_F(GdnKernelRecurrent, ChunkedHeadSize) {
  check({gdn_geometry(1, 128, 1, 128), 2, 40, 1, 202, kSlowDecay, 0.5f});
}
TEST_F(GdnKernelRecurrent, DecodeBatch) {
  check({gdn_geometry(1, 64, 2, 64), 2, 5, 0, 203, kSlowDecay, 0.5f});
}
// Heads up to 256, kd ≠ vd in a decode batch, row0 > 0, long sequences.
TEST_F(GdnKernelRecurrent, WideHeadsAndLongSequences) {
  const std::vector<RecurrenceCase> cases = {
      {gdn_geometry(2, 32, 4, 48), 0, 10, 2, 32 * 1000 + 10, kLongMemory, 0.5f},
      {gdn_geometry(1, 256, 2, 256), 1, 3, 1, 256 * 1000 + 3, kLongMemory, 0.5f},
      {gdn_geometry(2, 64, 4, 40), 0, 3, 0, 64 * 1000 + 3, kLongMemory, 0.5f},
      {gdn_geometry(1, 128, 2, 128), 2, 130, 2, 128 * 1000 + 130, kLongMemory, 0.5f}};
  for (const RecurrenceCase& c : cases) check(c);
}

// ============================================================================= chunked core

struct ChunkCase {
  uint64_t nk, nv, streams, L, row0;
};

// The three stage ops and the recurrence of one call, sharing the state operand; nt =
// streams·cdiv(L, 64): the carve holds exactly this call's regions.
struct ChunkOps {
  GdnGeometry g;
  ChunkCase c;
  GdnChunkOp wu, state, output;
  GdnRecurrentOp rec;
  uint64_t pool = 0;

  explicit ChunkOps(const ChunkCase& cc) : g(gdn_geometry(cc.nk, kD, cc.nv, kD)), c(cc) {
    const uint64_t nt = c.streams * ((c.L + kC - 1) / kC);
    wu = GdnChunkOp::make(Stage::wu, g, c.row0, c.streams, c.L, nt);
    state = GdnChunkOp::make(Stage::state, g, c.row0, c.streams, c.L, nt);
    output = GdnChunkOp::make(Stage::output, g, c.row0, c.streams, c.L, nt);
    rec = GdnRecurrentOp::make(g, c.row0, c.streams * c.L, c.streams);
    pool = oracle::place_in_pool({&wu.state});
    state.state = output.state = rec.state = wu.state;
  }
  uint64_t rows() const { return c.streams * c.L; }
  oracle::GdnDims dims() const { return dims_of(g, c.streams, c.L); }
};

// Inputs of a call (rows relative to row0): conv in [-1, 1), gates, a state in [-0.5, 0.5);
// with `alpha_floor` one α = 0 (the 1e-30 floor) in stream 1.
oracle::GdnRun chunk_inputs(const ChunkOps& o, uint64_t seed, const GateRange& range,
                            bool alpha_floor) {
  const uint64_t nv = o.c.nv;
  oracle::GdnRun in;
  in.conv = seeded_values(o.rows() * o.g.conv_dim, seed, 1.0f);
  in.gates = gate_values(o.rows() * nv, seed + 1, range);
  if (alpha_floor && o.c.streams > 1 && o.c.L > 10) in.gates[((o.c.L + 10) * nv) * 2 + 1] = 0.0f;
  in.state_in = seeded_values(o.c.streams * nv * kD * kD, seed + 3, 0.5f);
  return in;
}

// wu, state and output in order on one workspace, each stage's inputs read back right before
// it runs (as oracle::run_gdn does); `mutant` applies to the state stage.
oracle::GdnRun run_chunked(ChunkOps& o, oracle::GdnRun run, Mutant mutant = Mutant::none) {
  Rig rig(testing::backend_under_test(), {o.wu.accesses(), o.state.accesses(), o.output.accesses()},
          o.pool);
  rig.put(o.wu.conv_rows(), run.conv);
  rig.put(o.wu.gate_rows(), run.gates);
  rig.put(o.wu.state, run.state_in);
  rig.backend->gdn_chunk(rig.ws, o.wu);
  run.gc = rig.get<float>(o.wu.span(Array::gc));
  run.W = rig.get<uint16_t>(o.wu.span(Array::W));
  run.U = rig.get<uint16_t>(o.wu.span(Array::U));
  run.W_before_state = rig.get<uint16_t>(o.state.span(Array::W));
  run.U_before_state = rig.get<uint16_t>(o.state.span(Array::U));
  run.gc_before_state = rig.get<float>(o.state.span(Array::gc));
  rig.backend->set_kernel_mutant(mutant);
  try {
    rig.backend->gdn_chunk(rig.ws, o.state);
  } catch (...) {
    rig.backend->set_kernel_mutant(Mutant::none);
    throw;
  }
  rig.backend->set_kernel_mutant(Mutant::none);
  run.S = rig.get<uint16_t>(o.state.span(Array::S));
  run.uc = rig.get<uint16_t>(o.state.span(Array::uc));
  run.S_before_output = rig.get<uint16_t>(o.output.span(Array::S));
  run.uc_before_output = rig.get<uint16_t>(o.output.span(Array::uc));
  run.gc_before_output = rig.get<float>(o.output.span(Array::gc));
  rig.backend->gdn_chunk(rig.ws, o.output);
  run.core = rig.get<uint16_t>(o.output.output_rows());
  run.state = rig.get<float>(o.wu.state);
  return run;
}

// Chunked vs the recurrent op, a whole-chain bound written on paper (docs/spec/numerics.md §9):
// each chunked output passes four BF16 stores (W and U, uc, the S snapshot, the output), each ≤ u8
// of the magnitude it carries; for these inputs (random keys: |L_il| ≤ β·|⟨k_i, k_l⟩|, contracting
// state) the forward substitution and the carry amplify them by less than 2 and the
// recurrence's own output store adds one more u8: 16·u8 of the head's largest |value| covers
// both, normwise (per stream and head, so cancellation in one element does not matter).
void expect_chain(const ChunkOps& o, const oracle::GdnRun& chunked, const RecRun& rec) {
  const uint64_t nv = o.c.nv, L = o.c.L, width = nv * kD, KK = kD * kD;
  uint64_t bad_out = 0, bad_state = 0;
  for (uint64_t b = 0; b < o.c.streams; ++b)
    for (uint64_t v = 0; v < nv; ++v) {
      double scale = 0.0, sscale = 0.0;
      for (uint64_t t = 0; t < L; ++t)
        for (uint64_t j = 0; j < kD; ++j)
          scale = std::max(scale, std::fabs(double{fl(rec.out[(b * L + t) * width + v * kD + j])}));
      for (uint64_t t = 0; t < L; ++t)
        for (uint64_t j = 0; j < kD; ++j) {
          const uint64_t e = (b * L + t) * width + v * kD + j;
          bad_out += !(std::fabs(double{fl(chunked.core[e])} - fl(rec.out[e])) <= 16 * kU8 * scale);
        }
      const uint64_t base = (b * nv + v) * KK;
      for (uint64_t e = 0; e < KK; ++e)
        sscale = std::max(sscale, std::fabs(double{rec.state[base + e]}));
      for (uint64_t e = 0; e < KK; ++e)
        bad_state += !(std::fabs(double{chunked.state[base + e]} - rec.state[base + e]) <=
                       16 * kU8 * sscale);
    }
  EXPECT_EQ(bad_out, 0u) << "chunked vs recurrent output";
  EXPECT_EQ(bad_state, 0u) << "chunked vs recurrent final state";
}

class GdnKernelChunk : public GdnKernel {
 protected:
  // Every stage against the oracle on its stored inputs, then the whole chain against the
  // recurrent op on the same inputs.
  static void check(const ChunkCase& c, uint64_t seed, const GateRange& range = kSlowDecay,
                    bool alpha_floor = true) {
    SCOPED_TRACE("streams=" + std::to_string(c.streams) + " L=" + std::to_string(c.L) +
                 " nk=" + std::to_string(c.nk) + " nv=" + std::to_string(c.nv) +
                 " row0=" + std::to_string(c.row0));
    ChunkOps o(c);
    const oracle::GdnRun in = chunk_inputs(o, seed, range, alpha_floor);
    const oracle::GdnRun run = run_chunked(o, in);
    const oracle::AgreementReport r = judge({GdnStageGroup::core}, o.dims(), {}, run);
    expect_passed(r);
    expect_chain(o, run, run_recurrent(o.rec, o.pool, in.conv, in.gates, in.state_in));
  }
};

TEST_F(GdnKernelChunk, OneToken) { check({1, 1, 1, 1, 0}, 100); }
TEST_F(GdnKernelChunk, PartialChunkTwoHeads) { check({1, 2, 1, 63, 0}, 101); }
TEST_F(GdnKernelChunk, OneFullChunk) { check({1, 1, 1, 64, 0}, 102); }
TEST_F(GdnKernelChunk, ThreeStreamsOf65AtRow3) { check({1, 2, 3, 65, 3}, 103); }
TEST_F(GdnKernelChunk, TwoChunksGqa2x4) { check({2, 4, 1, 127, 0}, 104); }
TEST_F(GdnKernelChunk, DecodeSizedStreams) { check({1, 2, 3, 1, 0}, 105); }

// GQA 2 (value heads 0, 1 → key head 0) with long memory: L = 1, 64, 65, 130, streams 1 and 2,
// row0 > 0.
const std::vector<ChunkCase> kGqaCases = {
    {2, 4, 2, 1, 0}, {2, 4, 1, 64, 0}, {2, 4, 2, 65, 3}, {2, 4, 1, 130, 0}};

TEST_F(GdnKernelChunk, GqaLongMemoryStagesOnTheirStoredInputs) {
  for (const ChunkCase& c : kGqaCases) check(c, 31 * c.L + c.streams, kLongMemory, false);
}

// The three stages in a row give the FP64 recurrence's output and state (oracle::
// gdn_recurrence_fp64), within what the BF16 storage of W, U, uc and S costs (a few 2^-9
// relative per term: 2^-6·max is far above it and far below any structural error).
TEST_F(GdnKernelChunk, ChunkedCoreAgreesWithTheFp64Recurrence) {
  for (const ChunkCase& c : kGqaCases) {
    ChunkOps o(c);
    SCOPED_TRACE(o.wu.params());
    const oracle::GdnRun run =
        run_chunked(o, chunk_inputs(o, 77 * c.L + c.streams, kLongMemory, false));
    const std::vector<double> conv(run.conv.begin(), run.conv.end());
    const std::vector<double> gates(run.gates.begin(), run.gates.end());
    const std::vector<double> state(run.state_in.begin(), run.state_in.end());
    const oracle::GdnCoreResult ref = oracle::gdn_recurrence_fp64(o.dims(), conv, gates, state);
    double out_max = 0.0, state_max = 0.0;
    for (double v : ref.o) out_max = std::max(out_max, std::fabs(v));
    for (double v : ref.state) state_max = std::max(state_max, std::fabs(v));
    uint64_t bad_out = 0, bad_state = 0;
    for (uint64_t i = 0; i < ref.o.size(); ++i)
      bad_out += !(std::fabs(fl(run.core[i]) - ref.o[i]) <= 0x1p-6 * out_max);
    for (uint64_t i = 0; i < ref.state.size(); ++i)
      bad_state += !(std::fabs(run.state[i] - ref.state[i]) <= 0x1p-6 * state_max);
    EXPECT_EQ(bad_out, 0u) << "chunked output vs recurrence";
    EXPECT_EQ(bad_state, 0u) << "chunked state vs recurrence";
  }
}

// M-GDNCARRY carries the BF16 snapshot: the same stored W, U, gc, but a final state that is
// BF16-exact, differs from the clean one in most elements, and fails the oracle's state-pass
// bound, where the clean one passes (the initial state is not BF16-exact, so even one chunk
// shows it).
TEST_F(GdnKernelChunk, CarryMutantCarriesTheSnapshotAndFailsTheStatePass) {
  struct MutantCase {
    ChunkCase c;
    uint64_t seed;
    GateRange gates;
  };
  for (const MutantCase& m : {MutantCase{{1, 1, 1, 130, 0}, 106, kSlowDecay},
                              MutantCase{{1, 2, 2, 65, 0}, 5, kLongMemory}}) {
    const ChunkCase& c = m.c;
    ChunkOps o(c);
    SCOPED_TRACE(o.wu.params());
    const oracle::GdnRun in = chunk_inputs(o, m.seed, m.gates, false);
    const oracle::GdnRun real = run_chunked(o, in);
    const oracle::GdnRun mutant = run_chunked(o, in, Mutant::M_GDNCARRY);
    EXPECT_EQ(real.W, mutant.W);
    EXPECT_EQ(real.U, mutant.U);
    uint64_t inexact = 0, differ = 0;
    for (uint64_t i = 0; i < mutant.state.size(); ++i) {
      if (round_to_bf16(mutant.state[i]) != mutant.state[i]) ++inexact;
      if (mutant.state[i] != real.state[i]) ++differ;
    }
    EXPECT_EQ(inexact, 0u) << "M-GDNCARRY left FP32 values in the state";
    EXPECT_GT(differ, mutant.state.size() / 2) << "M-GDNCARRY did not change the state";
    auto state_check = [&](const oracle::GdnRun& run) {
      const oracle::AgreementReport r = judge({GdnStageGroup::core}, o.dims(), {}, run);
      for (const auto& check : r.checks)
        if (check.name == "final state (state)") return check.passed();
      ADD_FAILURE() << "no final state check";
      return false;
    };
    EXPECT_TRUE(state_check(real));
    EXPECT_FALSE(state_check(mutant));
  }
}

// ============================================================================= errors

template <class Op, class Call>
void expect_refused(Op op, Call call, const std::string& needle) {
  const uint64_t pool = oracle::place_in_pool({&op.state});
  Rig rig(testing::backend_under_test(), {op.accesses()}, pool);
  try {
    call(*rig.backend, rig.ws, op);
    ADD_FAILURE() << op.params() << " accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

using GdnKernelErrors = GdnKernel;

TEST_F(GdnKernelErrors, ChunkedPathRunsKd128Only) {
  auto call = [](Backend& b, const Workspace& ws, const GdnChunkOp& op) { b.gdn_chunk(ws, op); };
  expect_refused(GdnChunkOp::make(Stage::wu, gdn_geometry(1, 64, 1, 64), 0, 1, 64, 1), call,
                 "kd = vd = 128");
  expect_refused(GdnChunkOp::make(Stage::state, gdn_geometry(1, 128, 1, 64), 0, 1, 64, 1), call,
                 "kd = vd = 128");
  for (const Stage s : {Stage::wu, Stage::state, Stage::output})
    expect_refused(GdnChunkOp::make(s, gdn_geometry(1, 64, 2, 128), 0, 1, 64, 1), call,
                   "kd = vd = 128");
}

TEST_F(GdnKernelErrors, GqaMustDivide) {
  ChunkOps o({2, 3, 1, 64, 0});
  Rig rig(backend(), {o.wu.accesses(), o.state.accesses(), o.output.accesses()}, o.pool);
  for (const GdnChunkOp* op : {&o.wu, &o.state, &o.output})
    EXPECT_THROW(rig.backend->gdn_chunk(rig.ws, *op), Error) << op->params();
  auto rec = [](Backend& b, const Workspace& ws, const GdnRecurrentOp& op) {
    b.gdn_recurrent(ws, op);
  };
  expect_refused(GdnRecurrentOp::make(gdn_geometry(2, 16, 3, 16), 0, 2, 1), rec, "multiple of nk");
  expect_refused(GdnRecurrentOp::make(gdn_geometry(2, 16, 3, 16), 0, 2), rec, "multiple of nk");
}

TEST_F(GdnKernelErrors, RecurrenceHoldsHeadsUpTo256) {
  auto call = [](Backend& b, const Workspace& ws, const GdnRecurrentOp& op) {
    b.gdn_recurrent(ws, op);
  };
  expect_refused(GdnRecurrentOp::make(gdn_geometry(1, 512, 1, 16), 0, 2, 1), call, "at most 256");
  for (const GdnGeometry& g : {gdn_geometry(1, 257, 1, 16), gdn_geometry(1, 16, 1, 257)})
    expect_refused(GdnRecurrentOp::make(g, 0, 2), call, "at most 256");
}

TEST_F(GdnKernelErrors, ConvRefusesKernelZero) {
  GdnConvOp op = GdnConvOp::make(gdn_geometry(1, 8, 1, 8, 0), 2, 1);
  const uint64_t pool = oracle::place_in_pool({&op.weight, &op.state});
  Rig rig(backend(), {op.accesses()}, pool);
  EXPECT_THROW(rig.backend->gdn_conv(rig.ws, op), Error);
}

}  // namespace
}  // namespace bufferlab::gdn_kernel_tests
