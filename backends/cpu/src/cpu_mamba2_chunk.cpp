// CPU chunked SSD of one sequence (ops/mamba2.h, docs/spec/numerics.md §6,
// docs/spec/buffers.md §4.6), in three stages over ssd_scratch:
//   cumsum  per head: dt = clamp(softplus(dt_raw + dt_bias)), dA_cumsum = inclusive Σ dt·A
//           (A = −exp(A_log)) per chunk, j ascending; a partial chunk's tail written 0.
//   bmm     per (chunk, group): CB[t][s] = C_t·B_s over the chunk's valid square, 0 elsewhere.
//   scan    per head, chunks in order, FP32 carry h0 [P][N] kept IN the state operand:
//             y_t = exp(min(cs_t, 0))·(h0·C_t) + Σ_{s≤t} CB[t][s]·exp(min(cs_t − cs_s, 0))·dt_s·x_s
//                   + D·x_t → BF16,
//             h0 ← exp(min(cs_last, 0))·h0 + Σ_s exp(min(cs_last − cs_s, 0))·dt_s·x_s B_sᵀ,
//           reading dt, dA_cumsum and CB as stored; cs_last is the chunk's last VALID row.
//           M-SSDSTATE (kernel mutant): h0 restarts from zero in every chunk after the first.
// Heads (and chunk × group tiles) run in parallel; each scan step is a matrix-vector product on
// stack panels (ScanPanels).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cpu_mamba2_common.h"
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

using ssd::kChunk;
using Shape = Mamba2ChunkOp::Shape;
using Bound = Mamba2ChunkOp::Bound;

uint64_t valid_rows(const Shape& d, uint64_t c) { return std::min(kChunk, d.rows - c * kChunk); }

// Element offset of head h, chunk c in the dt / dA_cumsum arrays.
uint64_t head_chunk(const Bound& b, uint64_t h, uint64_t c) { return (h * b.nc + c) * kChunk; }

void cumsum_head(const Shape& d, const Bound& b, uint64_t h) {
  const float A = -std::exp(b.a_log[h]);
  const float bias = b.dt_bias[h];
  const uint16_t* raw = b.zxbcdt + d.d_inner + d.d_xbc + h;  // dt_raw of head h, row stride in_proj
  for (uint64_t c = 0; c < d.chunks; ++c) {
    float* dt = b.dt + head_chunk(b, h, c);
    float* da = b.da + head_chunk(b, h, c);
    const uint64_t q = valid_rows(d, c);
    float cs = 0.0f;
    for (uint64_t i = 0; i < q; ++i) {
      const float v = ssd::step(bf16_bits_to_f32(raw[(c * kChunk + i) * d.in_proj]), bias);
      cs += v * A;
      dt[i] = v;
      da[i] = cs;
    }
    std::fill(dt + q, dt + kChunk, 0.0f);
    std::fill(da + q, da + kChunk, 0.0f);
  }
}

// CB of chunk c, group g: row t = B (q × N) · C_t.
void cb_tile(const Shape& d, const Bound& b, uint64_t c, uint64_t g) {
  alignas(64) float bm[kChunk * kMaxMamba2Dim];
  alignas(64) float ct[kMaxMamba2Dim];
  const uint64_t q = valid_rows(d, c), N = d.N;
  const uint16_t* rows = b.xbc + c * kChunk * d.d_xbc;
  for (uint64_t s = 0; s < q; ++s)
    ssd::widen(rows + s * d.d_xbc + ssd::b_column(d.d_inner, N, g), N, bm + s * N);
  float* cb = b.cb + (c * d.G + g) * kChunk * kChunk;
  for (uint64_t t = 0; t < q; ++t) {
    ssd::widen(rows + t * d.d_xbc + ssd::c_column(d.d_inner, N, d.G, g), N, ct);
    float* row = cb + t * kChunk;
    ssd::VectorMap(row, ssd::idx(q)).noalias() =
        ssd::matrix(bm, q, N, N) * ssd::ConstVectorMap(ct, ssd::idx(N));
    std::fill(row + q, row + kChunk, 0.0f);
  }
  std::fill(cb + q * kChunk, cb + kChunk * kChunk, 0.0f);
}

// The per-thread panels of one scan step (≈ 130 KiB at P = N = kMaxMamba2Dim):
//   xt[p·64 + s] = x_s[p] (x transposed), bw[s·N + n] = exp(min(cs_last − cs_s, 0))·dt_s·B_s[n],
//   ct = C_t, y = y_t, m[s] = CB[t][s]·exp(min(cs_t − cs_s, 0))·dt_s.
struct ScanPanels {
  alignas(64) float xt[kMaxMamba2Dim * kChunk];
  alignas(64) float bw[kChunk * kMaxMamba2Dim];
  alignas(64) float ct[kMaxMamba2Dim];
  alignas(64) float y[kMaxMamba2Dim];
  alignas(64) float m[kChunk];
};

