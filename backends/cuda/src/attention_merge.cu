// CUDA split-K merge and sigmoid output gate (docs/spec/numerics.md §8, docs/spec/attention.md
// §4, ops/attention.h).
//   merge:  one thread per (row, head, d). Each thread forms the row's merge constants itself
//           from the partials' m and l (the same values in the same order in every thread of
//           the (row, head), so the same bits): m = max over the parts with l_k ≠ 0 of m_k and
//           the sink; w_k = l_k·expf(m_k − m); l = Σ_k w_k (k ascending) + expf(sink − m);
//           then o_d = bf16((Σ_k w_k·o_k,d) / l), the numerator an fmaf chain over k
//           ascending. Parts with l_k = 0 (empty) are skipped; a NaN l_k propagates. Rows ≥ live
//           write zeros and read nothing.
//   gate:   one thread per element, in place: y = bf16(a · (1 / (1 + expf(−g)))).
#include <algorithm>
#include <cstdint>

#include "attention_kernels.h"
#include "cuda_check.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

using namespace attn_device;

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = 65535 * 4;

unsigned blocks_for(uint64_t items) {
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min(kMaxBlocks, (items + kThreads - 1) / kThreads)));
}

// Kernel mutants as template parameters: NoRescale (M-MERGE: w_k = l_k), SinkInNumerator
// (M-SINK: the sink term added to the numerator as well as to l).
template <bool NoRescale, bool SinkInNumerator>
__global__ void __launch_bounds__(kThreads) splitk_merge_kernel(SplitKMergeLaunch a) {
  const uint64_t hd = a.hd, hd2 = hd + 2, S = a.splits, n = a.rows * a.nq * hd;
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t row = item / (a.nq * hd), head = (item / hd) % a.nq, d = item % hd;
    if (row >= a.live) {
      a.out[item] = 0;
      continue;
    }
    const float* parts = a.partials + (row * a.nq + head) * S * hd2;
    bool any = false;
    float m = 0.0f;
    for (uint64_t k = 0; k < S; ++k) {
      const float* pk = parts + k * hd2;
      if (pk[hd + 1] == 0.0f) continue;  // empty part; a NaN l propagates
      if (!any || m < pk[hd]) m = pk[hd];
      any = true;
    }
    const bool sink = a.sinks != nullptr;
    const float sink_logit = sink ? a.sinks[head] : 0.0f;
    if (sink && (!any || m < sink_logit)) m = sink_logit;
    float l = 0.0f, num = 0.0f;
    for (uint64_t k = 0; k < S; ++k) {
      const float* pk = parts + k * hd2;
      const float lk = pk[hd + 1];
      if (lk == 0.0f) continue;
      const float w = NoRescale ? lk : __fmul_rn(lk, expf(__fsub_rn(pk[hd], m)));
      l = __fadd_rn(l, w);
      num = fmaf(w, pk[d], num);
    }
    if (sink) {
      const float e = expf(__fsub_rn(sink_logit, m));
      l = __fadd_rn(l, e);
      if constexpr (SinkInNumerator) num = __fadd_rn(num, e);
    }
    a.out[item] = f32_to_bf16_bits(num / l);
  }
}

__global__ void __launch_bounds__(kThreads) attn_gate_kernel(AttnGateLaunch a) {
  const uint64_t n = a.rows * a.width;
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t row = item / a.width, c = item % a.width;
    const float g = bf(a.qkv[row * a.qkv_dim + a.gate_col0 + c]);
    const float sig = 1.0f / __fadd_rn(1.0f, expf(-g));
    a.attn[item] = f32_to_bf16_bits(__fmul_rn(bf(a.attn[item]), sig));
  }
}

}  // namespace

void launch_splitk_merge(const SplitKMergeLaunch& a, cudaStream_t stream, Mutant mutant) {
  const uint64_t items = a.rows * a.nq * a.hd;
  if (items == 0 || a.splits == 0) return;
  const auto kernel = mutant == Mutant::M_MERGE  ? splitk_merge_kernel<true, false>
                      : mutant == Mutant::M_SINK ? splitk_merge_kernel<false, true>
                                                 : splitk_merge_kernel<false, false>;
  BL_LAUNCH_NAMED("splitk_merge_kernel", kernel, blocks_for(items), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_attn_gate(const AttnGateLaunch& a, cudaStream_t stream) {
  const uint64_t items = a.rows * a.width;
  if (items == 0) return;
  BL_LAUNCH(attn_gate_kernel, blocks_for(items), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
