// CUDA chunked GDN core (docs/spec/numerics.md §5, ops/gdn.h GdnChunkOp): C = 64, kd = vd = 128.
// Notation per region (stream b, chunk c, value head h; key head h / (nv/nk)): n = the
// chunk's valid rows (64, or fewer in a partial last chunk), k_i / q_i the L2-normalised key /
// query rows recomputed from the FP32 conv output (q times q_scale), β_i, α_i the gates.
//
//   wu      one block per region, 256 threads. gc_i = Σ_{j≤i} log max(α_j, 1e-30) (one
//           thread, in order); the k tile (64×128 FP32, rows padded to 129 floats so the
//           per-pair dot products of different rows hit different banks) and
//           L_il = (β_i·exp(gc_i − gc_l))·⟨k_i, k_l⟩ (l < i, one thread per pair, d in order);
//           then forward substitution X_i = B_i − Σ_{l<i} L_il·X_l (l in order) with
//           B = diag(β·exp(gc))·K for W and diag(β)·V for U. Threads 0–127 own one W column,
//           128–255 one U column: a column's rows depend on that column only, so the solve
//           needs no barrier, and W overwrites the k tile in place (row i reads k_i before it
//           writes W_i; rows l < i already hold W_l). FP32 rows stored BF16 as they finish.
//   state   one block per (stream, head, 32-column slice), 256 threads = 8 row groups × 32
//           columns, sequential over the stream's chunks with the FP32 carry slice (128×32)
//           in shared memory. Per chunk: snapshot S_c → BF16; uc_i = U_i − W_i·S_c from the
//           STORED W, U (d in order) → BF16; S_{c+1} = exp(gc_last)·S_c + Σ_{i<n}
//           (k_i·exp(gc_last − gc_i))·uc_i from the STORED uc (i in order). M-GDNCARRY carries
//           the BF16 snapshot instead: the carry takes its snapshot's value before each chunk
//           reads it, and the final state is rounded once more (as the CPU backend).
//   output  one block per region, 256 threads. A_il = ⟨q_i, k_l⟩·exp(gc_i − gc_l) (l ≤ i),
//           then O_i = exp(gc_i)·(q_i·S_c) + Σ_{l≤i} A_il·uc_l from the stored S snapshot,
//           uc and gc; one thread per (column, every other row).
// Rows past n are written as zeros in W, U, gc (wu) and uc (state); the output has no such
// rows. Dynamic shared memory above 48 KiB is opted into per launch (an attribute, not an
// allocation).
#include <cstdint>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/gdn.h"
#include "cuda_check.h"
#include "gdn_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

using namespace gdn_device;

constexpr int kC = static_cast<int>(GdnChunkCarve::kChunk);  // 64
constexpr int kD = static_cast<int>(kGdnChunkedHeadDim);     // 128 = kd = vd
constexpr int kPad = kD + 1;                                 // padded FP32 row of a q/k tile
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kSlice = 32;                      // state pass: columns per block
constexpr int kRowGroups = kThreads / kSlice;   // 8
constexpr uint64_t kTile = uint64_t{kC} * kD;   // elements of a W / U / uc region
constexpr uint64_t kSTile = uint64_t{kD} * kD;  // elements of an S region
constexpr uint64_t kMaxGridX = 0x7FFFFFFF;

// Where a region's rows and operands are.
struct Region {
  uint64_t index = 0;                        // (b·cps + c)·nv + h
  uint64_t row0 = 0;                         // first row of the chunk (b·L + c·64)
  int n = 0;                                 // valid rows
  uint64_t q_col = 0, k_col = 0, v_col = 0;  // conv columns of q, k (key head) and v
};

__device__ Region region_of(const GdnChunkLaunch& a, uint64_t b, uint64_t c, uint64_t h) {
  Region r;
  r.index = (b * a.chunks_per_stream + c) * a.nv + h;
  r.row0 = b * a.L + c * kC;
  const uint64_t left = a.L - c * kC;
  r.n = left < static_cast<uint64_t>(kC) ? static_cast<int>(left) : kC;
  const uint64_t kh = h / (a.nv / a.nk);
  r.q_col = kh * kD;
  r.k_col = a.nk * kD + kh * kD;
  r.v_col = 2 * a.nk * kD + h * kD;
  return r;
}