void scan_chunk(const Shape& d, const Bound& b, uint64_t h, uint64_t c, float* h0, ScanPanels& w) {
  const uint64_t P = d.P, N = d.N, g = h / (d.H / d.G), q = valid_rows(d, c);
  const float* dt = b.dt + head_chunk(b, h, c);
  const float* cs = b.da + head_chunk(b, h, c);
  const float* cb = b.cb + (c * d.G + g) * kChunk * kChunk;
  const uint16_t* rows = b.xbc + c * kChunk * d.d_xbc;
  const float Dh = b.D[h];
  for (uint64_t s = 0; s < q; ++s) {
    const uint16_t* x = rows + s * d.d_xbc + h * P;
    for (uint64_t p = 0; p < P; ++p) w.xt[p * kChunk + s] = bf16_bits_to_f32(x[p]);
  }
  const ssd::ConstMatrixMap state = ssd::matrix(h0, P, N, N);
  ssd::VectorMap y(w.y, ssd::idx(P));
  for (uint64_t t = 0; t < q; ++t) {
    ssd::widen(rows + t * d.d_xbc + ssd::c_column(d.d_inner, N, d.G, g), N, w.ct);
    y.noalias() = state * ssd::ConstVectorMap(w.ct, ssd::idx(N));
    y *= std::exp(std::min(cs[t], 0.0f));
    const float* cb_t = cb + t * kChunk;
    for (uint64_t s = 0; s <= t; ++s)
      w.m[s] = cb_t[s] * std::exp(std::min(cs[t] - cs[s], 0.0f)) * dt[s];
    y.noalias() += ssd::matrix(w.xt, P, t + 1, kChunk) * ssd::ConstVectorMap(w.m, ssd::idx(t + 1));
    uint16_t* out = b.output + (c * kChunk + t) * d.d_inner + h * P;
    for (uint64_t p = 0; p < P; ++p) out[p] = f32_to_bf16_bits(w.y[p] + Dh * w.xt[p * kChunk + t]);
  }
  // h0[p] ← decay·h0[p] + Bwᵀ·x[·, p]: one N × q matrix-vector product per p.
  const float cs_last = cs[q - 1];
  for (uint64_t s = 0; s < q; ++s) {
    const float ws = std::exp(std::min(cs_last - cs[s], 0.0f)) * dt[s];
    float* bw = w.bw + s * N;
    ssd::widen(rows + s * d.d_xbc + ssd::b_column(d.d_inner, N, g), N, bw);
    for (uint64_t n = 0; n < N; ++n) bw[n] *= ws;
  }
  const float decay = std::exp(std::min(cs_last, 0.0f));
  const auto bwt = ssd::matrix(w.bw, q, N, N).transpose();
  for (uint64_t p = 0; p < P; ++p) {
    ssd::VectorMap hp(h0 + p * N, ssd::idx(N));
    hp *= decay;
    hp.noalias() += bwt * ssd::ConstVectorMap(w.xt + p * kChunk, ssd::idx(q));
  }
}

void scan_head(const Shape& d, const Bound& b, uint64_t h, bool reset_per_chunk) {
  ScanPanels panels;
  float* h0 = b.state + h * d.P * d.N;  // the carry lives in the state operand
  for (uint64_t c = 0; c < d.chunks; ++c) {
    if (reset_per_chunk && c > 0) std::fill(h0, h0 + d.P * d.N, 0.0f);
    scan_chunk(d, b, h, c, h0, panels);
  }
}

}  // namespace

void mamba2_chunk(const Workspace& ws, const Mamba2ChunkOp& op, Mutant mutant) {
  const Bound b = op.bind(ws);  // refuses ng = 0, H % G ≠ 0, P or N > kMaxMamba2Dim, short spans
  const Shape& d = op.shape();
  switch (op.stage) {
    case Mamba2ChunkOp::Stage::cumsum:
      parallel_for(static_cast<int64_t>(d.H), d.rows * d.H >= kParallelMinWork,
                   [&](int64_t h) { cumsum_head(d, b, static_cast<uint64_t>(h)); });
      break;
    case Mamba2ChunkOp::Stage::bmm:
      parallel_for(static_cast<int64_t>(d.chunks * d.G),
                   d.rows * kChunk * d.G * d.N >= kParallelMinWork, [&](int64_t i) {
                     const auto item = static_cast<uint64_t>(i);
                     cb_tile(d, b, item / d.G, item % d.G);
                   });
      break;
    case Mamba2ChunkOp::Stage::scan: {
      const bool reset = mutant == Mutant::M_SSDSTATE;
      parallel_for(static_cast<int64_t>(d.H), d.rows * d.H * d.P * d.N >= kParallelMinWork,
                   [&](int64_t h) { scan_head(d, b, static_cast<uint64_t>(h), reset); });
      break;
    }
  }
}

}  // namespace bufferlab::cpu
