// CUDA attention cores (docs/spec/attention.md §4, docs/spec/numerics.md §8, ops/attention.h):
// varlen causal prefill over the staged Q copy and K / V scratch with the stream's prefix from
// the paged cache, and decode / verify over the cache (one split, or split-K partials).
//
// One block of kAttnKeyTile = 64 threads per (query row, head[, split]); the query sits in
// shared memory as FP32. Keys go in tiles of 64 ABSOLUTE positions [64·u, 64·u + 64), tiles
// ascending, each clipped to the row's visible range (and to the split's part):
//   1. thread j takes key 64·u + j: when visible (inside the range, its block-table entry and
//      slot inside the cache) it forms score = dot(q, k) · scale, the dot one fmaf chain over d
//      ascending, and publishes the key's V row; an invisible key publishes nothing, so its
//      score is never computed and its V row never read (masking by selection);
//   2. every thread takes the tile maximum over the published keys (the same shared values
//      in the same order, so the same bits in every thread); thread j forms its key's
//      e = expf(score − m');
//   3. every thread rescales l and its accumulators by α = expf(m − m') (0 for the first
//      non-empty tile) and adds the keys ascending: l += e (each thread the same sequence),
//      acc_d = fmaf(e, v_j[d], acc_d) for its dimensions d = tid + 64·c.
// A tile with no visible key changes nothing. The reduction order of a row is fixed by its
// position and visible range alone: no other row, block or launch shape enters its bits.
// acc_d += e·v_j[d] is one fmaf (one rounding where the pinned text writes two; the bound of
// docs/spec/attention.md §5 holds for either, as for the dot).
//
// Decode runs two kernels: attn_decode_query_kernel stages each live row's query with the
// stage function into the row's own output (one split) or split slots (split-K), then
// attn_decode_kernel reads it back into shared memory and overwrites it with the result (see
// attn_decode_query_kernel for why the staging is not inside the core kernel).
//
// The attention kernel mutants of the cores (docs/spec/bug-catalogue.md) are a template
// parameter of the kernels (CoreMutant), so the real instantiation's code and registers are
// what they were.
#include <algorithm>
#include <cstdint>

#include "attention_kernels.h"
#include "cuda_check.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

using namespace attn_device;

constexpr int kTile = static_cast<int>(kAttnKeyTile);  // threads per block
constexpr int kMaxHd = static_cast<int>(kMaxAttnHeadDim);
constexpr int kPer = kMaxHd / kTile;  // accumulators per thread
constexpr uint64_t kMaxBlocks = 65535 * 16;
static_assert(kMaxHd % kTile == 0, "the accumulators split hd evenly over the threads");

unsigned blocks_for(uint64_t items) {
  return static_cast<unsigned>(std::max<uint64_t>(1, std::min(kMaxBlocks, items)));
}

__device__ float neg_inf() { return __uint_as_float(0xff800000u); }

// The cores' kernel mutants: kCausal M-CAUSAL (the row also sees key p + 1: prefill when its
// stream holds it, decode when the block table maps it), kGqa M-GQA (KV head q % nkv), kBlock
// M-BLOCK (the logical block index used as the physical one), kSink M-SINK (the sink term
// added to every accumulator as well as to l; one split).
enum CoreMutant : int { kReal, kCausal, kGqa, kBlock, kSink };

// Where the keys of one (row, KV head) live: positions below `ctx` in the paged cache
// (block-table row `table`), positions from `ctx` on in the scratch rows from `k_scr` / `v_scr`
// (the row of position ctx, the head's column applied), `kv_width` elements apart.
struct KeyLookup {
  AttnCacheView cache;
  const int32_t* table = nullptr;
  int64_t ctx = 0;
  const uint16_t* k_scr = nullptr;
  const uint16_t* v_scr = nullptr;
  uint64_t kv_width = 0, head_col = 0;
};