// Normalised rows of the q or k head at conv column `col` → tile[i·stride + d] (times
// `scale` after the normalisation when scale ≠ 1: q's kd^-1/2), rows ≥ n zero. One warp per
// row; every thread of the block calls it.
__device__ void load_normalised(const GdnChunkLaunch& a, const Region& r, uint64_t col, float scale,
                                bool scaled, float* tile, int stride) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  for (int i = warp; i < kC; i += kWarps) {
    float* row = tile + i * stride;
    if (i < r.n) {
      const float* x = a.conv + (r.row0 + i) * a.conv_dim + col;
      const float inv = l2_inverse_norm(x, kD, kGdnL2Eps);
      for (int d = lane; d < kD; d += kWarpSize) {
        const float v = x[d] * inv;
        row[d] = scaled ? v * scale : v;
      }
    } else {
      for (int d = lane; d < kD; d += kWarpSize) row[d] = 0.0f;
    }
  }
}

// ---- wu ------------------------------------------------------------------------------------

constexpr size_t kWuSmem =
    sizeof(float) * (size_t{kC} * kPad + size_t{kC} * kC + size_t{kC} * kD + 2 * size_t{kC});

__global__ void __launch_bounds__(kThreads) gdn_chunk_wu_kernel(GdnChunkLaunch a) {
  BL_DYNAMIC_SHARED(float, smem);
  float* k = smem;              // [64][kPad]: k rows, then W rows in place
  float* lmat = k + kC * kPad;  // [64][64]: L_il, zero for l ≥ i
  float* u = lmat + kC * kC;    // [64][128]: U rows
  float* gc = u + kC * kD;      // [64]
  float* beta = gc + kC;        // [64]

  const uint64_t h = blockIdx.x % a.nv, bc = blockIdx.x / a.nv;
  const Region r = region_of(a, bc / a.chunks_per_stream, bc % a.chunks_per_stream, h);
  const int tid = static_cast<int>(threadIdx.x);

  if (tid < kC) beta[tid] = tid < r.n ? a.gates[((r.row0 + tid) * a.nv + h) * 2] : 0.0f;
  if (tid == 0) {
    float sum = 0.0f;
    for (int i = 0; i < kC; ++i) {
      if (i < r.n) sum += log_alpha(a.gates[((r.row0 + i) * a.nv + h) * 2 + 1], kGdnAlphaFloor);
      gc[i] = i < r.n ? sum : 0.0f;
    }
  }
  load_normalised(a, r, r.k_col, 1.0f, false, k, kPad);
  __syncthreads();
  if (tid < kC) a.gc[r.index * kC + tid] = gc[tid];

  for (int p = tid; p < kC * kC; p += kThreads) {
    const int i = p / kC, l = p % kC;
    float value = 0.0f;
    if (l < i && i < r.n) {
      float dot = 0.0f;
      for (int d = 0; d < kD; ++d) dot += k[i * kPad + d] * k[l * kPad + d];
      value = beta[i] * expf(gc[i] - gc[l]) * dot;
    }
    lmat[p] = value;
  }
  __syncthreads();

  // Forward substitution, one column per thread.
  const bool is_w = tid < kD;
  const int col = is_w ? tid : tid - kD;
  float* x = is_w ? k : u;
  const int x_stride = is_w ? kPad : kD;
  uint16_t* out = (is_w ? a.W : a.U) + r.index * kTile;
  for (int i = 0; i < kC; ++i) {
    if (i < r.n) {
      float v = is_w ? beta[i] * expf(gc[i]) * k[i * kPad + col]
                     : beta[i] * a.conv[(r.row0 + i) * a.conv_dim + r.v_col + col];
      for (int l = 0; l < i; ++l) v -= lmat[i * kC + l] * x[l * x_stride + col];
      x[i * x_stride + col] = v;
      out[i * kD + col] = f32_to_bf16_bits(v);
    } else {
      out[i * kD + col] = 0;
    }
  }
}

// ---- state ---------------------------------------------------------------------------------

constexpr size_t kStateSmem =
    sizeof(float) * (size_t{kD} * kSlice + size_t{kC} * kD + size_t{kC} * kD + size_t{kC} * kSlice);

