// High-water marks (the slack report, docs/spec/buffers.md §7): for every buffer, the highest
// end offset any access of the plans a verification walks reaches, and the access that
// reaches it. `verify` prints them next to the bytes allocated; `plan --sizing tight` sizes
// every buffer at its mark (tight_sizes).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/plan/pass_plan.h"

namespace bufferlab::verify {

// Where a buffer's high-water mark is reached: the first plan (in walk order) and step whose
// access ends there. A co-dispatch pass also needs its q12_bytes of scratch to be eligible
// (docs/spec/buffers.md §4.4): that requirement counts as a reach of scratch with by_eligibility
// set.
struct HighWater {
  uint64_t end = 0;      // highest end offset reached; 0 when never touched
  bool touched = false;  // some access (of at least one byte) or eligibility reached it
  std::string pass;      // Pass::to_string()
  std::string paths;     // Paths::to_string()
  uint64_t step = 0;     // index in the plan (meaningless when by_eligibility)
  std::string op;        // op name
  std::string where;     // layer label
  bool by_eligibility = false;
};

class HighWaterMarks {
 public:
  // Raises each buffer's mark by the arena accesses of `plan` (zero-byte accesses touch
  // nothing; refused and ineligible plans have no accesses). Checked: an end offset past
  // 64 bits throws Error, as the verifier's own bounds check does.
  void record(const plan::PassPlan& plan);

  const HighWater& of(BufferId id) const { return marks_[static_cast<size_t>(id)]; }
  uint64_t plans() const { return plans_; }  // plans recorded

 private:
  std::array<HighWater, kNumBuffers> marks_{};
  uint64_t plans_ = 0;
};

// Walks `passes` × `paths` (empty: every combination of plan::all_paths) like verify_config
// — one plan per distinct decode rung — recording marks without checking. Plans read sizes
// only for the sub-layout parameters, the null buffers that select a fallback and co-dispatch
// eligibility, so marks under sizes that share those are identical.
HighWaterMarks high_water_marks(const ModelConfig& config, const BufferSizes& sizes,
                                const Target& target, const RunShape& shape,
                                const std::vector<plan::Pass>& passes,
                                const std::vector<plan::Paths>& paths = {});

// The smallest byte count a buffer may have and stay clean over the walked grid: its mark,
// never below kTightFloor for a non-null buffer (an untouched non-null buffer keeps
// kTightFloor: nulling it would select another path), 0 for a null one.
inline constexpr uint64_t kTightFloor = 256;
uint64_t tight_bytes(uint64_t allocated, const HighWater& mark);

// `sizes` (sub-layout parameters, sizing label and null buffers kept) with every buffer at
// tight_bytes. Over the grid the marks came from, the plans are the same as under `sizes`
// and every access ends inside its buffer: no bounds or eligibility finding, by construction.
BufferSizes tight_sizes(const BufferSizes& sizes, const HighWaterMarks& marks);

// The `tight` sizing of `plan --sizing tight`: `corrected` (its sub-layout parameters and
// null buffers) with every buffer at tight_bytes of its mark over pass_grid(shape) × every
// path combination — the grid `verify` walks. `plans` receives how many plans that was.
BufferSizes tight_sizing(const ModelConfig& config, const RunShape& shape, const Target& target,
                         uint64_t* plans = nullptr);

// One row of the slack table.
struct BufferSlack {
  BufferId id{};
  uint64_t allocated = 0;  // bytes the sizing under test gives it
  HighWater mark;
  // allocated − mark.end, negative when an access runs past the end (a bounds finding).
  int64_t wasted() const {
    return static_cast<int64_t>(allocated) - static_cast<int64_t>(mark.end);
  }
};

struct SlackReport {
  std::vector<BufferSlack> buffers;  // every registry buffer, most wasted bytes first
  uint64_t allocated_arena = 0;      // Layout::build(sizes).arena_bytes()
  uint64_t needed_arena = 0;         // Layout::build(tight_sizes(...)).arena_bytes()
  uint64_t allocated_bytes = 0;      // Σ bytes allocated
  uint64_t touched_bytes = 0;        // Σ high-water marks
  uint64_t plans = 0;                // plans the marks came from
};

// Sorted by wasted bytes, descending (ties in registry order). Both arenas are laid out by
// Layout::build with its default alignment (256 B) and no redzone.
SlackReport slack_report(const BufferSizes& sizes, const HighWaterMarks& marks);

}  // namespace bufferlab::verify
