// CUDA chunked SSD stages of one sequence (docs/spec/numerics.md §6, ops/mamba2.h).
//   cumsum  one 64-thread block per (head, chunk): each thread its token's dt and dt·A, then
//           thread 0 adds the 64 products in order (the pinned j-ascending FP32 sum; 64 adds
//           are nothing next to a parallel scan's different rounding). Chunk-parallel.
//   bmm     one block per (chunk, group): CB = C·Bᵀ of the chunk's 64 rows, 32-column tiles
//           of C and B widened to FP32 in shared memory (rows past the sequence are zero
//           tiles), each thread a 4×4 block of outputs, n ascending. Chunk-parallel. A tiled
//           kernel rather than cuBLAS: it writes the zero rows / columns of a partial chunk
//           itself, never reads past the sequence's rows, and its summation order is fixed.
//   scan    one block per (head, P-slice), chunks in order (the state carry is sequential):
//           the FP32 state slice h0 [ps][N] lives in shared memory for the whole sequence.
//           Per chunk: (1) C·h0 through 32-column tiles of C; (2) the scaled CB
//           L[t][s] = CB[t][s]·exp(min(cs_t − cs_s, 0))·dt_s (s ≤ t) in shared memory, then
//           y_t = exp(min(cs_t, 0))·(C_t·h0) + Σ_s L[t][s]·x_s + D·x_t → BF16; (3) h0 ←
//           exp(min(cs_last, 0))·h0 + Σ_s (w_s·x_s)·B_s, w_s = exp(min(cs_last − cs_s, 0))·dt_s,
//           through 32-column tiles of B. cs_last is the last token INSIDE the sequence (the
//           stored zeros past a partial chunk are not read), so the carried state is the state
//           after the sequence's last token.
// Every product / sum of the pinned formulas is written with __fmul_rn / __fadd_rn (no
// contraction into FMA the CPU does not do); dot products are fmaf chains in index order.
#include <algorithm>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cuda_check.h"
#include "mamba2_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

using namespace mamba2_device;

constexpr int kChunk = 64;
static_assert(kChunk == kMamba2Chunk, "the kernels hard-wire 64-token chunks");
constexpr uint64_t kMaxBlocks = 65535 * 4;

unsigned blocks_for(uint64_t blocks) {
  return static_cast<unsigned>(std::max<uint64_t>(1, std::min(kMaxBlocks, blocks)));
}

__device__ float bf(uint16_t b) { return bf16_bits_to_f32(b); }

// Tokens of chunk c inside the sequence.
__device__ uint64_t chunk_len(uint64_t rows, uint64_t c) {
  return std::min<uint64_t>(kChunk, rows - c * kChunk);
}

// ---------------------------------------------------------------- cumsum

__global__ void __launch_bounds__(kChunk) mamba2_cumsum_kernel(Mamba2CumsumLaunch a) {
  BL_SHARED(float[kChunk], products);
  BL_SHARED(float[kChunk], sums);
  const int t = static_cast<int>(threadIdx.x);
  for (uint64_t item = blockIdx.x; item < a.H * a.chunks; item += gridDim.x) {
    const uint64_t h = item / a.chunks, c = item % a.chunks;
    const uint64_t row = c * kChunk + t;
    const bool inside = row < a.rows;
    float dt = 0.0f;
    if (inside) {
      const float A = -expf(a.a_log[h]);
      dt = step(bf(a.zxbcdt[row * a.in_proj + a.dt_col + h]), a.dt_bias[h]);
      products[t] = __fmul_rn(dt, A);
    } else {
      products[t] = 0.0f;
    }
    __syncthreads();
    if (t == 0) {
      float run = 0.0f;
      for (int j = 0; j < kChunk; ++j) {
        run = __fadd_rn(run, products[j]);
        sums[j] = run;
      }
    }
    __syncthreads();
    const uint64_t at = (h * a.nc + c) * kChunk + t;
    a.dt[at] = inside ? dt : 0.0f;
    a.da[at] = inside ? sums[t] : 0.0f;
    __syncthreads();  // the next item rewrites products / sums
  }
}