__global__ void __launch_bounds__(kThreads) gdn_chunk_state_kernel(GdnChunkLaunch a) {
  BL_DYNAMIC_SHARED(float, smem);
  float* carry = smem;             // [128][32]: S[d][slice column], FP32
  float* w = carry + kD * kSlice;  // [64][128]: stored W rows, as FP32
  float* ke = w + kC * kD;         // [64][128]: k_i·exp(gc_last − gc_i)
  float* ucs = ke + kC * kD;       // [64][32]: stored uc, as FP32

  const int slices = kD / kSlice;
  const uint64_t slice = blockIdx.x % slices, bh = blockIdx.x / slices;
  const uint64_t h = bh % a.nv, b = bh / a.nv;
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % kSlice, ty = tid / kSlice;
  const uint64_t j = slice * kSlice + tx;  // this thread's column of vd
  float* state = a.state + (b * a.nv + h) * kSTile;

  for (int d = ty; d < kD; d += kRowGroups) carry[d * kSlice + tx] = state[d * kD + j];

  for (uint64_t c = 0; c < a.chunks_per_stream; ++c) {
    const Region r = region_of(a, b, c, h);
    // The previous chunk's carry update and every read of w / ke / ucs are done.
    __syncthreads();
    uint16_t* snapshot = a.S + r.index * kSTile;
    for (int d = ty; d < kD; d += kRowGroups) {
      const uint16_t bits = f32_to_bf16_bits(carry[d * kSlice + tx]);
      snapshot[d * kD + j] = bits;
      if (a.carry_bf16) carry[d * kSlice + tx] = bf16_bits_to_f32(bits);
    }
    const uint16_t* W = a.W + r.index * kTile;
    for (int e = tid; e < kC * kD; e += kThreads) w[e] = bf16_bits_to_f32(W[e]);
    const float* gc = a.gc + r.index * kC;
    const float gc_last = gc[r.n - 1];
    {
      const int lane = tid % kWarpSize, warp = tid / kWarpSize;
      for (int i = warp; i < kC; i += kWarps) {
        float* row = ke + i * kD;
        if (i < r.n) {
          const float* x = a.conv + (r.row0 + i) * a.conv_dim + r.k_col;
          const float inv = l2_inverse_norm(x, kD, kGdnL2Eps);
          const float decay = expf(gc_last - gc[i]);
          for (int d = lane; d < kD; d += kWarpSize) row[d] = x[d] * inv * decay;
        } else {
          for (int d = lane; d < kD; d += kWarpSize) row[d] = 0.0f;
        }
      }
    }
    __syncthreads();

    // uc = U − W·S_c, rows ty, ty + 8, ...
    const uint16_t* U = a.U + r.index * kTile;
    uint16_t* uc = a.uc + r.index * kTile;
    for (int i = ty; i < kC; i += kRowGroups) {
      uint16_t stored = 0;
      if (i < r.n) {
        float ws = 0.0f;
        for (int d = 0; d < kD; ++d) ws += w[i * kD + d] * carry[d * kSlice + tx];
        stored = f32_to_bf16_bits(bf16_bits_to_f32(U[i * kD + j]) - ws);
      }
      uc[i * kD + j] = stored;
      ucs[i * kSlice + tx] = bf16_bits_to_f32(stored);
    }
    __syncthreads();

    // S_{c+1} = exp(gc_last)·S_c + Σ_i ke_i ⊗ uc_i: each thread its own carry entries.
    const float keep = expf(gc_last);
    for (int d = ty; d < kD; d += kRowGroups) {
      float add = 0.0f;
      for (int i = 0; i < r.n; ++i) add += ke[i * kD + d] * ucs[i * kSlice + tx];
      carry[d * kSlice + tx] = keep * carry[d * kSlice + tx] + add;
    }
  }
  // Each thread writes back exactly the entries it updated last (M-GDNCARRY: as BF16 values,
  // the snapshot the next call would carry).
  for (int d = ty; d < kD; d += kRowGroups) {
    const float v = carry[d * kSlice + tx];
    state[d * kD + j] = a.carry_bf16 ? round_to_bf16(v) : v;
  }
}

// ---- output --------------------------------------------------------------------------------

