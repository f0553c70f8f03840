// FP64 oracle of grouped-query attention (docs/spec/attention.md §2, §4, §5;
// docs/spec/numerics.md §8): per-stage references on plain arrays and an AttnGeometry, each
// computed from the values the backend STORED before that stage (the judge, attention_judge.h,
// feeds them from an AttnRun), with the per-element bounds of an FP32 backend derived in
// oracle/src/attention_bounds.cpp. Every formula, order and layout is the one core
// ops/attention.h pins.
//
//   stage:    S(x, positions) of one Q or K head row: qk_norm, RoPE (1-D or MRoPE, half-split or
//             interleaved pairs), before the one BF16 store.
//   core:     softmax attention of one query row over its visible keys [lo, p] (causal, sliding
//             window W), the sink in the maximum and the denominator, KV head q / (nq / nkv).
//   partials: the split-K parts of a decode row (o = acc / l, m, l per part; no sink).
//   merge:    the split-K merge from the STORED partials (and the sink).
//   gate:     a · sigmoid(g) from the stored attn_output and gate values.
//
// Modes (oracle/mode.h). The spec pins the angle as θ = fp32(pos) · inv_freq (one FP32 multiply):
// `faithful` reproduces that FP32 product exactly (a product of two FP32 values is exact in FP64;
// rounding it to FP32 once gives the backend's θ bit for bit) and evaluates everything else in
// FP64; `exact` takes θ = pos · inv_freq in FP64. The two differ by the FP32 angle rounding,
// ≤ u·|θ| (plus u·|θ| when pos > 2^24), which grows with the position — |θ| reaches ~1e5 rad for
// long contexts, i.e. ~6e-3 rad — far more than the stage's own rounding: backends are asserted
// against `faithful`, and `faithful` vs `exact` is reported under attn_stage_angle_bounds().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bufferlab/core/ops/attention.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/mode.h"

