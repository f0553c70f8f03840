// print_plan_table: rows come from kBufferRegistry, so a new field shows up without edits
// here; the sub-layout header is read from the plan JSON for the same reason.
#include "plan/plan_table.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "bufferlab/core/buffer_registry.h"
#include "common/capacity_text.h"
#include "common/human_bytes.h"
#include "common/report_header.h"

namespace bufferlab::cli {
namespace {

std::string on_off(bool b) { return b ? "on" : "off"; }

void print_header(std::FILE* out, const PlanResult& plan) {
  const PlanContext& c = plan.context;
  print_model_and_shape(out, c.model, c.shape);
  fmt::print(out, "target:     {} ({} SMs, split-K {}, q2_dequant {}, q2_mmq {})\n", c.target.name,
             c.target.sm_count, c.target.splitk_string(), on_off(c.target.q2_dequant),
             on_off(c.target.q2_mmq));
  fmt::print(out, "sizing:     {}\n", plan.sizing);
  if (plan.tight_plans > 0)  // kTightNote, in lines that fit the table's width
    fmt::print(out,
               "            (corrected's sub-layout; every buffer at its high-water mark over the "
               "{} plans\n             `verify` walks, >= 256 B if non-null: clean over that grid "
               "by construction)\n",
               plan.tight_plans);
  fmt::print(out, "layout:     alignment {} B, redzone {} B\n", plan.layout.alignment(),
             plan.layout.redzone());
  std::string params;
  for (const auto& [key, value] : plan.json.at("sub_layout").items())
    params += fmt::format("{}{} {}", params.empty() ? "" : ", ", key, value.dump());
  fmt::print(out, "sub-layout: {}\n\n", params);
}

size_t widest_name() {
  size_t w = 0;
  for (const auto& info : kBufferRegistry) w = std::max(w, info.name.size());
  return w;
}

}  // namespace

void print_plan_table(std::FILE* out, const PlanResult& plan) {
  print_header(out, plan);
  const uint64_t total = plan.sizes.total_bytes();
  const size_t name_w = widest_name();
  const size_t num_w = std::max<size_t>(std::to_string(plan.layout.arena_bytes()).size(), 6);
  fmt::print(out, "{:>2}  {:<{}}  {:>{}}  {:>9}  {:>{}}  {:>6}  {}\n", "#", "buffer", name_w,
             "bytes", num_w, "size", "offset", num_w, "%", "doc");
  size_t index = 0;
  size_t nulls = 0;
  for (const auto& info : kBufferRegistry) {
    ++index;
    const LayoutEntry e = plan.layout.entry(info.id);
    const uint64_t bytes = plan.sizes.bytes(info.id);
    if (bytes == 0) ++nulls;
    const std::string offset = e.is_null() ? "null" : std::to_string(e.offset);
    const double pct = total == 0 ? 0.0 : 100.0 * static_cast<double>(bytes) / total;
    fmt::print(out, "{:>2}  {:<{}}  {:>{}}  {:>9}  {:>{}}  {:>6.2f}  {}\n", index, info.name,
               name_w, bytes, num_w, bytes == 0 ? "-" : human_bytes(bytes), offset, num_w, pct,
               info.doc);
  }
  const uint64_t arena = plan.layout.arena_bytes();
  fmt::print(out, "\n");
  fmt::print(out, "total_bytes  {:>{}}  {:>9}  (sum of all {} buffers; {} null)\n", total, num_w,
             human_bytes(total), kBufferRegistry.size(), nulls);
  fmt::print(out, "arena_bytes  {:>{}}  {:>9}  (end of the last buffer)\n", arena, num_w,
             human_bytes(arena));
  const uint64_t padding = arena - plan.layout.allocated_bytes();
  fmt::print(out, "padding      {:>{}}  {:>9}  (alignment gaps and redzones)\n", padding, num_w,
             human_bytes(padding));
  fmt::print(out, "capacity     {}\n", capacity_share(plan.capacity, plan.context.target));
  // A mutant such as B12 breaks the ledger on purpose; say so instead of hiding it.
  for (const auto& gap : registry_gaps(plan.sizes, plan.layout, plan.json))
    fmt::print(out, "ledger gap:  {}\n", gap);
}

}  // namespace bufferlab::cli
