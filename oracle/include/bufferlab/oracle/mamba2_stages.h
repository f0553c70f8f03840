// The Mamba-2 stages in FP64 on given inputs (docs/spec/numerics.md §6, ops/mamba2.h) and their
// per-element bounds (mamba2_bounds.cpp): what the judge feeds a backend's STORED inputs to, and
// what the references (mamba2_reference.cpp) chain. Public: the kernel tests
// (tests/kernels/mamba2_*) check each stage op against them.
//
// Layouts of one sequence of L tokens (chunks = cdiv(L, 64)): xbc [L, d_xbc]; dt_rows [L, H];
// the chunk arrays as ssd_scratch holds them, compacted to dense heads: dt and dA_cumsum
// [H, chunks, 64], CB [chunks, G, 64, 64]; zero past the last partial chunk.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/mamba2.h"

namespace bufferlab::oracle::mamba2_detail {

inline constexpr uint64_t kChunk = Mamba2ChunkCarve::kChunk;

uint64_t chunks_of(uint64_t L);
// Error naming `what` when a host copy does not hold `want` elements.
void require_size(const char* what, uint64_t got, uint64_t want);

// Columns of xBC: head h's x at h·P, group g's B at d_inner + g·N, its C at d_inner + ng·N +
// g·N; head h belongs to group h / (H/G).
struct Columns {
  uint64_t d_inner = 0, d_xbc = 0, in_proj = 0, P = 0, N = 0, G = 0, heads_per_group = 0;
  uint64_t x(uint64_t h) const { return h * P; }
  uint64_t B(uint64_t g) const { return d_inner + g * N; }
  uint64_t C(uint64_t g) const { return d_inner + (G + g) * N; }
  uint64_t group(uint64_t h) const { return h / heads_per_group; }
  static Columns of(const Mamba2Dims& dims);
};

// --- elementary functions in FP64 ------------------------------------------------------------
double softplus_fp64(double x);  // x for x > 20 (kSoftplusThreshold), else log1p(exp(x))
double silu_fp64(double x);
double sigmoid_fp64(double x);
double clamp_dt(double v);  // min(max(v, 1e-9), 1e9) with the FP32 constants of ops/mamba2.h

// --- conv1d ------------------------------------------------------------------------------------
// out[r, c] = silu(bias[c] + Σ_j w[c, j]·x[t − (K−1) + j, c]) per sequence, unrounded;
// tail [sequences, d_xbc, K − 1] = the last K − 1 inputs of each sequence (BF16 values).
// `pre` (optional) receives the argument of silu, `abs_sum` |bias| + Σ|w·x| (the bound's).
struct ConvResult {
  std::vector<double> out, tail, pre, abs_sum;
};
ConvResult conv_fp64(const Mamba2Dims& dims, const Mamba2Inputs& in, bool with_terms = false);

// --- dt, A, dA_cumsum, CB ----------------------------------------------------------------------
// The argument of softplus, dt_raw + dt_bias, exact in FP64 [rows, H].
std::vector<double> dt_argument(const Mamba2Dims& dims, std::span<const uint16_t> zxbcdt,
                                std::span<const float> dt_bias);
// dt [rows, H] = clamp_dt(softplus_fp64(argument)).
std::vector<double> dt_fp64(const Mamba2Dims& dims, std::span<const double> argument);
std::vector<double> a_fp64(std::span<const float> a_log);  // A = −exp(A_log)
// dt_rows [L, H] of one sequence → [H, chunks, 64], zero past the last partial chunk.
std::vector<double> dt_to_chunks(const Mamba2Dims& dims, std::span<const double> dt_rows);
// Inclusive Σ_{j≤i} dt_j·A per chunk (j ascending), [H, chunks, 64], zero tails.
std::vector<double> cumsum_fp64(const Mamba2Dims& dims, std::span<const double> dt_chunks,
                                std::span<const double> A);
// CB[c][g][t][s] = Σ_n C_t[n]·B_s[n] for t, s inside chunk c, zero past the sequence.
std::vector<double> bmm_fp64(const Mamba2Dims& dims, std::span<const double> xbc);

// Valid (inside the sequence) entries of the chunk arrays.
bool chunk_row_valid(const Mamba2Dims& dims, uint64_t chunk, uint64_t i);

// Calls fn(h, c, base) for every head h and chunk c of a [H, chunks, 64] array, base the
// offset of its row 0: the walk of cumsum_fp64 and cumsum_bounds.
template <class Fn>
void for_each_head_chunk(const Mamba2Dims& dims, Fn&& fn) {
  const uint64_t H = dims.geom.H, nch = chunks_of(dims.L);
  for (uint64_t h = 0; h < H; ++h)
    for (uint64_t c = 0; c < nch; ++c) fn(h, c, (h * nch + c) * kChunk);
}

// Calls fn(at, Ct, Bs) for every pair of rows t, s inside chunk c and every group g: `at` the
// pair's index in the CB layout [c][g][t][s], Ct group g's C of row t and Bs its B of row s
// (N values each, from xBC [L, d_xbc]): the walk of bmm_fp64 and bmm_bounds.
template <class Fn>
void for_each_cb_pair(const Mamba2Dims& dims, std::span<const double> xbc, Fn&& fn) {
  const Columns col = Columns::of(dims);
  const uint64_t L = dims.L, nch = chunks_of(L);
  for (uint64_t c = 0; c < nch; ++c) {
    const uint64_t rc = std::min(kChunk, L - c * kChunk);
    for (uint64_t g = 0; g < col.G; ++g)
      for (uint64_t t = 0; t < rc; ++t) {
        const double* Ct = xbc.data() + (c * kChunk + t) * col.d_xbc + col.C(g);
        for (uint64_t s = 0; s < rc; ++s) {
          const double* Bs = xbc.data() + (c * kChunk + s) * col.d_xbc + col.B(g);
          fn(((c * col.G + g) * kChunk + t) * kChunk + s, Ct, Bs);
        }
      }
  }
}

// --- scan and recurrence -----------------------------------------------------------------------
// The scan of ops/mamba2.h on given chunk arrays (STORED dt, dA_cumsum, CB), FP64: y [L,
// d_inner] (with D·x, unrounded) and the state after. With `bm`, also the per-element bounds of
// an FP32 backend against it (mamba2_bounds.cpp derives them): y before the BF16 store, the
// final state.
struct ScanInputs {
  std::span<const double> xbc, dt, da, cb, D, state;
};
struct CoreBounds {
  std::vector<double> y, state;
};
Mamba2CoreResult scan_fp64(const Mamba2Dims& dims, const ScanInputs& in,
                           const BoundModel* bm = nullptr, CoreBounds* bounds = nullptr);

// The recurrence in FP64 on xbc [L, d_xbc], dt [L, H]. With `bm`, bounds of an FP32 backend
// that computes its own dt within dt_error [L, H] of `dt`, against it.
Mamba2CoreResult recurrence_fp64(const Mamba2Dims& dims, std::span<const double> xbc,
                                 std::span<const double> dt, std::span<const double> A,
                                 std::span<const double> D, std::span<const double> state,
                                 const BoundModel* bm = nullptr,
                                 std::span<const double> dt_error = {},
                                 CoreBounds* bounds = nullptr);

// --- gated norm --------------------------------------------------------------------------------
// norm_before_gate = False over groups of d_inner / G columns: g = y·silu(z), out = g·
// rsqrt(mean(g²) + eps)·w; unrounded [rows, d_inner].
std::vector<double> gated_norm_fp64(const Mamba2Dims& dims, std::span<const double> y,
                                    std::span<const uint16_t> zxbcdt,
                                    std::span<const uint16_t> norm_w);

// --- bounds (mamba2_bounds.cpp)
// ------------------------------------------------------------------- Each: the per-element bound
// of a backend's stored value against the FAITHFUL stored value (the FP64 value rounded where the
// backend stores BF16), same layout as the values.
std::vector<double> conv_bounds(const ConvResult& conv, const BoundModel& bm, uint64_t kernel);
// dt: of the FP32 softplus/clamp from the same zxbcdt and dt_bias ([rows, H]).
std::vector<double> dt_bounds(std::span<const double> argument, const BoundModel& bm);
// dA_cumsum from the STORED dt chunks [H, chunks, 64].
std::vector<double> cumsum_bounds(const Mamba2Dims& dims, std::span<const double> dt_chunks,
                                  std::span<const double> A, const BoundModel& bm);
// CB from the STORED xbc [L, d_xbc].
std::vector<double> bmm_bounds(const Mamba2Dims& dims, std::span<const double> xbc,
                               const BoundModel& bm);
// Gated norm from the STORED y [rows, d_inner].
std::vector<double> gated_norm_bounds(const Mamba2Dims& dims, std::span<const double> y,
                                      std::span<const uint16_t> zxbcdt,
                                      std::span<const uint16_t> norm_w, const BoundModel& bm);
// A BF16 store (bounds.h), here too for the stage tests.
using oracle::stored_bf16;

// The error pieces the scan and the recurrence apply (derivations in mamba2_bounds.cpp).
struct ExpError {
  double rel = 0.0;  // |Ê − E| ≤ rel·E + abs for E = exp(arg)
  double abs = 0.0;
};
// expf of an argument computed with relative error u (rounded = true) or read as stored.
ExpError exp_error(double arg, bool rounded, const BoundModel& bm);
double sum_u(const BoundModel& bm);  // the unit roundoff of the SSD's FP32 sums and products

std::string scan_bounds_formula();
std::string recurrence_bounds_formula();
std::string conv_bounds_formula();
std::string dt_bounds_formula();
std::string cumsum_bounds_formula();
std::string bmm_bounds_formula();
std::string gated_norm_bounds_formula();

}  // namespace bufferlab::oracle::mamba2_detail
