// The static verifier: bounds, overlap inside a step, liveness, races, read before write and
// phantom reads of one PassPlan against one Layout (docs/spec/buffers.md §2–§5).
#include "bufferlab/core/verify/check.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "bufferlab/core/checked.h"

namespace bufferlab::verify {
namespace {

using plan::PassPlan;
using plan::Step;

// What last wrote a byte range of one buffer.
struct Segment {
  uint64_t end = 0;
  uint32_t step = 0;
  const std::string* value = nullptr;  // points into the plan
  bool phantom = false;
};
using SegmentMap = std::map<uint64_t, Segment>;  // begin → segment, non-overlapping

class Checker {
 public:
  Checker(const PassPlan& plan, const Layout& layout) : plan_(plan), layout_(layout) {
    for (const auto& e : layout.entries()) bytes_[static_cast<size_t>(e.id)] = e.bytes;
  }

  std::vector<Finding> run() {
    if (plan_.refused) return {};
    if (plan_.ineligible) {
      Finding f = base(CheckKind::ineligible, 0, nullptr);
      f.buffer = "scratch";
      f.begin = 0;
      f.end = plan_.eligibility_bytes;
      f.buffer_bytes = bytes_[static_cast<size_t>(BufferId::scratch)];
      f.detail = "legal pass refused: " + *plan_.ineligible;
      findings_.push_back(f);
      return findings_;
    }
    for (uint32_t i = 0; i < plan_.steps.size(); ++i) {
      check_bounds(i);
      check_overlap(i);
      track_values(i);
    }
    check_races();
    return findings_;
  }

 private:
  const PassPlan& plan_;
  const Layout& layout_;
  uint64_t bytes_[kNumBuffers] = {};
  SegmentMap written_[kNumBuffers];
  std::unordered_map<std::string, uint32_t> last_write_of_;  // value → step
  std::vector<Finding> findings_;
  std::set<std::tuple<CheckKind, uint32_t, BufferId>> reported_;

  static bool in_arena(const Access& a) { return a.tensor.space == Space::arena; }

  static uint64_t end_of(const Access& a) {
    return (Size(a.tensor.offset) + a.tensor.bytes()).value();
  }

  // The bytes [lo, hi) that a and b both touch; none when lo >= hi.
  static std::pair<uint64_t, uint64_t> shared_bytes(const Access& a, const Access& b) {
    return {std::max(a.tensor.offset, b.tensor.offset), std::min(end_of(a), end_of(b))};
  }

  Finding base(CheckKind k, uint32_t step, const Access* a) const {
    Finding f;
    f.check = k;
    f.pass = plan_.pass.to_string();
    f.paths = plan_.paths.to_string();
    f.sizing = plan_.sizing;
    const RunShape& r = plan_.shape;
    f.shape = "m=" + std::to_string(r.max_batch_tokens) + ",seq=" + std::to_string(r.max_seq_len) +
              ",block=" + std::to_string(r.kv_block_size) +
              ",bs=" + std::to_string(r.max_batch_size);
    f.step = step;
    if (step < plan_.steps.size()) {
      const Step& s = plan_.steps[step];
      f.op = s.op;
      f.where = s.where;
      f.params = s.params;
    }
    if (a) {
      f.buffer = std::string(buffer_name(a->tensor.buffer));
      f.begin = a->tensor.offset;
      f.end = end_of(*a);
      f.buffer_bytes = bytes_[static_cast<size_t>(a->tensor.buffer)];
    }
    return f;
  }

  // A finding on access b of step `step`, narrowed to the bytes [lo, hi) it shares.
  Finding shared_finding(CheckKind k, uint32_t step, const Access& b, uint64_t lo,
                         uint64_t hi) const {
    Finding f = base(k, step, &b);
    f.begin = lo;
    f.end = hi;
    return f;
  }

  void report(Finding f, BufferId id) {
    if (!reported_.insert({f.check, static_cast<uint32_t>(f.step), id}).second) return;
    findings_.push_back(std::move(f));
  }

  void check_bounds(uint32_t i) {
    for (const Access& a : plan_.steps[i].accesses) {
      if (!in_arena(a)) continue;
      const uint64_t size = bytes_[static_cast<size_t>(a.tensor.buffer)];
      Finding f = base(CheckKind::bounds, i, &a);
      if (size == 0) {
        f.detail =
            std::string(to_string(a.kind)) + " of " + a.tensor.to_string() + " into a null buffer";
        report(std::move(f), a.tensor.buffer);
      } else if (f.end > size) {
        f.detail = std::string(to_string(a.kind)) + " of " + a.tensor.to_string() + " ends at " +
                   std::to_string(f.end) + ", " + std::to_string(f.end - size) +
                   " bytes past the buffer's " + std::to_string(size);
        report(std::move(f), a.tensor.buffer);
      }
    }
  }

  // A read and a write of the identical tensor are an op declaring itself in place.
  static bool same_tensor(const Access& a, const Access& b) {
    return a.tensor.buffer == b.tensor.buffer && a.tensor.offset == b.tensor.offset &&
           a.tensor.bytes() == b.tensor.bytes();
  }

