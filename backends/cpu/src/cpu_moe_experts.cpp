// CPU MoE expert path (docs/spec/numerics.md §2, moe.h): the gather of token rows by expert, the
// grouped expert GEMMs (gate / up / down), SwiGLU and the weighted combine with zero-expert
// identity terms. The grouping (THE gather order of moe.h) is recomputed from the ids by the gather
// and by every expert GEMM, in chunks of kChunkSlots slots held in the backend's fixed scratch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "cpu_gemm.h"
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

// Below this many elements the thread start-up costs more than the work.
constexpr uint64_t kParallelMinElements = uint64_t{1} << 15;
// Element-wise ops work on rows in chunks of this many FP32 values on the stack.
constexpr uint64_t kChunk = 512;

// The op's params() (a string) is built only for the message: the check runs on every call.
template <class Op>
void require_grouped_experts(uint64_t experts, const Op& op) {
  if (experts > kMaxGroupedExperts)
    throw Error(op.params() + ": more routed experts than the grouped kernels handle (" +
                std::to_string(kMaxGroupedExperts) + ")");
}

// Groups the slots of a pass by expert, one chunk of kChunkSlots slots at a time, in THE
// gather order: a routed slot s (id < experts) has gathered row offset(id) + #{s' < s, same
// id}. Ids ≥ experts (zero experts; the grouped ops do not know E', so a corrupt id is treated
// alike) are not gathered.
class SlotGrouping {
 public:
  SlotGrouping(const uint32_t* ids, uint64_t slots, uint64_t experts, Scratch& scratch)
      : ids_(ids), slots_(slots), experts_(experts), t_(scratch.slots()) {
    // next_row[e] = offset(e) = #{routed slots with id < e}.
    std::fill(t_.next_row, t_.next_row + experts + 1, 0);
    for (uint64_t s = 0; s < slots; ++s)
      if (ids[s] < experts) ++t_.next_row[ids[s] + 1];
    for (uint64_t e = 0; e < experts; ++e) t_.next_row[e + 1] += t_.next_row[e];
  }

  // Groups the next chunk into order / begin / base; false when every slot is done.
  bool next_chunk() {
    if (first_ >= slots_) return false;
    const uint64_t end = std::min(slots_, first_ + kChunkSlots);
    uint64_t* begin = t_.begin;
    std::fill(begin, begin + experts_ + 1, 0);
    for (uint64_t s = first_; s < end; ++s)
      if (ids_[s] < experts_) ++begin[ids_[s] + 1];
    for (uint64_t e = 0; e < experts_; ++e) begin[e + 1] += begin[e];
    // base doubles as the fill cursor, then is restored from next_row.
    for (uint64_t e = 0; e < experts_; ++e) t_.base[e] = begin[e];
    for (uint64_t s = first_; s < end; ++s)
      if (ids_[s] < experts_) t_.order[t_.base[ids_[s]]++] = static_cast<uint32_t>(s);
    for (uint64_t e = 0; e < experts_; ++e) {
      t_.base[e] = t_.next_row[e];
      t_.next_row[e] += begin[e + 1] - begin[e];
    }
    first_ = end;
    return true;
  }

  const SlotTables& tables() const { return t_; }
  uint64_t routed_in_chunk() const { return t_.begin[experts_]; }

 private:
  const uint32_t* ids_;
  uint64_t slots_, experts_, first_ = 0;
  SlotTables t_;
};

// One chunk's grouped GEMM: flat work items (expert M tile, N tile), dynamic schedule. A row of
// position p (expert e) is the gathered row base[e] + p − begin[e] (gate/up) or the slot's own
// activation slice (down); the output is the slot's slice (gate/up) or row (down) — both the
// slot-th row of a [slots, N] view.
void grouped_gemm_chunk(const MoeExpertGemmOp::Bound& p, const SlotTables& t, uint64_t experts,
                        uint64_t K, uint64_t N, bool input_by_slot, Scratch& scratch) {
  t.tile_begin[0] = 0;
  for (uint64_t e = 0; e < experts; ++e)
    t.tile_begin[e + 1] = t.tile_begin[e] + (t.begin[e + 1] - t.begin[e] + kTileM - 1) / kTileM;
  const uint64_t n_tiles = (N + kTileN - 1) / kTileN;
  const auto items = static_cast<int64_t>(t.tile_begin[experts] * n_tiles);
  if (items == 0) return;
  parallel_items(items, scratch.threads(), [&](int64_t item, int thread) {
    const ThreadTiles tiles = scratch.tiles(thread);
    const uint64_t tile = static_cast<uint64_t>(item) / n_tiles;
    const uint64_t n0 = static_cast<uint64_t>(item) % n_tiles * kTileN;
    const uint64_t e = static_cast<uint64_t>(
        std::upper_bound(t.tile_begin + 1, t.tile_begin + experts + 1, tile) - (t.tile_begin + 1));
    const uint64_t p0 = t.begin[e] + (tile - t.tile_begin[e]) * kTileM;
    const uint64_t m = std::min(kTileM, t.begin[e + 1] - p0), n = std::min(kTileN, N - n0);
    const uint16_t* a[kTileM];
    for (uint64_t i = 0; i < m; ++i) {
      const uint64_t row = input_by_slot ? t.order[p0 + i] : t.base[e] + (p0 + i - t.begin[e]);
      a[i] = p.input + row * K;
    }
    gemm_tile(a, m, p.weight + (e * N + n0) * K, n, K, tiles);
    for (uint64_t i = 0; i < m; ++i) {
      uint16_t* o = p.output + t.order[p0 + i] * N + n0;
      const float* c = tiles.c + i * kTileN;
      for (uint64_t j = 0; j < n; ++j) o[j] = f32_to_bf16_bits(c[j]);
    }
  });
}