// The K and V rows of key j; false (nothing dereferenced but the block-table entry) when the
// key is not in the cache. Logical: kernel mutant M-BLOCK (the logical block as the physical
// one, still never past the cache).
template <bool Logical>
__device__ __forceinline__ bool key_rows(const KeyLookup& s, int64_t j, const uint16_t*& k,
                                         const uint16_t*& v) {
  if (j >= s.ctx) {
    const uint64_t off = static_cast<uint64_t>(j - s.ctx) * s.kv_width;
    k = s.k_scr + off;
    v = s.v_scr + off;
    return true;
  }
  const uint64_t bs = s.cache.block_size, logical = static_cast<uint64_t>(j) / bs;
  if (logical >= s.cache.max_blocks) return false;
  const int32_t physical = s.table[logical];
  if (physical < 0 || static_cast<uint64_t>(physical) >= s.cache.num_blocks) return false;
  const uint64_t block = Logical ? logical : static_cast<uint64_t>(physical);
  if (Logical && block >= s.cache.num_blocks) return false;
  const uint64_t slot = block * bs + static_cast<uint64_t>(j) % bs;
  const uint64_t off = slot * s.kv_width + s.head_col;
  k = s.cache.k + off;
  v = s.cache.v + off;
  return true;
}

// dot(q, k) over d ascending, one fmaf chain from 0. A 16-byte-aligned row is read 8 BF16
// values per load (the same fmaf sequence: the same bits as the scalar loop).
__device__ __forceinline__ float key_dot(const float* q, const uint16_t* k, uint64_t hd) {
  float dot = 0.0f;
  uint64_t d = 0;
  if ((reinterpret_cast<uintptr_t>(k) & 15) == 0) {
    for (; d + 8 <= hd; d += 8) {
      const uint4 w = *reinterpret_cast<const uint4*>(k + d);
      const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // little-endian: element d + 2i in the low half
        dot = fmaf(q[d + 2 * i], __uint_as_float(words[i] << 16), dot);
        dot = fmaf(q[d + 2 * i + 1], __uint_as_float(words[i] & 0xFFFF0000u), dot);
      }
    }
  }
  for (; d < hd; ++d) dot = fmaf(q[d], bf(k[d]), dot);
  return dot;
}

// The online-softmax state of one (row, head) in a thread: its accumulators are dimensions
// tid + 64·c.
struct Online {
  float m, l;
  bool empty;  // no visible key reduced yet
  float acc[kPer];
};

__device__ __forceinline__ void online_init(Online& st) {
  st.m = neg_inf();
  st.l = 0.0f;
  st.empty = true;
#pragma unroll
  for (int c = 0; c < kPer; ++c) st.acc[c] = 0.0f;
}

// The block's shared staging of one tile.
struct TileShared {
  float* score;
  float* e;
  const uint16_t** vrow;  // null: key not visible
};

// Reduces keys [lo, hi] (0 ≤ lo ≤ hi) into `st` tile by tile; every thread of the block calls
// it with the same range (three barriers per tile). Logical: M-BLOCK (key_rows).
template <bool Logical>
__device__ __forceinline__ void reduce_keys(const float* q, const KeyLookup& look, int64_t lo,
                                            int64_t hi, uint64_t hd, float scale,
                                            const TileShared& sh, Online& st) {
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t u = lo / kTile; u <= hi / kTile; ++u) {
    const int64_t j = u * kTile + tid;
    const uint16_t* vrow = nullptr;
    if (j >= lo && j <= hi) {
      const uint16_t* krow = nullptr;
      if (key_rows<Logical>(look, j, krow, vrow)) {
        sh.score[tid] = __fmul_rn(key_dot(q, krow, hd), scale);
      } else {
        vrow = nullptr;
      }
    }
    sh.vrow[tid] = vrow;
    __syncthreads();
    bool any = false;
    float tile_max = 0.0f;
    for (int t = 0; t < kTile; ++t) {
      if (sh.vrow[t] == nullptr) continue;
      const float s = sh.score[t];
      if (!any || tile_max < s) tile_max = s;  // std::max order: the first of equals stays
      any = true;
    }
    float m_new = 0.0f, alpha = 0.0f;
    if (any) {
      m_new = st.empty || st.m < tile_max ? tile_max : st.m;
      alpha = st.empty ? 0.0f : expf(__fsub_rn(st.m, m_new));
      if (vrow != nullptr) sh.e[tid] = expf(__fsub_rn(sh.score[tid], m_new));
    }
    __syncthreads();
    if (any) {
      st.l = __fmul_rn(st.l, alpha);
#pragma unroll
      for (int c = 0; c < kPer; ++c) st.acc[c] = __fmul_rn(st.acc[c], alpha);
      for (int t = 0; t < kTile; ++t) {
        const uint16_t* v = sh.vrow[t];
        if (v == nullptr) continue;
        const float e = sh.e[t];
        st.l = __fadd_rn(st.l, e);
#pragma unroll
        for (int c = 0; c < kPer; ++c) {
          const uint64_t d = static_cast<uint64_t>(tid) + uint64_t{kTile} * c;
          if (d < hd) st.acc[c] = fmaf(e, bf(v[d]), st.acc[c]);
        }
      }
      st.m = m_new;
      st.empty = false;
    }
    __syncthreads();  // the next tile overwrites score / vrow
  }
}