  // Sweep over the step's arena accesses sorted by (buffer, begin): each access is compared
  // only with the earlier ones still open at its begin (ops with hundreds of per-region
  // accesses stay linear-ish).
  void check_overlap(uint32_t i) {
    const auto& acc = plan_.steps[i].accesses;
    std::vector<const Access*> order;
    for (const Access& a : acc)
      if (in_arena(a) && a.tensor.bytes() > 0) order.push_back(&a);
    if (order.size() < 2) return;
    std::sort(order.begin(), order.end(), [](const Access* x, const Access* y) {
      return std::make_pair(x->tensor.buffer, x->tensor.offset) <
             std::make_pair(y->tensor.buffer, y->tensor.offset);
    });
    std::vector<const Access*> open;
    for (const Access* b : order) {
      std::erase_if(open, [&](const Access* a) {
        return a->tensor.buffer != b->tensor.buffer || end_of(*a) <= b->tensor.offset;
      });
      for (const Access* a : open) overlap_pair(i, *a, *b);
      open.push_back(b);
    }
  }

  void overlap_pair(uint32_t i, const Access& a, const Access& b) {
    if (!is_write(a.kind) && !is_write(b.kind)) return;
    if (is_write(a.kind) != is_write(b.kind) && same_tensor(a, b)) return;
    const auto [lo, hi] = shared_bytes(a, b);
    if (lo >= hi) return;
    Finding f = shared_finding(CheckKind::overlap, i, b, lo, hi);
    f.detail = std::string(to_string(a.kind)) + " " + a.tensor.to_string() + " [" + a.value +
               "] and " + to_string(b.kind) + " " + b.tensor.to_string() + " [" + b.value +
               "] share bytes [" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
    report(std::move(f), b.tensor.buffer);
  }

  std::string step_name(uint32_t s) const {
    return "step " + std::to_string(s) + " (" + plan_.steps[s].op + ")";
  }

  void check_read(uint32_t i, const Access& a) {
    const size_t id = static_cast<size_t>(a.tensor.buffer);
    if (a.tensor.buffer == BufferId::norm_unit_w) return;  // persistent, zeroed at allocation
    const uint64_t lo = a.tensor.offset, hi = std::min(end_of(a), bytes_[id]);
    if (lo >= hi) return;
    const SegmentMap& m = written_[id];
    uint64_t pos = lo;
    auto it = m.upper_bound(lo);
    if (it != m.begin()) --it;
    for (; it != m.end() && it->first < hi; ++it) {
      const Segment& s = it->second;
      if (s.end <= pos) continue;
      if (it->first > pos) unwritten(i, a, pos, it->first);
      const uint64_t b = std::max(pos, it->first), e = std::min(hi, s.end);
      if (s.phantom) {
        Finding f = base(CheckKind::phantom_read, i, &a);
        f.begin = b;
        f.end = e;
        f.detail = "reads bytes [" + std::to_string(b) + ", " + std::to_string(e) + ") that " +
                   step_name(s.step) + " wrote as phantom rows";
        report(std::move(f), a.tensor.buffer);
      } else if (!a.value.empty() && s.value && *s.value != a.value) {
        stale(i, a, b, e, s);
      }
      pos = std::max(pos, e);
      if (pos >= hi) break;
    }
    if (pos < hi) unwritten(i, a, pos, hi);
  }

  void unwritten(uint32_t i, const Access& a, uint64_t b, uint64_t e) {
    Finding f = base(CheckKind::read_before_write, i, &a);
    f.begin = b;
    f.end = e;
    f.detail = "reads " + (a.value.empty() ? std::string("bytes") : "value " + a.value) + " at [" +
               std::to_string(b) + ", " + std::to_string(e) + ") that nothing in the pass wrote";
    report(std::move(f), a.tensor.buffer);
  }

  void stale(uint32_t i, const Access& a, uint64_t b, uint64_t e, const Segment& s) {
    const auto w = last_write_of_.find(a.value);
    if (w == last_write_of_.end()) {
      Finding f = base(CheckKind::read_before_write, i, &a);
      f.begin = b;
      f.end = e;
      f.detail = "reads value " + a.value + " that nothing in the pass wrote; bytes [" +
                 std::to_string(b) + ", " + std::to_string(e) + ") hold " + *s.value + " from " +
                 step_name(s.step);
      report(std::move(f), a.tensor.buffer);
      return;
    }
    Finding f = base(CheckKind::liveness, i, &a);
    f.begin = b;
    f.end = e;
    f.detail = "value " + a.value + " (written by " + step_name(w->second) +
               ") was overwritten at [" + std::to_string(b) + ", " + std::to_string(e) + ") by " +
               step_name(s.step) + " writing " + *s.value + " before this read";
    report(std::move(f), a.tensor.buffer);
  }

