// Finding records, their deduplication and the report text.
#include "findings.h"

#include <array>
#include <mutex>
#include <set>
#include <tuple>

namespace bufferlab::sim {
namespace {

struct Store {
  std::mutex mutex;
  std::vector<Finding> findings;
  std::set<std::tuple<int, std::string, std::string>> seen;
  std::array<int, 16> per_check{};
};

Store& store() {
  static Store s;
  return s;
}

std::string report(const std::vector<Finding>& findings) {
  std::string text = "cuda-sim: " + std::to_string(findings.size()) + " finding" +
                     (findings.size() == 1 ? "" : "s") + "\n";
  for (const Finding& f : findings) text += "  " + f.to_string() + "\n";
  return text;
}

}  // namespace

const char* to_string(Check c) {
  switch (c) {
    case Check::footprint_read:
      return "footprint-read";
    case Check::footprint_write:
      return "footprint-write";
    case Check::out_of_bounds:
      return "out-of-bounds";
    case Check::uninitialized_read:
      return "uninitialized-read";
    case Check::block_write_race:
      return "block-write-race";
    case Check::thread_write_race:
      return "thread-write-race";
    case Check::shared_race:
      return "shared-race";
    case Check::shared_uninit:
      return "shared-uninitialized-read";
    case Check::barrier_divergence:
      return "barrier-divergence";
    case Check::collective_mask:
      return "collective-mask";
    case Check::collective_missing:
      return "collective-missing-lane";
    case Check::nondeterminism:
      return "nondeterminism";
    case Check::launch_config:
      return "launch-config";
    case Check::library_call:
      return "library-call";
  }
  return "?";
}

std::string Finding::to_string() const {
  std::string s = std::string("[") + sim::to_string(check) + "] " + kernel;
  if (!where.empty()) s += " " + where;
  if (!address.empty()) s += " at " + address;
  if (!detail.empty()) s += ": " + detail;
  if (!op.empty()) s += " (op " + op + ")";
  s += " (sim seed " + std::to_string(seed) + ")";
  return s;
}

KernelFindings::KernelFindings(std::vector<Finding> findings)
    : KernelCheckFailure(report(findings)), findings_(std::move(findings)) {}

void record(Finding f) {
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  // One finding per checker, kernel and detail: the same bug seen by every thread of a
  // launch is one report, its first occurrence.
  if (!s.seen.emplace(static_cast<int>(f.check), f.kernel, f.detail).second) return;
  int& count = s.per_check[static_cast<size_t>(f.check)];
  if (count >= kMaxPerCheck) return;
  ++count;
  s.findings.push_back(std::move(f));
}

std::vector<Finding> take_findings() {
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<Finding> out;
  out.swap(s.findings);
  s.seen.clear();
  s.per_check.fill(0);
  return out;
}

}  // namespace bufferlab::sim
