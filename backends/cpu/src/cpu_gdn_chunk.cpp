// CPU chunked GDN core (docs/spec/numerics.md §5, ops/gdn.h; C = 64, kd = vd = 128): the three
// stages a call runs in order, each checked on its own stored inputs.
//   wu:     per region (stream, chunk, value head): gc, then W and U by forward substitution
//           in FP32, stored BF16;
//   state:  per (stream, value head), chunks in order: the FP32 carry is the state operand
//           itself (updated in place, written back by construction), snapshotted BF16 into S;
//           uc = U − W·S_c from the stored W, U, stored BF16; the carry updated from the
//           stored uc;
//   output: per region, from the stored S snapshot, uc and gc.
// Every tile lives on the stack of the thread running its item (at most 176 KiB, in the
// output stage, plus the ≤ 96 KiB of packing blocks Eigen's products keep on the stack for these
// sizes), so nothing is allocated; the products run inside an OpenMP team (gdn::for_each_item).
// Only the lower triangles of the Gram matrix and of Q·Kᵀ ⊙ M are formed (the causal mask).
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cpu_gdn_common.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {
namespace {

using gdn::kChunk;
using gdn::kHead;

using Tile = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using TileMap = Eigen::Map<Tile, Eigen::Aligned64>;
using StateMap = Eigen::Map<Tile>;  // the state operand: no alignment promised
using Row = Eigen::Map<Eigen::Array<float, 1, static_cast<int>(kHead)>, Eigen::Aligned64>;

Eigen::Index idx(uint64_t v) { return static_cast<Eigen::Index>(v); }

// FP32 tiles of one chunk: up to 64 rows of a head's 128 columns, row-major.
struct alignas(64) RowTile {
  float v[kChunk * kHead];
  TileMap map(uint64_t rows) { return TileMap(v, idx(rows), idx(kHead)); }
  Row row(uint64_t i) { return Row(v + i * kHead); }
};

// Where one region's rows and stored arrays are.
struct Region {
  uint64_t index = 0;  // (b·cps + c)·nv + v: the slot in each carve array
  uint64_t row = 0;    // its first row, relative to row0: b·L + c·64
  uint64_t n = 0;      // valid rows (< 64 only in a partial last chunk)
  uint64_t v = 0;      // value head

  static Region of(const GdnChunkOp::Shape& d, uint64_t b, uint64_t c, uint64_t v) {
    Region r;
    r.index = (b * d.chunks_per_stream + c) * d.nv + v;
    r.row = b * d.L + c * kChunk;
    r.n = std::min(kChunk, d.L - c * kChunk);
    r.v = v;
    return r;
  }
  // Region number `item` of the wu and output stages: ordered as the carve.
  static Region item(const GdnChunkOp::Shape& d, uint64_t item) {
    const uint64_t bc = item / d.nv;
    return of(d, bc / d.chunks_per_stream, bc % d.chunks_per_stream, item % d.nv);
  }
};

struct Ctx {
  GdnChunkOp::Bound b;
  gdn::Columns cols;
  uint64_t conv_dim = 0;
};

// Rows [0, n) of the region's normalised keys (scale 1) or queries (scale kd^-1/2) into t.
void load_normalised(const Ctx& x, const Region& r, uint64_t col, float scale, RowTile& t) {
  for (uint64_t i = 0; i < r.n; ++i)
    gdn::l2_normalise(x.b.conv + (r.row + i) * x.conv_dim + col, kHead, scale, t.v + i * kHead);
}

// Rows [0, n) of a stored BF16 region [64][128] widened into t.
void widen(const uint16_t* region, uint64_t n, RowTile& t) {
  for (uint64_t k = 0; k < n * kHead; ++k) t.v[k] = bf16_bits_to_f32(region[k]);
}

// Rows [0, n) of t stored BF16 into the region, rows [n, 64) zero (no byte stays unwritten).
void store(const RowTile& t, uint64_t n, uint16_t* region) {
  for (uint64_t k = 0; k < n * kHead; ++k) region[k] = f32_to_bf16_bits(t.v[k]);
  std::fill(region + n * kHead, region + kChunk * kHead, uint16_t{0});
}

// wu: gc_i = Σ_{j≤i} log max(α_j, 1e-30); L_il = β_i·exp(gc_i − gc_l)·⟨k_i, k_l⟩ (l < i);
// U_i = β_i v_i − Σ_{l<i} L_il U_l and W_i = β_i exp(gc_i) k_i − Σ_{l<i} L_il W_l from the FP32
// rows l < i (k → W and v → U in place, after the Gram matrix has read k).
void wu_region(const Ctx& x, const Region& r) {
  const uint64_t n = r.n, nv = x.cols.nv;
  RowTile w, u;
  alignas(64) float gram[kChunk * kChunk];
  float gc[kChunk], beta[kChunk];
  load_normalised(x, r, x.cols.k(r.v), 1.0f, w);
  float cum = 0.0f;
  for (uint64_t i = 0; i < n; ++i) {
    const float* row = x.b.conv + (r.row + i) * x.conv_dim + x.cols.v(r.v);
    std::copy(row, row + kHead, u.v + i * kHead);
    const float* g = x.b.gates + ((r.row + i) * nv + r.v) * 2;
    beta[i] = g[0];
    cum += std::log(std::max(g[1], kGdnAlphaFloor));  // a NaN α stays NaN
    gc[i] = cum;
  }
  // Only the strictly lower triangle is read: the product fills the lower half alone.
  TileMap(gram, idx(n), idx(n)).triangularView<Eigen::StrictlyLower>() =
      w.map(n) * w.map(n).transpose();
  for (uint64_t i = 0; i < n; ++i) {
    u.row(i) *= beta[i];
    w.row(i) *= beta[i] * std::exp(gc[i]);
    for (uint64_t l = 0; l < i; ++l) {
      const float lil = beta[i] * std::exp(gc[i] - gc[l]) * gram[i * n + l];
      u.row(i) -= lil * u.row(l);
      w.row(i) -= lil * w.row(l);
    }
  }
  store(w, n, x.b.W + r.index * kChunk * kHead);
  store(u, n, x.b.U + r.index * kChunk * kHead);
  float* gc_out = x.b.gc + r.index * kChunk;
  std::copy(gc, gc + n, gc_out);
  std::fill(gc_out + n, gc_out + kChunk, 0.0f);
}

// state: stream b, value head v, chunks in order on the FP32 carry (the state operand).
// M-GDNCARRY carries the BF16 snapshot instead: the carry is rounded before each chunk reads it
// and once more after the last update.
void state_pass(const Ctx& x, const GdnChunkOp::Shape& d, uint64_t b, uint64_t v, bool mutant) {
  float* carry = x.b.state + (b * d.nv + v) * kHead * kHead;
  StateMap S(carry, idx(kHead), idx(kHead));
  RowTile w, u, k;
  for (uint64_t c = 0; c < d.chunks_per_stream; ++c) {
    const Region r = Region::of(d, b, c, v);
    const uint64_t n = r.n;
    uint16_t* snap = x.b.S + r.index * kHead * kHead;
    for (uint64_t e = 0; e < kHead * kHead; ++e) {
      snap[e] = f32_to_bf16_bits(carry[e]);
      if (mutant) carry[e] = bf16_bits_to_f32(snap[e]);
    }
    widen(x.b.W + r.index * kChunk * kHead, n, w);
    widen(x.b.U + r.index * kChunk * kHead, n, u);
    u.map(n).noalias() -= w.map(n) * S;  // uc = U − W·S_c (FP32)
    uint16_t* uc = x.b.uc + r.index * kChunk * kHead;
    store(u, n, uc);
    widen(uc, n, u);  // the update reads the STORED uc
    // S_{c+1} = exp(gc_last)·S_c + Σ_l (exp(gc_last − gc_l)·k_l) uc_lᵀ
    const float* gc = x.b.gc + r.index * kChunk;
    const float last = gc[n - 1];
    load_normalised(x, r, x.cols.k(v), 1.0f, k);
    for (uint64_t l = 0; l < n; ++l) k.row(l) *= std::exp(last - gc[l]);
    S *= std::exp(last);
    S.noalias() += k.map(n).transpose() * u.map(n);
  }
  if (mutant && d.chunks_per_stream > 0)
    for (uint64_t e = 0; e < kHead * kHead; ++e) carry[e] = round_to_bf16(carry[e]);
}

// output: O_i = exp(gc_i)·(q_i·S_c) + Σ_{l≤i} exp(gc_i − gc_l)·⟨q_i, k_l⟩·uc_l, S_c the stored
// snapshot; stored BF16 into the attention output rows, columns v·vd.
void output_region(const Ctx& x, const Region& r) {
  const uint64_t n = r.n;
  RowTile q, k, uc;
  alignas(64) float s[kHead * kHead];
  alignas(64) float a[kChunk * kChunk];
  load_normalised(x, r, x.cols.q(r.v), gdn::query_scale(kHead), q);
  load_normalised(x, r, x.cols.k(r.v), 1.0f, k);
  widen(x.b.uc + r.index * kChunk * kHead, n, uc);
  const uint16_t* snap = x.b.S + r.index * kHead * kHead;
  for (uint64_t e = 0; e < kHead * kHead; ++e) s[e] = bf16_bits_to_f32(snap[e]);
  const float* gc = x.b.gc + r.index * kChunk;
  TileMap A(a, idx(n), idx(n));
  A.triangularView<Eigen::Lower>() = q.map(n) * k.map(n).transpose();  // M is lower
  for (uint64_t i = 0; i < n; ++i)
    for (uint64_t l = 0; l <= i; ++l) a[i * n + l] *= std::exp(gc[i] - gc[l]);
  TileMap O = k.map(n);  // k is read: its tile takes the output
  O.noalias() = q.map(n) * TileMap(s, idx(kHead), idx(kHead));
  for (uint64_t i = 0; i < n; ++i) k.row(i) *= std::exp(gc[i]);
  O.noalias() += A.triangularView<Eigen::Lower>() * uc.map(n);
  const uint64_t width = x.cols.nv * x.cols.vd;
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t* out = x.b.output + (r.row + i) * width + r.v * kHead;
    for (uint64_t j = 0; j < kHead; ++j) out[j] = f32_to_bf16_bits(k.v[i * kHead + j]);
  }
}

}  // namespace

void gdn_chunk(const Workspace& ws, const GdnChunkOp& op, Mutant mutant) {
  const GdnChunkOp::Shape& d = op.shape();
  const Ctx x{op.bind(ws), {d.nk, d.kd, d.nv, d.vd}, d.conv_dim};  // refuses kd, vd ≠ 128
  const uint64_t regions = d.chunks * d.nv;                        // bind checked the product
  gdn::require_gqa(op, d.nk, d.nv);
  gdn::require_index_range(op, regions);
  switch (op.stage) {
    case GdnChunkOp::Stage::wu:
      gdn::for_each_item(regions, [&](uint64_t i) { wu_region(x, Region::item(d, i)); });
      break;
    case GdnChunkOp::Stage::state: {
      const bool carry_snapshot = mutant == Mutant::M_GDNCARRY;
      gdn::for_each_item(d.streams * d.nv,
                         [&](uint64_t i) { state_pass(x, d, i / d.nv, i % d.nv, carry_snapshot); });
      break;
    }
    case GdnChunkOp::Stage::output:
      gdn::for_each_item(regions, [&](uint64_t i) { output_region(x, Region::item(d, i)); });
      break;
  }
}

}  // namespace bufferlab::cpu