  void record_write(uint32_t i, const Access& a) {
    const size_t id = static_cast<size_t>(a.tensor.buffer);
    const uint64_t lo = a.tensor.offset, hi = std::min(end_of(a), bytes_[id]);
    if (!a.value.empty()) last_write_of_[a.value] = i;
    if (lo >= hi) return;
    SegmentMap& m = written_[id];
    // Trim the segments the new one covers, keeping their parts outside [lo, hi).
    auto it = m.upper_bound(lo);
    if (it != m.begin()) --it;
    std::vector<std::pair<uint64_t, Segment>> keep;
    while (it != m.end() && it->first < hi) {
      const uint64_t b = it->first;
      const Segment s = it->second;
      if (s.end <= lo) {
        ++it;
        continue;
      }
      it = m.erase(it);
      if (b < lo) keep.push_back({b, Segment{lo, s.step, s.value, s.phantom}});
      if (s.end > hi) keep.push_back({hi, s});
    }
    for (auto& [b, s] : keep) m[b] = s;
    m[lo] = Segment{hi, i, &a.value, a.kind == AccessKind::phantom_write};
  }

  void track_values(uint32_t i) {
    for (const Access& a : plan_.steps[i].accesses)
      if (in_arena(a) && a.kind == AccessKind::read) check_read(i, a);
    for (const Access& a : plan_.steps[i].accesses)
      if (in_arena(a) && is_write(a.kind)) record_write(i, a);
  }

  // Happens-before: program order on one stream plus the explicit waits.
  void check_races() {
    const size_t n = plan_.steps.size();
    bool multi = false;
    for (const Step& s : plan_.steps) multi = multi || s.stream != 0 || !s.after.empty();
    if (!multi) return;
    const size_t words = (n + 63) / 64;
    std::vector<std::vector<uint64_t>> before(n, std::vector<uint64_t>(words, 0));
    std::map<uint32_t, size_t> last_on_stream;
    auto inherit = [&](size_t j, size_t p) {
      for (size_t w = 0; w < words; ++w) before[j][w] |= before[p][w];
      before[j][p / 64] |= uint64_t{1} << (p % 64);
    };
    for (size_t j = 0; j < n; ++j) {
      const Step& s = plan_.steps[j];
      if (auto it = last_on_stream.find(s.stream); it != last_on_stream.end())
        inherit(j, it->second);
      for (uint32_t p : s.after)
        if (p < j) inherit(j, p);
      last_on_stream[s.stream] = j;
    }
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < j; ++i) {
        if (plan_.steps[i].stream == plan_.steps[j].stream) continue;
        if (before[j][i / 64] >> (i % 64) & 1) continue;
        race_between(static_cast<uint32_t>(i), static_cast<uint32_t>(j));
      }
  }

  void race_between(uint32_t i, uint32_t j) {
    for (const Access& a : plan_.steps[i].accesses)
      for (const Access& b : plan_.steps[j].accesses) {
        if (!in_arena(a) || !in_arena(b) || a.tensor.buffer != b.tensor.buffer) continue;
        if (!is_write(a.kind) && !is_write(b.kind)) continue;
        const auto [lo, hi] = shared_bytes(a, b);
        if (lo >= hi) continue;
        Finding f = shared_finding(CheckKind::race, j, b, lo, hi);
        f.detail = step_name(i) + " on stream " + std::to_string(plan_.steps[i].stream) + " and " +
                   step_name(j) + " on stream " + std::to_string(plan_.steps[j].stream) +
                   " are unordered and touch [" + std::to_string(lo) + ", " + std::to_string(hi) +
                   ") (" + to_string(a.kind) + " / " + to_string(b.kind) + ")";
        report(std::move(f), b.tensor.buffer);
      }
  }
};

}  // namespace

const char* to_string(CheckKind k) {
  switch (k) {
    case CheckKind::bounds:
      return "bounds";
    case CheckKind::overlap:
      return "overlap";
    case CheckKind::liveness:
      return "liveness";
    case CheckKind::race:
      return "race";
    case CheckKind::read_before_write:
      return "read-before-write";
    case CheckKind::phantom_read:
      return "phantom-read";
    case CheckKind::ineligible:
      return "ineligible";
  }
  return "?";
}

std::vector<CheckKind> all_check_kinds() {
  return {CheckKind::bounds,    CheckKind::overlap,           CheckKind::liveness,
          CheckKind::race,      CheckKind::read_before_write, CheckKind::phantom_read,
          CheckKind::ineligible};
}

std::string Finding::to_string() const {
  std::ostringstream s;
  s << verify::to_string(check) << " on " << buffer << " [" << begin << ", " << end << ") of "
    << buffer_bytes << " B — " << pass << " [" << paths << "] step " << step << " " << op << " ("
    << where << ") " << params << " — sizing " << sizing << ", "
    << (config.empty() ? "" : config + " ") << shape << ": " << detail;
  return s.str();
}

std::vector<Finding> check(const plan::PassPlan& plan, const Layout& layout) {
  return Checker(plan, layout).run();
}

}  // namespace bufferlab::verify