// ---------------------------------------------------------------- bmm

constexpr int kBmmThreads = 256;
constexpr int kTile = 32;               // columns of n per shared tile
constexpr int kTileStride = kTile + 1;  // one pad column: row-strided reads hit distinct banks
constexpr int kSide = 16;               // threads per side of the 16×16 thread grid
constexpr int kPer = kChunk / kSide;    // outputs per thread per side (4)

// rows × kTile tile of the chunk's xBC columns [col + n0, col + n0 + kTile) as FP32, zero past
// `len` rows or `N` columns.
__device__ void load_tile(float* tile, const uint16_t* chunk_rows, uint64_t d_xbc, uint64_t col,
                          uint64_t n0, uint64_t N, uint64_t len, int threads) {
  for (int k = static_cast<int>(threadIdx.x); k < kChunk * kTile; k += threads) {
    const int r = k / kTile, j = k % kTile;
    const uint64_t n = n0 + j;
    tile[r * kTileStride + j] =
        (static_cast<uint64_t>(r) < len && n < N) ? bf(chunk_rows[r * d_xbc + col + n]) : 0.0f;
  }
}

__global__ void __launch_bounds__(kBmmThreads) mamba2_bmm_kernel(Mamba2BmmLaunch a) {
  BL_SHARED(float[kChunk * kTileStride], c_tile);
  BL_SHARED(float[kChunk * kTileStride], b_tile);
  const int tx = static_cast<int>(threadIdx.x) % kSide, ty = static_cast<int>(threadIdx.x) / kSide;
  for (uint64_t item = blockIdx.x; item < a.chunks * a.G; item += gridDim.x) {
    const uint64_t c = item / a.G, g = item % a.G;  // item = c·G + g: CB's chunk-major order
    const uint64_t len = chunk_len(a.rows, c);
    const uint16_t* rows = a.xbc + c * kChunk * a.d_xbc;
    float acc[kPer][kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[i][j] = 0.0f;
    for (uint64_t n0 = 0; n0 < a.N; n0 += kTile) {
      load_tile(c_tile, rows, a.d_xbc, a.c_col + g * a.N, n0, a.N, len, kBmmThreads);
      load_tile(b_tile, rows, a.d_xbc, a.b_col + g * a.N, n0, a.N, len, kBmmThreads);
      __syncthreads();
      for (int k = 0; k < kTile; ++k) {
        float cv[kPer], bv[kPer];
#pragma unroll
        for (int i = 0; i < kPer; ++i) cv[i] = c_tile[(ty + kSide * i) * kTileStride + k];
#pragma unroll
        for (int j = 0; j < kPer; ++j) bv[j] = b_tile[(tx + kSide * j) * kTileStride + k];
#pragma unroll
        for (int i = 0; i < kPer; ++i)
#pragma unroll
          for (int j = 0; j < kPer; ++j) acc[i][j] = fmaf(cv[i], bv[j], acc[i][j]);
      }
      __syncthreads();  // the next tile overwrites these
    }
    float* out = a.cb + item * kChunk * kChunk;
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const uint64_t t = ty + kSide * i, s = tx + kSide * j;
        out[t * kChunk + s] = (t < len && s < len) ? acc[i][j] : 0.0f;
      }
  }
}

// ---------------------------------------------------------------- scan

