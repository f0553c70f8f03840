// Named targets (SMs, split-K policy, device memory) and the split-K rule (docs/spec/buffers.md
// §2).
#include "bufferlab/core/target.h"

#include <algorithm>
#include <charconv>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab {
namespace {

struct NamedTarget {
  const char* name;
  uint64_t sm_count;
  SplitKPolicy policy;
  uint64_t memory_gb;  // decimal GB, as the vendor's data sheet states it
  bool memory_shared;  // unified memory shared with the CPU
};

constexpr uint64_t kGB = 1'000'000'000;

constexpr NamedTarget kTargets[] = {
    {"h200", 132, SplitKPolicy::automatic, 141, false},
    {"h100", 132, SplitKPolicy::automatic, 80, false},
    {"b200", 148, SplitKPolicy::automatic, 180, false},
    {"gb10", 48, SplitKPolicy::legacy, 128, true},
};

}  // namespace

Target Target::named(const std::string& name) {
  for (const auto& t : kTargets) {
    if (name != t.name) continue;
    Target target;
    target.name = t.name;
    target.sm_count = t.sm_count;
    target.splitk_policy = t.policy;
    target.memory_bytes = t.memory_gb * kGB;
    target.memory_shared = t.memory_shared;
    return target;
  }
  std::string known;
  for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown target '" + name + "' (known: " + known + ")");
}

std::vector<std::string> Target::names() {
  std::vector<std::string> out;
  for (const auto& t : kTargets) out.emplace_back(t.name);
  return out;
}

std::string Target::splitk_string() const {
  switch (splitk_policy) {
    case SplitKPolicy::legacy:
      return "legacy";
    case SplitKPolicy::automatic:
      return "auto";
    case SplitKPolicy::pinned:
      return std::to_string(splitk_pinned);
  }
  return "?";
}

void Target::set_splitk(const std::string& policy) {
  if (policy == "legacy") {
    splitk_policy = SplitKPolicy::legacy;
    return;
  }
  if (policy == "auto") {
    splitk_policy = SplitKPolicy::automatic;
    return;
  }
  uint64_t n = 0;
  const auto* end = policy.data() + policy.size();
  auto [ptr, ec] = std::from_chars(policy.data(), end, n);
  if (ec != std::errc() || ptr != end || n == 0)
    throw Error("splitk = '" + policy + "': expected legacy, auto or a split count >= 1");
  splitk_policy = SplitKPolicy::pinned;
  splitk_pinned = n;
}

uint64_t splitk_splits(const Target& target, uint64_t nq, uint64_t R) {
  switch (target.splitk_policy) {
    case SplitKPolicy::legacy: {
      const uint64_t rows = (Size(nq) * R).value();
      if (rows == 0 || rows >= target.sm_count) return 1;
      return target.sm_count / rows;
    }
    case SplitKPolicy::automatic:
      return std::clamp<uint64_t>(cdiv(2 * target.sm_count, std::max<uint64_t>(nq, 1)), 1, 16);
    case SplitKPolicy::pinned:
      return std::clamp<uint64_t>(target.splitk_pinned, 1, 16);
  }
  return 1;
}

uint64_t splitk_slots(const Target& target, uint64_t nq, uint64_t R) {
  if (target.splitk_policy == SplitKPolicy::legacy) return target.sm_count;
  return (Size(R) * nq * splitk_splits(target, nq, R)).value();
}

}  // namespace bufferlab
