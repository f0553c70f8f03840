// CUDA Mamba-2 recurrence (docs/spec/numerics.md §6, ops/mamba2.h): decode / verify rows, and
// every row when there is no ssd_scratch. One block per (sequence, head, P-slice of
// mamba2_slice_rows(P, N) rows) keeps its FP32 state slice h [ps][N] in shared memory and walks
// the sequence's tokens in order. Per token: thread 0 computes dt and expf(dt·A); the token's
// x slice, B and C are widened into shared memory; each thread updates (p, n) entries
//   h[p][n] = expf(dt·A)·h[p][n] + (dt·x_p)·B_n
// (consecutive threads on consecutive n); then one thread per p forms
//   y_p = Σ_n h[p][n]·C_n (n ascending, fmaf chain) + D·x_p → BF16.
// The state is read once at the start and written back once at the end.
#include <algorithm>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cuda_check.h"
#include "mamba2_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

using namespace mamba2_device;

constexpr int kThreads = 256;
constexpr int kMaxSlice = static_cast<int>(kMamba2MaxSlice);
constexpr int kMaxN = static_cast<int>(kMaxMamba2Dim);
constexpr int kStateFloats = static_cast<int>(kMamba2SliceElems) + kMaxSlice;  // ps·(N + 1)
constexpr uint64_t kMaxBlocks = 65535 * 4;

__device__ float bf(uint16_t b) { return bf16_bits_to_f32(b); }

__global__ void __launch_bounds__(kThreads) mamba2_recurrent_kernel(Mamba2RecurrentLaunch a) {
  BL_SHARED(float[kStateFloats], state);  // h[p][n] at p·(N + 1) + n
  BL_SHARED(float[kMaxSlice], x);
  BL_SHARED(float[kMaxN], B);
  BL_SHARED(float[kMaxN], C);
  BL_SHARED(float, step_dt);
  BL_SHARED(float, step_decay);
  const int tid = static_cast<int>(threadIdx.x);
  const uint64_t ps = mamba2_slice_rows(a.P, a.N), slices = (a.P + ps - 1) / ps;
  const uint64_t N = a.N, ns = a.N + 1, heads_per_group = a.H / a.G;
  for (uint64_t item = blockIdx.x; item < a.sequences * a.H * slices; item += gridDim.x) {
    const uint64_t seq = item / (a.H * slices), rest = item % (a.H * slices);
    const uint64_t h = rest / slices, p0 = (rest % slices) * ps;
    const uint64_t np = std::min(ps, a.P - p0), g = h / heads_per_group;
    const uint64_t b_col = a.b_col + g * N, c_col = a.c_col + g * N, x_col = h * a.P + p0;
    const float D = a.D[h];
    float* carried = a.state + ((seq * a.H + h) * a.P + p0) * N;  // contiguous rows p0..
    for (uint64_t k = tid; k < np * N; k += kThreads) state[(k / N) * ns + k % N] = carried[k];

    for (uint64_t i = 0; i < a.L; ++i) {
      const uint64_t row = seq * a.L + i;
      const uint16_t* xbc = a.xbc + row * a.d_xbc;
      if (tid == 0) {
        const float dt = step(bf(a.zxbcdt[row * a.in_proj + a.dt_col + h]), a.dt_bias[h]);
        step_dt = dt;
        step_decay = expf(__fmul_rn(dt, -expf(a.a_log[h])));
      }
      if (static_cast<uint64_t>(tid) < np) x[tid] = bf(xbc[x_col + tid]);
      for (uint64_t n = tid; n < N; n += kThreads) {
        B[n] = bf(xbc[b_col + n]);
        C[n] = bf(xbc[c_col + n]);
      }
      __syncthreads();
      const float dt = step_dt, decay = step_decay;
      for (uint64_t k = tid; k < np * N; k += kThreads) {
        const uint64_t p = k / N, n = k % N;
        float& hv = state[p * ns + n];
        hv = __fadd_rn(__fmul_rn(decay, hv), __fmul_rn(__fmul_rn(dt, x[p]), B[n]));
      }
      __syncthreads();
      if (static_cast<uint64_t>(tid) < np) {
        const float* h_row = state + tid * ns;
        float acc = 0.0f;
        for (uint64_t n = 0; n < N; ++n) acc = fmaf(h_row[n], C[n], acc);
        const float y = __fadd_rn(acc, __fmul_rn(D, x[tid]));
        a.output[row * a.d_inner + x_col + tid] = f32_to_bf16_bits(y);
      }
      __syncthreads();  // the next token overwrites x, B, C, dt
    }

    for (uint64_t k = tid; k < np * N; k += kThreads) carried[k] = state[(k / N) * ns + k % N];
    __syncthreads();  // the next item reloads `state`
  }
}

}  // namespace

void launch_mamba2_recurrent(const Mamba2RecurrentLaunch& a, cudaStream_t stream) {
  if (a.sequences == 0 || a.L == 0 || a.H == 0 || a.P == 0) return;
  const uint64_t ps = mamba2_slice_rows(a.P, a.N);
  const uint64_t blocks = a.sequences * a.H * ((a.P + ps - 1) / ps);
  BL_LAUNCH(mamba2_recurrent_kernel, static_cast<unsigned>(std::min(kMaxBlocks, blocks)), kThreads,
            0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
