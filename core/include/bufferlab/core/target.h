// Target: the GPU the workspace is sized for (docs/spec/buffers.md §2). Explicit by design: the
// library never reads the environment; the CLI maps flags onto a Target.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bufferlab {

enum class SplitKPolicy { legacy, automatic, pinned };

struct Target {
  std::string name = "h200";
  uint64_t sm_count = 132;
  SplitKPolicy splitk_policy = SplitKPolicy::automatic;
  uint64_t splitk_pinned = 0;  // the n of "pinned n"; used only with SplitKPolicy::pinned
  bool q2_dequant = false;     // opt-in Q2 dequant path (q2_dequant_scratch)
  bool q2_mmq = false;         // opt-in Q2 MMQ path (q2_act_q8)
  // Device memory in bytes, decimal as the vendor states it (141 GB = 141·10^9 B): the most
  // an arena can take (capacity.h). A shared-memory target (GB10) shares it with the CPU.
  uint64_t memory_bytes = 141'000'000'000;
  bool memory_shared = false;

  // Named targets: h200 (default; 141 GB), h100 (80 GB), b200 (180 GB), gb10 (128 GB shared
  // with the CPU). Throws Error on an unknown name.
  static Target named(const std::string& name);
  static std::vector<std::string> names();

  // "legacy", "auto" or the pinned count as a decimal string.
  std::string splitk_string() const;
  // Parses "legacy" | "auto" | N (N ≥ 1) onto this target; throws Error otherwise.
  void set_splitk(const std::string& policy);

  friend bool operator==(const Target&, const Target&) = default;
};

// The number of split-K splits: ONE pure function of (target, nq, R), used by the sizing and
// by the decode launch alike — never of the live batch (docs/spec/numerics.md §8).
uint64_t splitk_splits(const Target& target, uint64_t num_attention_heads, uint64_t R);
// Split-K slots the workspace provides room for (docs/spec/buffers.md §2).
uint64_t splitk_slots(const Target& target, uint64_t num_attention_heads, uint64_t R);

}  // namespace bufferlab