// The sink joins at the end: m'' = max(m, sink), α = expf(m − m''), l = l·α + expf(sink − m'').
// InNumerator: kernel mutant M-SINK (the sink term added to every accumulator too).
template <bool InNumerator>
__device__ __forceinline__ void add_sink(Online& st, float sink) {
  const float m2 = st.empty || st.m < sink ? sink : st.m;
  const float alpha = st.empty ? 0.0f : expf(__fsub_rn(st.m, m2));
  const float e = expf(__fsub_rn(sink, m2));
  st.l = __fadd_rn(__fmul_rn(st.l, alpha), e);
#pragma unroll
  for (int c = 0; c < kPer; ++c) {
    st.acc[c] = __fmul_rn(st.acc[c], alpha);
    if constexpr (InNumerator) st.acc[c] = __fadd_rn(st.acc[c], e);
  }
  st.m = m2;
}

// o_d = bf16(acc_d / l) for this thread's dimensions.
__device__ __forceinline__ void store_output(const Online& st, uint16_t* out, uint64_t hd) {
  const uint64_t tid = threadIdx.x;
#pragma unroll
  for (int c = 0; c < kPer; ++c) {
    const uint64_t d = tid + uint64_t{kTile} * c;
    if (d < hd) out[d] = f32_to_bf16_bits(st.acc[c] / st.l);
  }
}

template <int M>
__global__ void __launch_bounds__(kTile) attn_prefill_kernel(AttnPrefillLaunch a) {
  BL_SHARED(float[kMaxHd], q_sh);
  BL_SHARED(float[kTile], score_sh);
  BL_SHARED(float[kTile], e_sh);
  BL_SHARED(const uint16_t* [kTile], vrow_sh);
  const TileShared sh{score_sh, e_sh, vrow_sh};
  const int tid = static_cast<int>(threadIdx.x);
  const uint64_t hd = a.hd, qw = a.nq * hd, kvw = a.nkv * hd, group = a.nq / a.nkv;
  for (uint64_t item = blockIdx.x; item < a.rows * a.nq; item += gridDim.x) {
    const uint64_t row = item / a.nq, head = item % a.nq;
    const uint64_t kvh = M == kGqa ? head % a.nkv : head / group;
    const uint64_t stream = row / a.L, i = row % a.L;
    const int64_t ctx = a.ctx_lens[stream], p = ctx + static_cast<int64_t>(i);
    const int64_t W = static_cast<int64_t>(a.window);
    const int64_t lo = W > 0 ? std::max<int64_t>(0, p - W + 1) : 0;
    const uint16_t* q = a.q + row * qw + head * hd;
    for (uint64_t d = tid; d < hd; d += kTile) q_sh[d] = bf(q[d]);
    __syncthreads();
    KeyLookup look;
    look.cache = a.cache;
    look.table = a.cache.block_table + stream * a.cache.max_blocks;
    look.ctx = ctx;
    look.k_scr = a.k + stream * a.L * kvw + kvh * hd;
    look.v_scr = a.v + stream * a.L * kvw + kvh * hd;
    look.kv_width = kvw;
    look.head_col = kvh * hd;
    Online st;
    online_init(st);
    const int64_t hi = M == kCausal && i + 1 < a.L ? p + 1 : p;  // M-CAUSAL: within the stream
    if (p >= lo) reduce_keys<M == kBlock>(q_sh, look, lo, hi, hd, a.scale, sh, st);
    if (a.sinks != nullptr) add_sink<M == kSink>(st, a.sinks[head]);
    store_output(st, a.out + row * qw + head * hd, hd);
    __syncthreads();  // the next item overwrites q_sh
  }
}

