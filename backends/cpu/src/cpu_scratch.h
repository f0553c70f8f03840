// The CPU backend's fixed working memory: GEMM tile panels per OpenMP thread and the tables
// that group MoE slots by expert, allocated once when the backend is constructed so that
// execute() allocates nothing (docs/architecture.md "Design rules"). One op runs at a time per
// backend: the scratch is shared by every op of a CpuBackend, which is therefore not re-entrant.
//
// Block set (what a backend of T = omp_get_max_threads() threads holds):
//   per thread: A panel kTileM×kTileK, B panel kTileN×kTileK and C tile kTileM×kTileN, FP32
//               = (64·128 + 128·128 + 64·128)·4 B = 128 KiB;
//   shared:     slot order u32[kChunkSlots] (256 KiB) and four u64 tables of
//               kMaxGroupedExperts + 1 entries (~40 KiB).
// The panels are small enough that Eigen's GEMM keeps its own packing blocks (≤ kTileM·kTileK
// and kTileK·kTileN floats, 32 and 64 KiB) on the stack: both lie under
// EIGEN_STACK_ALLOCATION_LIMIT (128 KiB), so no GEMM allocates either.
#pragma once

#include <cstdint>
#include <vector>

namespace bufferlab::cpu {

// GEMM tile: rows × columns of one output tile, and the depth of one A/B panel pair.
inline constexpr uint64_t kTileM = 64;
inline constexpr uint64_t kTileN = 128;
inline constexpr uint64_t kTileK = 128;

// Slots (token, selected expert) grouped per pass of the MoE grouping; a pass with more slots
// is grouped in chunks of this many, each chunk keeping THE gather order (moe.h).
inline constexpr uint64_t kChunkSlots = uint64_t{1} << 16;
// Routed experts the grouped MoE kernels handle (the top-k limit, kMaxScoredExperts).
inline constexpr uint64_t kMaxGroupedExperts = 1024;

// One thread's panels: a [kTileM][kTileK], b [kTileN][kTileK], c [kTileM][kTileN] (row-major,
// FP32).
struct ThreadTiles {
  float* a = nullptr;
  float* b = nullptr;
  float* c = nullptr;
};

// The tables of one chunk of slots grouped by expert (filled by the MoE kernels):
//   order[p]        the chunk's routed slots sorted by (expert, slot);
//   begin[e]        first position of expert e in order (begin[E] = routed slots in chunk);
//   base[e]         gathered row of expert e's first slot in this chunk;
//   next_row[e]     gathered row of expert e's next slot (carried across chunks);
//   tile_begin[e]   first M tile of expert e in the chunk's flat tile list.
struct SlotTables {
  uint32_t* order = nullptr;
  uint64_t* begin = nullptr;
  uint64_t* base = nullptr;
  uint64_t* next_row = nullptr;
  uint64_t* tile_begin = nullptr;
};

class Scratch {
 public:
  Scratch();  // sizes the per-thread panels for omp_get_max_threads() threads

  // The OpenMP team size the kernels use; every thread number below it owns panels.
  int threads() const { return threads_; }
  ThreadTiles tiles(int thread);
  SlotTables slots();

 private:
  int threads_ = 1;
  std::vector<float> panels_;  // threads_ × kPanelFloats
  std::vector<uint32_t> order_;
  std::vector<uint64_t> tables_;  // four tables of kMaxGroupedExperts + 1
};

}  // namespace bufferlab::cpu