constexpr int kScanThreads = 256;
constexpr int kMaxSlice = static_cast<int>(kMamba2MaxSlice);
// Outputs (t, p) of one chunk per thread: 64·ps ≤ 64·64 over 256 threads.
constexpr int kItems = kChunk * kMaxSlice / kScanThreads;
constexpr int kStateFloats = static_cast<int>(kMamba2SliceElems) + kMaxSlice;  // ps·(N + 1)
constexpr int kScaledStride = kChunk + 1;
// The shared area used first for the C tiles, then the scaled CB, then the B tiles.
constexpr int kWorkFloats = kChunk * kScaledStride;
static_assert(kWorkFloats >= kChunk * kTileStride, "the tiles fit the shared work area");
static_assert((kStateFloats + kChunk * kMaxSlice + kWorkFloats + 3 * kChunk) * 4 <= 48 * 1024,
              "static shared memory of the scan block");

__global__ void __launch_bounds__(kScanThreads) mamba2_scan_kernel(Mamba2ScanLaunch a) {
  BL_SHARED(float[kStateFloats], state);    // h0[p][n] at p·(N + 1) + n
  BL_SHARED(float[kChunk * kMaxSlice], x);  // x_s[p] at s·ps + p, zero past the rows
  BL_SHARED(float[kWorkFloats], work);      // C tile | scaled CB | B tile
  BL_SHARED(float[kChunk], cs);
  BL_SHARED(float[kChunk], dt);
  BL_SHARED(float[kChunk], w);
  const int tid = static_cast<int>(threadIdx.x);
  const uint64_t ps = mamba2_slice_rows(a.P, a.N), slices = (a.P + ps - 1) / ps;
  const uint64_t N = a.N, ns = a.N + 1, heads_per_group = a.H / a.G;
  for (uint64_t item = blockIdx.x; item < a.H * slices; item += gridDim.x) {
    const uint64_t h = item / slices, p0 = (item % slices) * ps;
    const uint64_t np = std::min(ps, a.P - p0), g = h / heads_per_group;
    const uint64_t b_col = a.b_col + g * N, c_col = a.c_col + g * N, x_col = h * a.P + p0;
    const float D = a.D[h];
    float* carried = a.state + (h * a.P + p0) * N;  // rows p0.. of head h, contiguous
    for (uint64_t k = tid; k < np * N; k += kScanThreads) state[(k / N) * ns + k % N] = carried[k];

    for (uint64_t c = 0; c < a.chunks; ++c) {
      const uint64_t len = chunk_len(a.rows, c);
      const uint16_t* rows = a.xbc + c * kChunk * a.d_xbc;
      if (a.reset_state_per_chunk && c > 0)  // kernel mutant M-SSDSTATE
        for (uint64_t k = tid; k < np * N; k += kScanThreads) state[(k / N) * ns + k % N] = 0.0f;
      if (tid < kChunk) {
        const uint64_t at = (h * a.nc + c) * kChunk + tid;
        const bool inside = static_cast<uint64_t>(tid) < len;
        cs[tid] = inside ? a.da[at] : 0.0f;
        dt[tid] = inside ? a.dt[at] : 0.0f;
      }
      for (uint64_t k = tid; k < kChunk * np; k += kScanThreads) {
        const uint64_t s = k / np, p = k % np;
        x[k] = s < len ? bf(rows[s * a.d_xbc + x_col + p]) : 0.0f;
      }
      __syncthreads();
      const float cs_last = cs[len - 1];
      if (tid < kChunk)
        w[tid] = static_cast<uint64_t>(tid) < len
                     ? __fmul_rn(expf(min0(__fadd_rn(cs_last, -cs[tid]))), dt[tid])
                     : 0.0f;

      // (1) acc[i] = C_t · h0[p] for the thread's outputs k = tid + i·256, (t, p) = (k / np,
      // k % np); n ascending across the tiles.
      float acc[kItems];
#pragma unroll
      for (int i = 0; i < kItems; ++i) acc[i] = 0.0f;
      for (uint64_t n0 = 0; n0 < N; n0 += kTile) {
        load_tile(work, rows, a.d_xbc, c_col, n0, N, len, kScanThreads);
        __syncthreads();
        const int nt = static_cast<int>(std::min<uint64_t>(kTile, N - n0));
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
          const uint64_t k = tid + static_cast<uint64_t>(i) * kScanThreads;
          if (k < kChunk * np) {
            const float* c_row = work + (k / np) * kTileStride;
            const float* h_row = state + (k % np) * ns + n0;
            for (int j = 0; j < nt; ++j) acc[i] = fmaf(c_row[j], h_row[j], acc[i]);
          }
        }
        __syncthreads();  // the next tile / the scaled CB overwrites `work`
      }

      // (2) the scaled CB of the chunk, then y.
      const float* cb = a.cb + (c * a.G + g) * kChunk * kChunk;
      for (int k = tid; k < kChunk * kChunk; k += kScanThreads) {
        const int t = k / kChunk, s = k % kChunk;
        work[t * kScaledStride + s] =
            (s <= t && static_cast<uint64_t>(t) < len)
                ? __fmul_rn(__fmul_rn(cb[k], expf(min0(__fadd_rn(cs[t], -cs[s])))), dt[s])
                : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const uint64_t k = tid + static_cast<uint64_t>(i) * kScanThreads;
        if (k < kChunk * np && k / np < len) {
          const uint64_t t = k / np, p = k % np;
          const float* scaled = work + t * kScaledStride;
          float intra = 0.0f;
          for (uint64_t s = 0; s <= t; ++s) intra = fmaf(scaled[s], x[s * np + p], intra);
          const float from_state = __fmul_rn(expf(min0(cs[t])), acc[i]);
          const float y = __fadd_rn(__fadd_rn(from_state, intra), __fmul_rn(D, x[t * np + p]));
          a.output[(c * kChunk + t) * a.d_inner + x_col + p] = f32_to_bf16_bits(y);
        }
      }
      __syncthreads();  // the B tiles overwrite the scaled CB

      // (3) the state update, one (p, n) per thread per tile, s ascending.
      const float decay = expf(min0(cs_last));
      for (uint64_t n0 = 0; n0 < N; n0 += kTile) {
        load_tile(work, rows, a.d_xbc, b_col, n0, N, len, kScanThreads);
        __syncthreads();
        const uint64_t nt = std::min<uint64_t>(kTile, N - n0);
        for (uint64_t k = tid; k < np * kTile; k += kScanThreads) {
          const uint64_t p = k / kTile, j = k % kTile;
          if (j >= nt) continue;
          float sum = 0.0f;
          for (uint64_t s = 0; s < len; ++s)
            sum = fmaf(__fmul_rn(w[s], x[s * np + p]), work[s * kTileStride + j], sum);
          float& hv = state[p * ns + n0 + j];
          hv = __fadd_rn(__fmul_rn(decay, hv), sum);
        }
        __syncthreads();  // the next tile / chunk overwrites `work`, x, cs, dt, w
      }
    }

    for (uint64_t k = tid; k < np * N; k += kScanThreads) carried[k] = state[(k / N) * ns + k % N];
    __syncthreads();  // the next item reloads `state`
  }
}

}  // namespace

void launch_mamba2_cumsum(const Mamba2CumsumLaunch& a, cudaStream_t stream) {
  if (a.rows == 0 || a.H == 0) return;
  BL_LAUNCH(mamba2_cumsum_kernel, blocks_for(a.H * a.chunks), kChunk, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_mamba2_bmm(const Mamba2BmmLaunch& a, cudaStream_t stream) {
  if (a.rows == 0 || a.G == 0) return;
  BL_LAUNCH(mamba2_bmm_kernel, blocks_for(a.chunks * a.G), kBmmThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_mamba2_scan(const Mamba2ScanLaunch& a, cudaStream_t stream) {
  if (a.rows == 0 || a.H == 0 || a.P == 0) return;
  const uint64_t ps = mamba2_slice_rows(a.P, a.N);
  BL_LAUNCH(mamba2_scan_kernel, blocks_for(a.H * ((a.P + ps - 1) / ps)), kScanThreads, 0, stream,
            a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
