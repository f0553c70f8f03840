// CPU GDN input side (ops/gdn.h, docs/spec/numerics.md §5): the causal depthwise conv1d + SiLU over
// the Q|K|V channels with each sequence's BF16 tail state, and the β/α gates. FP32 arithmetic; rows
// run in parallel, each walked in channel chunks accumulated on the stack.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cpu_gdn_common.h"
#include "cpu_gemm.h"  // silu
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

// Channels per stack chunk of a conv row (2 KiB of FP32 sums).
constexpr uint64_t kConvChunk = 512;

// Output row t (0 ≤ t < L) of sequence s: out[c] = silu(Σ_{j<K} w[c, j]·x[t − (K−1) + j, c]),
// the sum in j order from 0; x before the sequence's first row is its tail state (read before
// the state is updated: the update runs after every row).
void conv_row(const GdnConvOp::Bound& b, const GdnConvOp::Shape& d, uint64_t s, uint64_t t) {
  const uint64_t K = d.kernel, tail = K - 1, C = d.channels;
  const uint16_t* tail_state = b.state + s * C * tail;
  float* out = b.output + (s * d.L + t) * C;
  alignas(64) float acc[kConvChunk];
  for (uint64_t c0 = 0; c0 < C; c0 += kConvChunk) {
    const uint64_t cc = std::min(kConvChunk, C - c0);
    std::fill(acc, acc + cc, 0.0f);
    for (uint64_t j = 0; j < K; ++j) {
      const uint64_t pos = t + j;  // position in [tail | sequence rows]
      const uint16_t* w = b.weight + c0 * K + j;
      if (pos >= tail) {
        const uint16_t* x = b.input + (s * d.L + pos - tail) * d.row_stride + c0;
        for (uint64_t c = 0; c < cc; ++c)
          acc[c] += bf16_bits_to_f32(w[c * K]) * bf16_bits_to_f32(x[c]);
      } else {
        const uint16_t* x = tail_state + c0 * tail + pos;
        for (uint64_t c = 0; c < cc; ++c)
          acc[c] += bf16_bits_to_f32(w[c * K]) * bf16_bits_to_f32(x[c * tail]);
      }
    }
    for (uint64_t c = 0; c < cc; ++c) out[c0 + c] = silu(acc[c]);
  }
}

// Sequence s's tail becomes the last K−1 entries of [old tail | its L inputs], oldest first.
// Ascending m reads old entries m + L > m before they are overwritten.
void update_tail(const GdnConvOp::Bound& b, const GdnConvOp::Shape& d, uint64_t s) {
  const uint64_t tail = d.kernel - 1, L = d.L;
  for (uint64_t c = 0; c < d.channels; ++c) {
    uint16_t* st = b.state + (s * d.channels + c) * tail;
    for (uint64_t m = 0; m < tail; ++m) {
      const uint64_t pos = m + L;  // position in [old tail | inputs]
      st[m] = pos < tail ? st[pos] : b.input[(s * L + pos - tail) * d.row_stride + c];
    }
  }
}

}  // namespace

void gdn_conv(const Workspace& ws, const GdnConvOp& op) {
  const GdnConvOp::Shape& d = op.shape();
  const GdnConvOp::Bound b = op.bind(ws);  // refuses kernel 0 and mis-sized operands
  gdn::require_index_range(op, d.rows);
  const uint64_t work = d.rows * d.channels * d.kernel;
  parallel_for(static_cast<int64_t>(d.rows), work >= kParallelMinWork, [&](int64_t r) {
    const auto row = static_cast<uint64_t>(r);
    conv_row(b, d, row / d.L, row % d.L);
  });
  if (d.kernel == 1 || d.L == 0) return;  // no tail, or nothing shifts in
  parallel_for(static_cast<int64_t>(d.sequences), d.sequences * d.channels >= kParallelMinWork,
               [&](int64_t s) { update_tail(b, d, static_cast<uint64_t>(s)); });
}

void gdn_gates(const Workspace& ws, const GdnGatesOp& op) {
  const GdnGatesOp::Shape& d = op.shape();
  const GdnGatesOp::Bound b = op.bind(ws);
  gdn::require_index_range(op, d.rows);
  const uint64_t nv = d.nv;
  parallel_for(static_cast<int64_t>(d.rows), d.rows * nv * 16 >= kParallelMinWork, [&](int64_t r) {
    const auto row = static_cast<uint64_t>(r);
    const uint16_t* ba = b.ba + row * 2 * nv;
    float* g = b.gates + row * 2 * nv;
    for (uint64_t v = 0; v < nv; ++v) {
      const float beta = gdn::sigmoid(bf16_bits_to_f32(ba[v]));
      const float x = bf16_bits_to_f32(ba[nv + v]) + b.dt_bias[v];
      const float alpha = std::exp(-(std::exp(b.a_log[v]) * gdn::softplus(x)));
      g[2 * v] = beta;
      g[2 * v + 1] = alpha;
    }
  });
}

}  // namespace bufferlab::cpu