// The decode query's destination for the stage function: one split, the BF16 bits in the
// row's output; split-K, their FP32 value in the o part of every split's slot, so each split
// block finds the query in its own slot. (One type and one stage_head call: two inlined copies
// of sincosf put its reduction array back in local memory.)
struct StageToQuery {
  uint16_t* row;  // one split
  float* slot0;   // split-K
  uint64_t stride, splits;
  __device__ void put(uint32_t d, uint16_t bits) const {
    if (slot0 == nullptr) {
      row[d] = bits;
      return;
    }
    for (uint64_t k = 0; k < splits; ++k) slot0[k * stride + d] = bf(bits);
  }
};

// The decode query of every live (row, head), one warp each: S(qkv row's Q head, positions of
// the row) into the row's output (one split: BF16) or its split slots (FP32), where the core
// kernel reads it back and then overwrites it. A kernel of its own: inside the core kernel,
// ptxas keeps sincosf's argument-reduction array in local memory (32 bytes of stack, which the
// build refuses); in a kernel this small it stays in registers.
// SwapHW: kernel mutant M-MROPE (attn_device::stage_head).
template <bool SwapHW>
__global__ void __launch_bounds__(kTile) attn_decode_query_kernel(AttnDecodeLaunch a) {
  constexpr uint64_t kWarps = kTile / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const uint64_t hd = a.hd, qw = a.nq * hd, S = a.splits, n = a.live * a.nq;
  const uint64_t warp0 = blockIdx.x * kWarps + threadIdx.x / kWarpSize;
  for (uint64_t item = warp0; item < n; item += uint64_t{gridDim.x} * kWarps) {
    const uint64_t row = item / a.nq, head = item % a.nq;
    const uint16_t* x = a.qkv + row * a.qkv_dim + head * hd;
    const StageToQuery dst{S > 1 ? nullptr : a.out + row * qw + head * hd,
                           S > 1 ? a.partials + item * S * (hd + 2) : nullptr, hd + 2, S};
    stage_head<SwapHW>(x, row, a.stage, lane, dst);
  }
}

