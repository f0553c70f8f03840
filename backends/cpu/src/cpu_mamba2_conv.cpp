// CPU Mamba-2 conv1d over xBC and the gated RMSNorm of the SSD output (ops/mamba2.h,
// docs/spec/numerics.md §6, §1). FP32 arithmetic, BF16 stores.
//
// conv1d: out[t, c] = bf16(silu(bias[c] + Σ_{j<K} w[c, j]·x[t − (K−1) + j, c])), bias first,
// then j ascending; an input before the sequence's first row comes from the sequence's tail
// state (oldest first), which ends as the last K−1 inputs. Work items are (sequence, block of
// kConvBlock channels): each walks its rows in tiles whose accumulators stay on the stack, the
// taps in groups widened to FP32 channel-contiguous (so the inner loops run over contiguous
// channels), then rewrites its own slice of the state: no item reads what another writes.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cpu_gemm.h"  // silu
#include "cpu_mamba2_common.h"
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

constexpr uint64_t kConvBlock = 64;    // channels per work item
constexpr uint64_t kRowTile = 16;      // rows accumulated together (4 KiB of accumulators)
constexpr uint64_t kTapGroup = 16;     // taps widened together (4 KiB)
constexpr uint64_t kNormStack = 4096;  // a norm group up to this size keeps g on the stack

void conv_block(const Mamba2ConvOp::Shape& d, const Mamba2ConvOp::Bound& b, uint64_t seq,
                uint64_t c0) {
  const uint64_t nb = std::min(kConvBlock, d.channels - c0);
  const uint64_t K = d.kernel, T = K - 1, L = d.L;
  uint16_t* state = b.state + (seq * d.channels + c0) * T;  // channel c's tail at state[c·T]
  const uint16_t* in = b.input + seq * L * d.in_stride + d.in_col + c0;
  uint16_t* out = b.output + seq * L * d.channels + c0;
  const uint16_t* w = b.weight + c0 * K;
  alignas(64) float bias[kConvBlock];
  alignas(64) float wt[kTapGroup][kConvBlock];  // wt[j][c] = w[c, j0 + j]
  alignas(64) float acc[kRowTile][kConvBlock];
  ssd::widen(b.bias + c0, nb, bias);
  for (uint64_t t0 = 0; t0 < L; t0 += kRowTile) {
    const uint64_t rt = std::min(kRowTile, L - t0);
    for (uint64_t r = 0; r < rt; ++r) std::copy(bias, bias + nb, acc[r]);
    for (uint64_t j0 = 0; j0 < K; j0 += kTapGroup) {
      const uint64_t jg = std::min(kTapGroup, K - j0);
      for (uint64_t j = 0; j < jg; ++j)
        for (uint64_t c = 0; c < nb; ++c) wt[j][c] = bf16_bits_to_f32(w[c * K + j0 + j]);
      // Taps ascending for every row: element q = t + j of [tail | rows] is a row of this
      // sequence or tail element q of the state.
      for (uint64_t j = 0; j < jg; ++j)
        for (uint64_t r = 0; r < rt; ++r) {
          const uint64_t q = t0 + r + j0 + j;
          float* a = acc[r];
          if (q >= T) {
            const uint16_t* x = in + (q - T) * d.in_stride;
            for (uint64_t c = 0; c < nb; ++c) a[c] += wt[j][c] * bf16_bits_to_f32(x[c]);
          } else {
            for (uint64_t c = 0; c < nb; ++c) a[c] += wt[j][c] * bf16_bits_to_f32(state[c * T + q]);
          }
        }
    }
    for (uint64_t r = 0; r < rt; ++r) {
      uint16_t* o = out + (t0 + r) * d.channels;
      for (uint64_t c = 0; c < nb; ++c) o[c] = f32_to_bf16_bits(silu(acc[r][c]));
    }
  }
  // New tail i = element L + i of [old tail | rows]. In place: i ascending reads old tail
  // element L + i > i, which no earlier step overwrote.
  if (L == 0) return;
  for (uint64_t c = 0; c < nb; ++c)
    for (uint64_t i = 0; i < T; ++i) {
      const uint64_t q = L + i;
      state[c * T + i] = q < T ? state[c * T + q] : in[(q - T) * d.in_stride + c];
    }
}

float gated(uint16_t o, uint16_t z) { return bf16_bits_to_f32(o) * silu(bf16_bits_to_f32(z)); }

// One group of gs columns: g = o·silu(z) kept on the stack when it fits, else computed again
// for the store (the same FP32 operations: the same values).
void norm_group(const uint16_t* o, const uint16_t* z, const uint16_t* w, uint64_t gs, float eps,
                uint16_t* y) {
  alignas(64) float g[kNormStack];
  const bool keep = gs <= kNormStack;
  float sum_sq = 0.0f;
  for (uint64_t i = 0; i < gs; ++i) {
    const float v = gated(o[i], z[i]);
    if (keep) g[i] = v;
    sum_sq += v * v;
  }
  const float rs = 1.0f / std::sqrt(sum_sq / static_cast<float>(gs) + eps);
  for (uint64_t i = 0; i < gs; ++i)
    y[i] = f32_to_bf16_bits((keep ? g[i] : gated(o[i], z[i])) * rs * bf16_bits_to_f32(w[i]));
}

}  // namespace

void mamba2_conv(const Workspace& ws, const Mamba2ConvOp& op) {
  const Mamba2ConvOp::Bound b = op.bind(ws);  // refuses kernel 0 and short operands
  const Mamba2ConvOp::Shape& d = op.shape();
  const uint64_t blocks = (d.channels + kConvBlock - 1) / kConvBlock;
  const auto items = static_cast<int64_t>(d.sequences * blocks);
  parallel_for(items, d.rows * d.channels * d.kernel >= kParallelMinWork, [&](int64_t i) {
    const auto item = static_cast<uint64_t>(i);
    conv_block(d, b, item / blocks, item % blocks * kConvBlock);
  });
}

// Gated RMSNorm, norm_before_gate = False: per row and group of group_size columns,
// g = o·silu(z), y = (g·rsqrt(mean(g²) + eps))·w. Rows run in parallel.
void mamba2_gated_norm(const Workspace& ws, const Mamba2GatedNormOp& op) {
  const Mamba2GatedNormOp::Bound b = op.bind(ws);  // refuses a group that does not divide
  const auto [rows, d_inner, gs, z_stride] = op.shape();
  const auto eps = static_cast<float>(op.eps);
  parallel_for(static_cast<int64_t>(rows), rows * d_inner >= kParallelMinWork, [&](int64_t ri) {
    const auto r = static_cast<uint64_t>(ri);
    for (uint64_t g0 = 0; g0 < d_inner; g0 += gs)
      norm_group(b.input + r * d_inner + g0, b.z + r * z_stride + g0, b.weight + g0, gs, eps,
                 b.output + r * d_inner + g0);
  });
}

}  // namespace bufferlab::cpu
