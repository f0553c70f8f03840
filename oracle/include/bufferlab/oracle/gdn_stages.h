// The GDN stage references of the FP64 oracle (docs/spec/numerics.md §5, ops/gdn.h), each fed the
// inputs it is given — the original ones for the whole-call reference, a backend's STORED
// ones for the per-stage judge — and the derived per-element bounds of a backend's stored
// value against them (gdn_bounds.cpp, derivations next to each). Public: the kernel tests
// (tests/kernels/gdn_*) check each stage op against them.
//
// Layouts are those of ops/gdn.h. Chunk-stage arrays (gc, W, U, S, uc) are held in the §4.5
// region order of a GdnChunkOp span: region (b, c, v) = (b·cps + c)·nv + v, each region
// [64] (gc), [64][kd] (W), [64][vd] (U, uc), [kd][vd] (S); rows past the end of a partial
// chunk are zero. Values are FP64 (BF16 and FP32 stores widen exactly).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bufferlab/oracle/bounds.h"  // BoundModel, gamma, round_bf16, bf16_ulp_at
#include "bufferlab/oracle/gdn.h"

namespace bufferlab::oracle::gdn_detail {

inline constexpr uint64_t kChunk = GdnChunkCarve::kChunk;

// Error naming the GDN reference when a host copy does not hold the elements it needs.
void require_size(const char* what, uint64_t got, uint64_t want);

std::vector<double> widen_f32(std::span<const float> v);
std::vector<double> widen_bf16_bits(std::span<const uint16_t> v);
double softplus(double x);   // x for x > 20, else log1p(exp(x)) (ops/gdn.h)
double log_alpha(double a);  // log max(α, 1e-30f)

// The key head value head v reads (GQA: nv / nk value heads share one).
inline uint64_t key_head(const GdnGeometry& g, uint64_t v) { return v / (g.nv / g.nk); }

// The chunk grid of one call: `sequences` streams of L tokens, cps = cdiv(L, 64) chunks each.
struct ChunkGrid {
  uint64_t sequences = 0, L = 0, cps = 0, nv = 0;
  explicit ChunkGrid(const GdnDims& d);
  uint64_t regions() const { return sequences * cps * nv; }
  uint64_t region(uint64_t b, uint64_t c, uint64_t v) const { return (b * cps + c) * nv + v; }
  uint64_t rows_in(uint64_t c) const { return std::min(kChunk, L - c * kChunk); }
  uint64_t token(uint64_t b, uint64_t c, uint64_t i) const { return b * L + c * kChunk + i; }
};

// The S_c, uc and gc regions of region `reg` of a chunk span: [kd][vd], [64][vd], [64].
struct ChunkRegion {
  const double* S;
  const double* uc;
  const double* gc;
};
inline ChunkRegion chunk_region(std::span<const double> S, std::span<const double> uc,
                                std::span<const double> gc, uint64_t reg, uint64_t kd,
                                uint64_t vd) {
  return {S.data() + reg * kd * vd, uc.data() + reg * kChunk * vd, gc.data() + reg * kChunk};
}

// Conv input of sequence b, channel c at index i ∈ [−T, L), T = K − 1: the conv tail holds
// i < 0, oldest first; the de-interleaved rows hold the rest.
double conv_input(const GdnDims& d, std::span<const uint16_t> deint,
                  std::span<const uint16_t> conv_state, uint64_t b, uint64_t c, int64_t i);

// --- stage references ---------------------------------------------------------------------

// Causal conv1d + SiLU from the de-interleaved rows, weights and conv tails (FP64 sums):
// out [rows, conv_dim], tail [sequences, conv_dim, K − 1] after the call (exact BF16 values).
struct ConvRef {
  std::vector<double> out, tail;
};
ConvRef conv_stage(const GdnDims& d, std::span<const uint16_t> deint,
                   std::span<const uint16_t> conv_w, std::span<const uint16_t> conv_state);

// β = σ(b), α = exp(−exp(A_log)·softplus(a + dt_bias)): [rows, nv, 2].
std::vector<double> gates_stage(const GdnDims& d, std::span<const uint16_t> ba,
                                std::span<const float> a_log, std::span<const float> dt_bias);

// q, k of every token and key head, L2-normalised (eps kGdnL2Eps), q times kd^-1/2:
// [rows, nk, kd] each.
struct Qk {
  std::vector<double> q, k;
};
Qk normalise_qk(const GdnDims& d, std::span<const double> conv);
// Token t's key-head-h row of q and of k (kd values each).
inline const double* q_row(const Qk& qk, const GdnGeometry& g, uint64_t t, uint64_t h) {
  return qk.q.data() + (t * g.nk + h) * g.kd;
}
inline const double* k_row(const Qk& qk, const GdnGeometry& g, uint64_t t, uint64_t h) {
  return qk.k.data() + (t * g.nk + h) * g.kd;
}

// Row i of chunk region (b, c, v) in the output pass: its token t, key head h, the region's
// S_c, uc and gc (chunk_region) and the token's q row.
struct OutputRow {
  uint64_t b, c, v, i, h, t;
  ChunkRegion at;
  const double* q;
  uint64_t token_of(uint64_t l) const { return t - i + l; }  // row l of the same chunk
};
// Calls fn(row) for every row of every region of a chunk span, regions in (b, c, v) order:
// the one walk of output_stage and output_bounds.
template <class Fn>
void for_each_output_row(const GdnDims& d, const Qk& qk, std::span<const double> S,
                         std::span<const double> uc, std::span<const double> gc, Fn&& fn) {
  const GdnGeometry& g = d.geom;
  const ChunkGrid grid(d);
  for (uint64_t b = 0; b < grid.sequences; ++b)
    for (uint64_t c = 0; c < grid.cps; ++c)
      for (uint64_t v = 0; v < g.nv; ++v) {
        const uint64_t reg = grid.region(b, c, v), n = grid.rows_in(c), h = key_head(g, v);
        const ChunkRegion at = chunk_region(S, uc, gc, reg, g.kd, g.vd);
        for (uint64_t i = 0; i < n; ++i) {
          const uint64_t t = grid.token(b, c, i);
          fn(OutputRow{b, c, v, i, h, t, at, q_row(qk, g, t, h)});
        }
      }
}

// gc regions from the gates: inclusive Σ log max(α, 1e-30) within each chunk.
std::vector<double> gc_stage(const GdnDims& d, std::span<const double> gates);

// W, U regions by forward substitution of (I + L) from the conv (k, v), the gates (β) and the
// GIVEN gc (the backend's stored one in the judge, so gc errors do not leak into W/U).
struct Wu {
  std::vector<double> W, U;
};
Wu wu_stage(const GdnDims& d, const Qk& qk, std::span<const double> conv,
            std::span<const double> gates, std::span<const double> gc);

// The state pass from W, U, gc, k and the entry state [sequences, nv, kd, vd]: per chunk the
// entry carry S_c (the snapshot before its BF16 store) and uc = U − W·S_c (before its store);
// the carry is updated S_{c+1} = exp(gc_last)·S_c + Kᵀ·diag(exp(gc_last − gc))·uc' with uc' =
//   own:          uc (FP64 throughout: the chunked algorithm),
//   own_rounded:  bf16(uc) (the faithful reference: the backend carries from its stored uc),
//   given:        `given_uc` (the judge: the BACKEND's stored uc, so the carry comparison
//                 isolates the carry's own rounding; uc itself is checked on its own).
enum class Carry { own, own_rounded, given };
struct StatePass {
  std::vector<double> S, uc, state;
};
StatePass state_stage(const GdnDims& d, const Qk& qk, std::span<const double> W,
                      std::span<const double> U, std::span<const double> gc,
                      std::span<const double> state_in, Carry carry,
                      std::span<const double> given_uc = {});

// O = diag(exp gc)·Q·S_c + (Q Kᵀ ⊙ M)·uc per chunk: [rows, nv·vd].
std::vector<double> output_stage(const GdnDims& d, const Qk& qk, std::span<const double> S,
                                 std::span<const double> uc, std::span<const double> gc);

// The token recurrence in the pinned algebra δ = β(v − α·Sᵀk), S ← α·S + k·δᵀ, o = Sᵀq.
struct Recurrence {
  std::vector<double> o, state;
};
Recurrence recurrence_stage(const GdnDims& d, const Qk& qk, std::span<const double> conv,
                            std::span<const double> gates, std::span<const double> state_in);

// y = RMSNorm(o)·w·silu(z) per value head from the core output o [rows, nv·vd].
std::vector<double> gated_norm_stage(const GdnDims& d, std::span<const double> core,
                                     std::span<const uint16_t> deint,
                                     std::span<const uint16_t> norm_w);

// --- bounds (gdn_bounds.cpp) ------------------------------------------------------------------
// Each returns, per element of the stage's output, the bound on |backend − oracle| where the
// oracle is the stage reference above on the same inputs (faithful: BF16-rounded where the
// backend stores BF16). The roundoffs are the backend's (bm) plus the oracle's own FP64.

struct StageBounds {
  std::vector<double> bound;
  std::string formula;
};

StageBounds conv_bounds(const GdnDims& d, std::span<const uint16_t> deint,
                        std::span<const uint16_t> conv_w, std::span<const uint16_t> conv_state,
                        const ConvRef& ref, const BoundModel& bm);
StageBounds gates_bounds(const GdnDims& d, std::span<const uint16_t> ba,
                         std::span<const float> a_log, std::span<const float> dt_bias,
                         std::span<const double> gates, const BoundModel& bm);
StageBounds gc_bounds(const GdnDims& d, std::span<const double> gates, const BoundModel& bm);
// W and U from the inputs of wu_stage and its result.
struct WuBounds {
  StageBounds W, U;
};
WuBounds wu_bounds(const GdnDims& d, const Qk& qk, std::span<const double> conv,
                   std::span<const double> gates, std::span<const double> gc, const Wu& ref,
                   const BoundModel& bm);
// The state pass run with Carry::given on the stored uc (`pass`): S snapshots, uc, final state.
struct StateBounds {
  StageBounds S, uc, state;
};
StateBounds state_bounds(const GdnDims& d, const Qk& qk, std::span<const double> W,
                         std::span<const double> U, std::span<const double> gc,
                         std::span<const double> stored_uc, const StatePass& pass,
                         const BoundModel& bm);
StageBounds output_bounds(const GdnDims& d, const Qk& qk, std::span<const double> S,
                          std::span<const double> uc, std::span<const double> gc,
                          std::span<const double> out, const BoundModel& bm);
// Recurrence: the core output per token and the final state. `bf16_output` = false leaves out
// the BF16 store of o: the bound of an evaluation that keeps o in its working precision (the
// golden checks bound a third-party FP64 evaluation this way, docs/golden.md).
struct RecurrenceBounds {
  StageBounds o, state;
};
RecurrenceBounds recurrence_bounds(const GdnDims& d, const Qk& qk, std::span<const double> conv,
                                   std::span<const double> gates, std::span<const double> state_in,
                                   const BoundModel& bm, bool bf16_output = true);
StageBounds gated_norm_bounds(const GdnDims& d, std::span<const double> core,
                              std::span<const uint16_t> norm_w, std::span<const double> normed,
                              const BoundModel& bm);

}  // namespace bufferlab::oracle::gdn_detail