template <int M>
__global__ void __launch_bounds__(kTile) attn_decode_kernel(AttnDecodeLaunch a) {
  BL_SHARED(float[kMaxHd], q_sh);
  BL_SHARED(float[kTile], score_sh);
  BL_SHARED(float[kTile], e_sh);
  BL_SHARED(const uint16_t* [kTile], vrow_sh);
  const TileShared sh{score_sh, e_sh, vrow_sh};
  const int tid = static_cast<int>(threadIdx.x);
  const uint64_t hd = a.hd, qw = a.nq * hd, kvw = a.nkv * hd, group = a.nq / a.nkv;
  const uint64_t S = a.splits, hd2 = hd + 2;
  for (uint64_t item = blockIdx.x; item < a.rows * a.nq * S; item += gridDim.x) {
    const uint64_t row = item / (a.nq * S), head = (item / S) % a.nq, split = item % S;
    const uint64_t kvh = M == kGqa ? head % a.nkv : head / group;
    float* part = S > 1 ? a.partials + ((row * a.nq + head) * S + split) * hd2 : nullptr;
    if (row >= a.live) {  // padding: reads nothing, writes zeros (m = −inf, l = 0)
      if (part != nullptr) {
        for (uint64_t d = tid; d < hd; d += kTile) part[d] = 0.0f;
        if (tid == 0) {
          part[hd] = neg_inf();
          part[hd + 1] = 0.0f;
        }
      } else {
        for (uint64_t d = tid; d < hd; d += kTile) a.out[row * qw + head * hd + d] = 0;
      }
      continue;
    }
    // The staged query, left in this block's own output by attn_decode_query_kernel.
    if (part != nullptr) {
      for (uint64_t d = tid; d < hd; d += kTile) q_sh[d] = part[d];
    } else {
      for (uint64_t d = tid; d < hd; d += kTile) q_sh[d] = bf(a.out[row * qw + head * hd + d]);
    }
    __syncthreads();
    const int64_t p = static_cast<int64_t>(a.seq_lens[row]) - 1;
    const int64_t W = static_cast<int64_t>(a.window);
    const int64_t lo = W > 0 ? std::max<int64_t>(0, p - W + 1) : 0;
    KeyLookup look;
    look.cache = a.cache;
    look.table = a.cache.block_table + row * a.cache.max_blocks;
    look.ctx = M == kCausal ? p + 2 : p + 1;  // every key from the cache
    look.kv_width = kvw;
    look.head_col = kvh * hd;
    int64_t hi = p;
    if constexpr (M == kCausal) {  // M-CAUSAL: key p + 1 too, when the block table maps it
      const uint16_t* kr = nullptr;
      const uint16_t* vr = nullptr;
      if (p >= 0 && key_rows<false>(look, p + 1, kr, vr)) hi = p + 1;
    }
    Online st;
    online_init(st);
    if (p >= lo) {
      // Blocks b0..b1 cut into S contiguous parts of cdiv(b1 − b0 + 1, S) blocks.
      const int64_t bs = static_cast<int64_t>(a.cache.block_size);
      const int64_t b0 = lo / bs, b1 = hi / bs, nS = static_cast<int64_t>(S);
      const int64_t per = (b1 - b0 + 1 + nS - 1) / nS, k = static_cast<int64_t>(split);
      const int64_t first = b0 + k * per, end = std::min(b0 + (k + 1) * per, b1 + 1);
      if (first < end) {
        const int64_t klo = std::max(lo, first * bs), khi = std::min(hi, end * bs - 1);
        reduce_keys<M == kBlock>(q_sh, look, klo, khi, hd, a.scale, sh, st);
      }
    }
    if (part == nullptr) {
      if (a.sinks != nullptr) add_sink<M == kSink>(st, a.sinks[head]);
      store_output(st, a.out + row * qw + head * hd, hd);
    } else {
#pragma unroll
      for (int c = 0; c < kPer; ++c) {
        const uint64_t d = static_cast<uint64_t>(tid) + uint64_t{kTile} * c;
        if (d < hd) part[d] = st.empty ? 0.0f : st.acc[c] / st.l;
      }
      if (tid == 0) {
        part[hd] = st.empty ? neg_inf() : st.m;
        part[hd + 1] = st.empty ? 0.0f : st.l;
      }
    }
    __syncthreads();  // the next item overwrites q_sh
  }
}

}  // namespace

void launch_attn_prefill(const AttnPrefillLaunch& a, cudaStream_t stream, Mutant mutant) {
  const uint64_t items = a.rows * a.nq;
  if (items == 0 || a.hd == 0 || a.L == 0) return;
  const auto kernel = mutant == Mutant::M_CAUSAL  ? attn_prefill_kernel<kCausal>
                      : mutant == Mutant::M_GQA   ? attn_prefill_kernel<kGqa>
                      : mutant == Mutant::M_BLOCK ? attn_prefill_kernel<kBlock>
                      : mutant == Mutant::M_SINK  ? attn_prefill_kernel<kSink>
                                                  : attn_prefill_kernel<kReal>;
  BL_LAUNCH_NAMED("attn_prefill_kernel", kernel, blocks_for(items), kTile, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_attn_decode(const AttnDecodeLaunch& a, cudaStream_t stream, Mutant mutant) {
  const uint64_t items = a.rows * a.nq * a.splits;
  if (items == 0 || a.hd == 0) return;
  const uint64_t queries = a.live * a.nq, per_block = kTile / kWarpSize;
  if (queries > 0) {
    const auto query = mutant == Mutant::M_MROPE ? attn_decode_query_kernel<true>
                                                 : attn_decode_query_kernel<false>;
    BL_LAUNCH_NAMED("attn_decode_query_kernel", query,
                    blocks_for((queries + per_block - 1) / per_block), kTile, 0, stream, a);
    BUFFERLAB_CUDA_CHECK(cudaGetLastError());
  }
  const auto kernel = mutant == Mutant::M_CAUSAL  ? attn_decode_kernel<kCausal>
                      : mutant == Mutant::M_GQA   ? attn_decode_kernel<kGqa>
                      : mutant == Mutant::M_BLOCK ? attn_decode_kernel<kBlock>
                      : mutant == Mutant::M_SINK  ? attn_decode_kernel<kSink>
                                                  : attn_decode_kernel<kReal>;
  BL_LAUNCH_NAMED("attn_decode_kernel", kernel, blocks_for(items), kTile, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