namespace bufferlab::oracle {

// The values of a stage in FP64 before the backend's store, and (when a BoundModel is given)
// the per-element bound of the backend's STORED value against the faithful value stored the same
// way (BF16 outputs: round_bf16(value); FP32 outputs: the value itself). A bound of exactly 0
// marks an element the stage copies (it must match bit for bit).
struct AttnValues {
  std::vector<double> value;
  std::vector<double> bound;
};

// --- stage function (docs/spec/attention.md §2) ---------------------------------------------

// The position stream frequency i (< rotary_dim / 2) takes its position from: 0 (t, the one
// stream without MRoPE), 1 (h) or 2 (w), by the MRoPE rule of docs/spec/attention.md §2.
uint64_t attn_rope_stream(const AttnGeometry& g, uint64_t i);

// `rows` rows of `heads` head rows each: head h of row r at src[r·stride + col0 + h·hd].
struct AttnStageInput {
  std::span<const uint16_t> src;  // bf16
  uint64_t stride = 0, col0 = 0, rows = 0, heads = 0;
  std::span<const uint32_t> positions;  // u32 [pos_streams, pos_stride]; row r at [s·stride + r]
  uint64_t pos_stride = 0;
  std::span<const float> rope;     // f32 [rotary_dim/2 + 1]: inv_freq, fp32(attention_factor)
  std::span<const uint16_t> norm;  // bf16 [hd] (qk_norm), else empty
};

// S(x) of every head row, [rows, heads·hd], before the BF16 store; with `bm` the bound of the
// stored value (0 for the dimensions ≥ rotary_dim without qk_norm: a copy).
AttnValues attn_stage_fp64(const AttnGeometry& g, const AttnStageInput& in, Mode mode,
                           const BoundModel* bm = nullptr);
// What the backend STORES for S(x) (the decode core fuses the stage and stores no query): value
// = the faithful BF16 value, bound = how far the backend's stored BF16 value can be from it — 0
// where no BF16 rounding boundary lies within the pre-store bound of y (the backend's bits are
// then known), else the distance to the farthest reachable neighbour (one BF16 ULP).
AttnValues attn_stage_stored(const AttnGeometry& g, const AttnStageInput& in, const BoundModel& bm);
// |faithful − exact| per element before the store: the FP32 angle's rounding.
std::vector<double> attn_stage_angle_bounds(const AttnGeometry& g, const AttnStageInput& in);

// --- core (docs/spec/attention.md §4) ---------------------------------------------------------

// The keys of one sequence in logical order: key j at row j of k and v, bf16 [n, nkv·hd]. A
// judge may append one row past the sequence (the key a row at the last position would see if
// it also attended to p + 1) for the causal diagnosis.
struct AttnKeys {
  std::span<const uint16_t> k, v;
  uint64_t n = 0;
  // Keys given in FP64 instead of BF16 (same layout), when not empty: an outside reference's
  // rotated keys (the golden checks), which no BF16 store has rounded.
  std::span<const double> k_values;
};

// How the reference selects keys: `spec` is the rule of ops/attention.h; the others are the
// diagnostic alternatives the judge names a failure by (a row that also sees p + 1; query head
// q reading KV head q % nkv).
enum class AttnVariant { spec, causal_leak, gqa_modulo };

// Query rows of one core launch.
struct AttnCoreInput {
  std::span<const double> q;      // [rows, nq·hd]: the query values (BF16 values)
  std::span<const double> q_err;  // empty, or [rows, nq·hd]: |backend's q − q| (decode's fused S)
  std::span<const uint64_t> pos;  // [rows]: sequence position p of the row
  std::span<const uint64_t> seq;  // [rows]: index of the row's sequence in `keys`
  std::span<const AttnKeys> keys;
  std::span<const float> sinks;  // f32 [nq], or empty (no sinks)
  uint64_t window = 0;           // W of a sliding layer; 0 = full attention
  AttnVariant variant = AttnVariant::spec;
};

// One split (the prefill core, a one-split decode or verify): o = Σ softmax·v [rows, nq·hd]
// before the BF16 store.
AttnValues attn_core_fp64(const AttnGeometry& g, const AttnCoreInput& in,
                          const BoundModel* bm = nullptr);

// Split-K parts (ops/attention.h "Split-K"), [rows, nq, splits, hd + 2]: [o (hd) | m | l] per
// part, the FP32 values the backend stores (no sink; an empty part is o = 0, m = −inf, l = 0).
// l is relative to a maximum: the backend's STORED m of the part when `stored` (the backend's
// partials, same layout) is given — the bound then covers l against it — else the FP64 max.
AttnValues attn_partials_fp64(const AttnGeometry& g, const AttnCoreInput& in, uint64_t splits,
                              uint64_t block_size, std::span<const float> stored = {},
                              const BoundModel* bm = nullptr);

// The merge of `rows` rows' STORED partials f32 [rows, nq, splits, hd + 2] (and the sinks):
// o [rows, nq·hd] before the BF16 store.
AttnValues attn_merge_fp64(uint64_t rows, uint64_t nq, uint64_t hd, uint64_t splits,
                           std::span<const float> partials, std::span<const float> sinks,
                           const BoundModel* bm = nullptr);

// The gate: a · σ(g) for `rows` rows of the stored attn_output bf16 [rows, nq·hd] and the gate
// columns of qkv bf16 [rows, qkv_dim]; before the BF16 store.
AttnValues attn_gate_fp64(const AttnGeometry& g, uint64_t rows, std::span<const uint16_t> attn,
                          std::span<const uint16_t> qkv, const BoundModel* bm = nullptr);

// The first visible key of a row at p (ops/attention.h): max(0, p − W + 1), 0 without a window.
uint64_t attn_first_key(uint64_t p, uint64_t window);
// Split-K part k of a row whose visible keys are [lo, p]: the keys [first, last] it reduces,
// false when the part is empty.
bool attn_split_range(uint64_t lo, uint64_t p, uint64_t block_size, uint64_t splits, uint64_t k,
                      uint64_t& first, uint64_t& last);

// The derivations, one line each, for the reports (attention_bounds.cpp).
std::string attn_stage_bounds_formula();
std::string attn_core_bounds_formula();
std::string attn_partials_bounds_formula();
std::string attn_merge_bounds_formula();
std::string attn_gate_bounds_formula();

// --- the pieces the bounds are made of (attention_bounds.cpp), public for the tests ------------
namespace attn_detail {

// An FP32 expf whose result falls below 2^-126 (or is flushed): absolute error 2^-126.
inline constexpr double kExpUnderflowAbs = 0x1p-126;

// The relative error of an FP32 elementary function within `ulps` ULPs of the correctly rounded
// result (how glibc and CUDA state their bounds): (2·ulps + 1)·u.
double fn_rel(double ulps, const BoundModel& bm);

// qk_norm: the relative error θ_n of the backend's n_i = (x_i·inv)·(1 + w_i) against the FP64
// value, for a row of hd elements whose mean square plus eps is `m` (the same for every i).
double stage_norm_rel(uint64_t hd, double m, const BoundModel& bm);

// RoPE of one pair from the normed (a, b) with relative error θ_n and c = af·cos θ, s = af·sin θ
// of the backend's θ: the bound of y = a·c − b·s (or b·c + a·s) before the store; af the FP32
// attention factor.
double rope_pair_error(double a, double b, double c, double s, double y, double af, double theta_n,
                       const BoundModel& bm);

// |ŝ − s| of one score s = scale·Σ q_d k_d given D = Σ_d |q_d k_d| and X = Σ_d q_err_d·|k_d|
// (0 when q is stored), hd terms.
double score_error(double s, double D, double X, uint64_t hd, double scale, const BoundModel& bm);

// One online-softmax reduction (the core of one row and head, or one split-K part).
struct SoftmaxTerms {
  uint64_t hd = 0;
  std::vector<double> s, e;        // per key: exact score, its error bound
  std::vector<const uint16_t*> v;  // per key: the value row (bf16 [hd])
  uint64_t tiles = 0;              // T: tiles the keys fall in
  bool sink = false;               // the sink joins at the end (one split)
  double sink_value = 0.0;
  double m_ref = 0.0;  // the maximum the weights (and l) are relative to
};
struct SoftmaxResult {
  std::vector<double> o;        // Σ w v / l
  double m = 0.0, l = 0.0;      // max_j s_j (−inf: no key), Σ exp(s − m_ref) (+ sink)
  std::vector<double> o_bound;  // before any store
  double m_bound = 0.0, l_bound = 0.0;
};
SoftmaxResult softmax_fp64(const SoftmaxTerms& t);                                   // reference
void softmax_bounds(const SoftmaxTerms& t, const BoundModel& bm, SoftmaxResult& r);  // bounds

// o = N / L from |N̂ − N| ≤ err_num, |L̂ − L| ≤ err_l (after the common factor), then the FP32
// division: the bound of the quotient before the store; `terms` sizes the oracle's own FP64 term.
double quotient_error(double err_num, double err_l, double o, double L, uint64_t terms,
                      const BoundModel& bm);
// The merge: the relative error of one part's weight l_k·e^(m_k − M) (or the sink's e^(σ − M))
// through the sums of `splits` + 1 terms, given the gap M − m_k ≥ 0.
double merge_weight_rel(double gap, uint64_t splits, bool sink, const BoundModel& bm);
// The gate: the bound of a·σ(g) = y before the store.
double gate_error(double a, double y, const BoundModel& bm);

}  // namespace attn_detail

}  // namespace bufferlab::oracle
