// High-water marks of the plans a verification walks, the tight sizing and the slack table.
#include "bufferlab/core/verify/high_water.h"

#include <algorithm>
#include <set>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/verify/driver.h"

namespace bufferlab::verify {

void HighWaterMarks::record(const plan::PassPlan& plan) {
  if (plan.refused) return;
  ++plans_;
  // Integer compares per access; the names are written once per raised buffer at the end.
  constexpr uint64_t kByEligibility = UINT64_MAX;
  std::array<uint64_t, kNumBuffers> raised_at{};  // step + 1 of the new mark; 0: not raised
  const auto raise = [&](BufferId id, uint64_t end, uint64_t step_plus_1) {
    HighWater& m = marks_[static_cast<size_t>(id)];
    // Strictly higher: the first plan and step in walk order to reach a mark keep it.
    if (m.touched && end <= m.end) return;
    m.end = end;
    m.touched = true;
    raised_at[static_cast<size_t>(id)] = step_plus_1;
  };
  // Eligible or not, a co-dispatch pass needs its staging in scratch (docs/spec/buffers.md §4.4).
  if (plan.eligibility_bytes > 0) raise(BufferId::scratch, plan.eligibility_bytes, kByEligibility);
  for (size_t i = 0; i < plan.steps.size(); ++i)
    for (const Access& a : plan.steps[i].accesses) {
      if (a.tensor.space != Space::arena) continue;
      const uint64_t bytes = a.tensor.bytes();
      if (bytes == 0) continue;
      raise(a.tensor.buffer, (Size(a.tensor.offset) + bytes).value(), i + 1);
    }
  std::string pass, paths;
  for (size_t id = 0; id < kNumBuffers; ++id) {
    if (raised_at[id] == 0) continue;
    if (pass.empty()) {
      pass = plan.pass.to_string();
      paths = plan.paths.to_string();
    }
    HighWater& m = marks_[id];
    m.pass = pass;
    m.paths = paths;
    m.by_eligibility = raised_at[id] == kByEligibility;
    const plan::Step* s = m.by_eligibility ? nullptr : &plan.steps[raised_at[id] - 1];
    m.step = s ? raised_at[id] - 1 : 0;
    m.op = s ? s->op : "q12_bytes";
    m.where = s ? s->where : "co-dispatch eligibility";
  }
}

HighWaterMarks high_water_marks(const ModelConfig& config, const BufferSizes& sizes,
                                const Target& target, const RunShape& shape,
                                const std::vector<plan::Pass>& passes,
                                const std::vector<plan::Paths>& paths) {
  const std::vector<plan::Paths> combos = paths.empty() ? plan::all_paths(config, target) : paths;
  HighWaterMarks marks;
  std::set<std::string> done;  // plan_key: each distinct plan once, as in verify_config
  for (const plan::Pass& pass : passes) {
    if (pass.refusal(shape)) continue;
    if (!done.insert(plan_key(pass)).second) continue;
    for (const plan::Paths& p : combos)
      marks.record(plan::build(config, sizes, target, shape, pass, p));
  }
  return marks;
}

uint64_t tight_bytes(uint64_t allocated, const HighWater& mark) {
  if (allocated == 0 && !mark.touched) return 0;
  return std::max(mark.end, kTightFloor);
}

BufferSizes tight_sizes(const BufferSizes& sizes, const HighWaterMarks& marks) {
  BufferSizes out = sizes;
  for (const auto& info : kBufferRegistry)
    out.bytes(info.id) = tight_bytes(sizes.bytes(info.id), marks.of(info.id));
  return out;
}

BufferSizes tight_sizing(const ModelConfig& config, const RunShape& shape, const Target& target,
                         uint64_t* plans) {
  const BufferSizes corrected =
      BufferSizes::from_config(config, shape, target, Sizing::corrected());
  const HighWaterMarks marks = high_water_marks(config, corrected, target, shape, pass_grid(shape));
  if (plans) *plans = marks.plans();
  return tight_sizes(corrected, marks);
}

SlackReport slack_report(const BufferSizes& sizes, const HighWaterMarks& marks) {
  SlackReport r;
  Size allocated = 0, touched = 0;
  for (const auto& info : kBufferRegistry) {
    BufferSlack b{info.id, sizes.bytes(info.id), marks.of(info.id)};
    allocated += b.allocated;
    touched += b.mark.end;
    r.buffers.push_back(std::move(b));
  }
  std::stable_sort(
      r.buffers.begin(), r.buffers.end(),
      [](const BufferSlack& a, const BufferSlack& b) { return a.wasted() > b.wasted(); });
  r.allocated_bytes = allocated.value();
  r.touched_bytes = touched.value();
  r.allocated_arena = Layout::build(sizes).arena_bytes();
  r.needed_arena = Layout::build(tight_sizes(sizes, marks)).arena_bytes();
  r.plans = marks.plans();
  return r;
}

}  // namespace bufferlab::verify