constexpr size_t kOutputSmem =
    sizeof(float) * (2 * size_t{kC} * kPad + size_t{kC} * kC + kC) + sizeof(uint16_t) * kSTile;

__global__ void __launch_bounds__(kThreads) gdn_chunk_output_kernel(GdnChunkLaunch a) {
  BL_DYNAMIC_SHARED(float, smem);
  float* q = smem;              // [64][kPad]: scaled normalised q rows
  float* k = q + kC * kPad;     // [64][kPad]: k rows; then the stored uc as FP32 [64][128]
  float* amat = k + kC * kPad;  // [64][64]: A_il, zero for l > i
  float* gc = amat + kC * kC;   // [64]
  auto* s = reinterpret_cast<uint16_t*>(gc + kC);  // [128][128]: the stored S snapshot

  const uint64_t h = blockIdx.x % a.nv, bc = blockIdx.x / a.nv;
  const Region r = region_of(a, bc / a.chunks_per_stream, bc % a.chunks_per_stream, h);
  const int tid = static_cast<int>(threadIdx.x);

  if (tid < kC) gc[tid] = a.gc[r.index * kC + tid];
  const uint16_t* S = a.S + r.index * kSTile;
  for (uint64_t e = tid; e < kSTile; e += kThreads) s[e] = S[e];
  load_normalised(a, r, r.q_col, a.q_scale, true, q, kPad);
  load_normalised(a, r, r.k_col, 1.0f, false, k, kPad);
  __syncthreads();

  for (int p = tid; p < kC * kC; p += kThreads) {
    const int i = p / kC, l = p % kC;
    float value = 0.0f;
    if (l <= i && i < r.n) {
      float dot = 0.0f;
      for (int d = 0; d < kD; ++d) dot += q[i * kPad + d] * k[l * kPad + d];
      value = dot * expf(gc[i] - gc[l]);
    }
    amat[p] = value;
  }
  __syncthreads();  // the k tile is free: it now takes uc

  float* ucs = k;
  const uint16_t* uc = a.uc + r.index * kTile;
  for (int e = tid; e < kC * kD; e += kThreads) ucs[e] = bf16_bits_to_f32(uc[e]);
  __syncthreads();

  const int col = tid % kD;
  const uint64_t width = a.nv * kD;
  for (int i = tid / kD; i < r.n; i += kThreads / kD) {
    float qs = 0.0f;
    for (int d = 0; d < kD; ++d) qs += q[i * kPad + d] * bf16_bits_to_f32(s[d * kD + col]);
    float intra = 0.0f;
    for (int l = 0; l <= i; ++l) intra += amat[i * kC + l] * ucs[l * kD + col];
    const float o = expf(gc[i]) * qs + intra;
    a.output[(r.row0 + i) * width + h * kD + col] = f32_to_bf16_bits(o);
  }
}

template <class Kernel>
void launch(const char* stage, Kernel kernel, uint64_t blocks, size_t smem, const GdnChunkLaunch& a,
            cudaStream_t stream) {
  if (blocks > kMaxGridX)
    throw Error(std::string(stage) + ": " + std::to_string(blocks) +
                " blocks exceed the grid limit");
  BUFFERLAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem)));
  BL_LAUNCH_NAMED(stage, kernel, static_cast<unsigned>(blocks), kThreads, smem, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

uint64_t regions(const GdnChunkLaunch& a) { return a.streams * a.chunks_per_stream * a.nv; }

}  // namespace

void launch_gdn_chunk_wu(const GdnChunkLaunch& a, cudaStream_t stream) {
  if (regions(a) == 0) return;
  launch("gdn_chunk_wu_kernel", gdn_chunk_wu_kernel, regions(a), kWuSmem, a, stream);
}

void launch_gdn_chunk_state(const GdnChunkLaunch& a, cudaStream_t stream) {
  if (regions(a) == 0) return;
  launch("gdn_chunk_state_kernel", gdn_chunk_state_kernel, a.streams * a.nv * (kD / kSlice),
         kStateSmem, a, stream);
}

void launch_gdn_chunk_output(const GdnChunkLaunch& a, cudaStream_t stream) {
  if (regions(a) == 0) return;
  launch("gdn_chunk_output_kernel", gdn_chunk_output_kernel, regions(a), kOutputSmem, a, stream);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
