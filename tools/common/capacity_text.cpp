// capacity_share and capacity_finding: the capacity line and finding of `plan` and `verify`.
#include "common/capacity_text.h"

#include <fmt/format.h>

#include "common/human_bytes.h"

namespace bufferlab::cli {
namespace {

constexpr uint64_t kGB = 1'000'000'000;

std::string decimal_gb(uint64_t bytes) {
  if (bytes % kGB == 0) return fmt::format("{} GB", bytes / kGB);
  return fmt::format("{:.1f} GB", static_cast<double>(bytes) / static_cast<double>(kGB));
}

// "2.3 % of", with two significant digits below 1 % (a small model's arena is a few
// thousandths of a percent, never "0.0 %"); from 10 times the memory on, a multiple:
// "1,686,869 × h200's 141 GB".
std::string share_text(double percent) {
  if (percent < 1.0) return fmt::format("{:.2g} % of", percent);
  if (percent < 1000.0) return fmt::format("{:.1f} % of", percent);
  return group_digits(static_cast<uint64_t>(percent / 100.0 + 0.5)) + " ×";
}

}  // namespace

std::string target_memory(const Target& target) {
  return fmt::format("{}'s {}{}", target.name, decimal_gb(target.memory_bytes),
                     target.memory_shared ? " (shared with the CPU)" : "");
}

std::string capacity_share(const Capacity& c, const Target& target) {
  return fmt::format("arena {} = {} {}{}", human_bytes(c.arena_bytes), share_text(c.percent()),
                     target_memory(target), c.fits() ? "" : ", does not fit");
}

std::string capacity_finding(const Capacity& c, const Target& target) {
  return fmt::format(
      "capacity: the arena does not fit the target: it needs {} B ({}) — {} has {} B ({}) of "
      "device memory{}",
      group_digits(c.arena_bytes), human_bytes(c.arena_bytes), target.name,
      group_digits(c.memory_bytes), decimal_gb(c.memory_bytes),
      target.memory_shared ? ", shared with the CPU" : "");
}

nlohmann::json capacity_json(const Capacity& capacity) {
  return {{"arena_bytes", capacity.arena_bytes},
          {"memory_bytes", capacity.memory_bytes},
          {"percent", capacity.percent()},
          {"fits", capacity.fits()}};
}

}  // namespace bufferlab::cli