// One row's combine over columns [c0, c0 + n): Σ_j w_j · v_j in j order, FP32.
void combine_chunk(const MoeCombineOp::Bound& p, const MoeCombineOp::Shape& d, uint64_t t,
                   uint64_t c0, uint64_t n) {
  float acc[kChunk] = {};
  for (uint64_t j = 0; j < d.top_k; ++j) {
    const uint64_t s = t * d.top_k + j;
    const float w = p.weights[s];
    const uint16_t* v = (p.ids[s] < d.experts ? p.down + s * d.width : p.input + t * d.width) + c0;
    for (uint64_t k = 0; k < n; ++k) acc[k] += w * bf16_bits_to_f32(v[k]);
  }
  // In place (latent MoE): this chunk of the row's input has been read above.
  uint16_t* out = p.output + t * d.width + c0;
  for (uint64_t k = 0; k < n; ++k) out[k] = f32_to_bf16_bits(acc[k]);
}

}  // namespace

void moe_gather(const Workspace& ws, const MoeGatherOp& op, Scratch& scratch) {
  const MoeGatherOp::Bound p = op.bind(ws);
  const auto [rows, top_k, width, experts] = op.shape();
  require_grouped_experts(experts, op);
  SlotGrouping grouping(p.ids, rows * top_k, experts, scratch);
  while (grouping.next_chunk()) {
    const SlotTables& t = grouping.tables();
    const auto routed = static_cast<int64_t>(grouping.routed_in_chunk());
    parallel_for(routed, static_cast<uint64_t>(routed) * width >= kParallelMinElements,
                 [&](int64_t pos) {
                   const uint32_t slot = t.order[pos];
                   const uint32_t e = p.ids[slot];
                   const uint64_t row = t.base[e] + (static_cast<uint64_t>(pos) - t.begin[e]);
                   std::memcpy(p.gathered + row * width, p.input + slot / top_k * width, width * 2);
                 });
  }
}

void moe_expert_gemm(const Workspace& ws, const MoeExpertGemmOp& op, Scratch& scratch) {
  const MoeExpertGemmOp::Bound p = op.bind(ws);
  const auto [rows, top_k, experts, K, N] = op.shape();
  require_grouped_experts(experts, op);
  if (overlaps(p.input, rows * top_k * K * 2, p.output, rows * top_k * N * 2))
    throw Error(op.params() + ": the input overlaps the output");
  // gate/up: slots no routed expert owns get zero slices (ops/moe.h: SwiGLU runs over every
  // slot).
  if (op.proj != ExpertProj::down)
    for (uint64_t slot = 0; slot < rows * top_k; ++slot)
      if (p.ids[slot] >= experts) std::memset(p.output + slot * N, 0, N * sizeof(uint16_t));
  SlotGrouping grouping(p.ids, rows * top_k, experts, scratch);
  const bool input_by_slot = op.proj == ExpertProj::down;
  while (grouping.next_chunk())
    grouped_gemm_chunk(p, grouping.tables(), experts, K, N, input_by_slot, scratch);
}

void swiglu(const Workspace& ws, const SwigluOp& op) {
  const SwigluOp::Bound p = op.bind(ws);
  const uint64_t n = op.shape().rows * op.shape().width;
  const auto limit = static_cast<float>(op.limit);
  const bool clamp = op.limit > 0.0;
  const auto count = static_cast<int64_t>(n);
  parallel_for(count, n >= kParallelMinElements, [&](int64_t i) {
    float g = bf16_bits_to_f32(p.gate[i]), u = bf16_bits_to_f32(p.up[i]);
    if (clamp) {
      g = std::min(g, limit);            // NaN stays NaN: min(NaN, L) returns its first operand
      u = std::clamp(u, -limit, limit);  // likewise
    }
    p.gate[i] = f32_to_bf16_bits(silu(g) * u);
  });
}

void moe_combine(const Workspace& ws, const MoeCombineOp& op) {
  const MoeCombineOp::Bound p = op.bind(ws);
  const MoeCombineOp::Shape d = op.shape();
  // Ids are checked before the parallel loop (an exception may not leave an OpenMP region):
  // a zero expert needs the input row, anything past E' is corrupt.
  const uint64_t slots = d.rows * d.top_k, all = d.experts + d.zero_experts;
  for (uint64_t s = 0; s < slots; ++s) {
    const uint32_t id = p.ids[s];
    if (id < d.experts || (id < all && p.input != nullptr)) continue;
    throw Error(
        op.params() + ": ids[" + std::to_string(s) + "] = " + std::to_string(id) +
        (id < all ? " is a zero expert but the op does not read its input" : " is not an expert"));
  }
  const auto row_count = static_cast<int64_t>(d.rows);
  parallel_for(row_count, d.rows * d.width >= kParallelMinElements, [&](int64_t t) {
    for (uint64_t c0 = 0; c0 < d.width; c0 += kChunk)
      combine_chunk(p, d, static_cast<uint64_t>(t), c0, std::min(kChunk, d.width - c0));
  });
}

}  // namespace bufferlab::cpu
