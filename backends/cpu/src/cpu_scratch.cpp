// The CPU backend's fixed working memory (cpu_scratch.h), allocated once at construction.
#include "cpu_scratch.h"

#include <omp.h>

#include <algorithm>

namespace bufferlab::cpu {
namespace {

constexpr uint64_t kAFloats = kTileM * kTileK;
constexpr uint64_t kBFloats = kTileN * kTileK;
constexpr uint64_t kCFloats = kTileM * kTileN;
constexpr uint64_t kPanelFloats = kAFloats + kBFloats + kCFloats;
constexpr uint64_t kTableEntries = kMaxGroupedExperts + 1;

}  // namespace

Scratch::Scratch()
    : threads_(std::max(1, omp_get_max_threads())),
      panels_(static_cast<uint64_t>(threads_) * kPanelFloats),
      order_(kChunkSlots),
      tables_(4 * kTableEntries) {}

ThreadTiles Scratch::tiles(int thread) {
  float* p = panels_.data() + static_cast<uint64_t>(thread) * kPanelFloats;
  return {p, p + kAFloats, p + kAFloats + kBFloats};
}

SlotTables Scratch::slots() {
  uint64_t* t = tables_.data();
  return {order_.data(), t, t + kTableEntries, t + 2 * kTableEntries, t + 3 * kTableEntries};
}

}  // namespace bufferlab::cpu
