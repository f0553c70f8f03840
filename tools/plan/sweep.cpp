// Sweep points, evaluation and the sweep table.
#include "plan/sweep.h"

#include <algorithm>

#include <fmt/format.h>

#include "bufferlab/core/error.h"
#include "common/human_bytes.h"
#include "common/parse_number.h"

namespace bufferlab::cli {
namespace {

constexpr std::string_view kSweepAxis = "max-batch-tokens=";
constexpr size_t kTopBuffers = 3;

}  // namespace

SweepRange parse_sweep(const std::string& spec) {
  if (spec.rfind(kSweepAxis, 0) != 0)
    throw Error("--sweep = '" + spec + "': expected max-batch-tokens=A:B");
  const std::string range = spec.substr(kSweepAxis.size());
  const size_t colon = range.find(':');
  if (colon == std::string::npos)
    throw Error("--sweep = '" + spec + "': expected max-batch-tokens=A:B");
  SweepRange r;
  r.first = parse_u64("--sweep start", range.substr(0, colon));
  r.last = parse_u64("--sweep end", range.substr(colon + 1));
  if (r.first == 0) throw Error("--sweep = '" + spec + "': max_batch_tokens starts at 1");
  if (r.first > r.last)
    throw Error("--sweep = '" + spec + "': start " + std::to_string(r.first) + " > end " +
                std::to_string(r.last));
  return r;
}

std::vector<uint64_t> sweep_points(const SweepRange& range) {
  std::vector<uint64_t> points{range.first};
  for (uint64_t p = 1; p != 0; p <<= 1)  // p wraps to 0 after 2^63
    if (p > range.first && p < range.last) points.push_back(p);
  if (range.last != range.first) points.push_back(range.last);
  return points;
}

std::vector<PlanResult> run_sweep(const PlanRequest& base, const std::vector<uint64_t>& points) {
  std::vector<PlanResult> out;
  out.reserve(points.size());
  for (uint64_t m : points) {
    PlanRequest request = base;
    request.context.shape.max_batch_tokens = m;
    out.push_back(evaluate(request));
  }
  return out;
}

std::vector<BufferId> largest_buffers(const PlanResult& plan, size_t n) {
  std::vector<BufferId> ids;
  for (const auto& info : kBufferRegistry)
    if (plan.sizes.bytes(info.id) > 0) ids.push_back(info.id);
  std::stable_sort(ids.begin(), ids.end(), [&](BufferId a, BufferId b) {
    return plan.sizes.bytes(a) > plan.sizes.bytes(b);
  });
  if (ids.size() > n) ids.resize(n);
  return ids;
}

void print_sweep_table(std::FILE* out, const std::vector<PlanResult>& sweep) {
  if (sweep.empty()) return;
  const PlanContext& c = sweep.front().context;
  fmt::print(out,
             "model: {}  max_seq_len {}, kv_block_size {}, max_batch_size {}, target {}, "
             "sizing {}\n\n",
             c.model, c.shape.max_seq_len, c.shape.kv_block_size, c.shape.max_batch_size,
             c.target.name, sweep.front().sizing);
  const size_t num_w =
      std::max<size_t>(std::to_string(sweep.back().layout.arena_bytes()).size(), 11);
  fmt::print(out, "{:>10}  {:>{}}  {:>9}  {:>{}}  {:>9}  {}\n", "m", "total_bytes", num_w, "total",
             "arena_bytes", num_w, "arena", "largest buffers");
  for (const PlanResult& p : sweep) {
    std::string top;
    for (BufferId id : largest_buffers(p, kTopBuffers))
      top += fmt::format("{}{} {}", top.empty() ? "" : ", ", buffer_name(id),
                         human_bytes(p.sizes.bytes(id)));
    const uint64_t total = p.sizes.total_bytes();
    const uint64_t arena = p.layout.arena_bytes();
    fmt::print(out, "{:>10}  {:>{}}  {:>9}  {:>{}}  {:>9}  {}\n", p.context.shape.max_batch_tokens,
               total, num_w, human_bytes(total), arena, num_w, human_bytes(arena), top);
  }
}

}  // namespace bufferlab::cli
