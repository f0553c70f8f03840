// print_slack_table / slack_json: rows from verify::slack_report, in its order.
#include "verify/slack_table.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/human_bytes.h"

namespace bufferlab::cli {
namespace {

using verify::BufferSlack;

std::string reached_by(const verify::HighWater& m) {
  if (m.by_eligibility)
    return fmt::format("{} [{}] q12_bytes (co-dispatch eligibility)", m.pass, m.paths);
  return fmt::format("{} [{}] step {} {} ({})", m.pass, m.paths, m.step, m.op, m.where);
}

std::string percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? "-" : fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / whole);
}

// "1.25 GiB" or, past the end, "-96 B" (short: a bounds finding).
std::string signed_bytes(int64_t v) {
  return v >= 0 ? human_bytes(static_cast<uint64_t>(v))
                : "-" + human_bytes(static_cast<uint64_t>(-(v + 1)) + 1);
}

bool is_null_and_untouched(const BufferSlack& b) { return b.allocated == 0 && !b.mark.touched; }

}  // namespace

void print_slack_table(std::FILE* out, const verify::SlackReport& s, const std::string& sizing) {
  fmt::print(out,
             "slack: each buffer's high-water mark (the highest end offset any access of the {} "
             "plans\n       reaches) against the bytes allocated, most wasted first:\n",
             s.plans);
  fmt::print(out, "  {:<20} {:>10} {:>13} {:>10} {:>6}  {}\n", "buffer", "allocated", "high-water",
             "wasted", "used", "reached by");
  std::string nulls;
  for (const BufferSlack& b : s.buffers) {
    const std::string name(buffer_name(b.id));
    if (is_null_and_untouched(b)) {
      nulls += (nulls.empty() ? "" : ", ") + name;
      continue;
    }
    if (!b.mark.touched) {
      fmt::print(out, "  {:<20} {:>10} {:>13} {:>10} {:>6}  never touched\n", name,
                 human_bytes(b.allocated), "-", human_bytes(b.allocated), "0.0%");
      continue;
    }
    fmt::print(out, "  {:<20} {:>10} {:>13} {:>10} {:>6}  {}{}\n", name, human_bytes(b.allocated),
               human_bytes(b.mark.end), signed_bytes(b.wasted()), percent(b.mark.end, b.allocated),
               reached_by(b.mark), b.wasted() < 0 ? "  SHORT" : "");
  }
  if (!nulls.empty()) fmt::print(out, "  null (0 bytes, never touched): {}\n", nulls);
  fmt::print(
      out, "  {:<20} {:>10} {:>13} {:>10} {:>6}  (Σ of the buffers)\n", "total",
      human_bytes(s.allocated_bytes), human_bytes(s.touched_bytes),
      signed_bytes(static_cast<int64_t>(s.allocated_bytes) - static_cast<int64_t>(s.touched_bytes)),
      percent(s.touched_bytes, s.allocated_bytes));
  const uint64_t unused =
      s.allocated_arena > s.needed_arena ? s.allocated_arena - s.needed_arena : 0;
  fmt::print(out,
             "arena:      {} needed at this run shape, {} allocated by {}: {} ({}) never touched\n",
             human_bytes(s.needed_arena), human_bytes(s.allocated_arena), sizing,
             human_bytes(unused), percent(unused, s.allocated_arena));
  fmt::print(
      out,
      "            (needed: every buffer at its mark, ≥ {} B if non-null, laid out as Layout "
      "does — `plan --sizing tight`)\n",
      verify::kTightFloor);
}

nlohmann::json slack_json(const verify::SlackReport& s) {
  nlohmann::json rows = nlohmann::json::array();
  for (const BufferSlack& b : s.buffers) {
    nlohmann::json r = {
        {"buffer", buffer_name(b.id)}, {"allocated", b.allocated},
        {"touched", b.mark.touched},   {"high_water", b.mark.end},
        {"wasted", b.wasted()},        {"tight_bytes", verify::tight_bytes(b.allocated, b.mark)},
        {"reached_by", nullptr}};
    if (b.mark.touched)
      r["reached_by"] = {
          {"pass", b.mark.pass},
          {"paths", b.mark.paths},
          {"step", b.mark.by_eligibility ? nlohmann::json(nullptr) : nlohmann::json(b.mark.step)},
          {"op", b.mark.op},
          {"layer", b.mark.where}};
    rows.push_back(std::move(r));
  }
  return {{"plans", s.plans},
          {"allocated_bytes", s.allocated_bytes},
          {"high_water_bytes", s.touched_bytes},
          {"allocated_arena_bytes", s.allocated_arena},
          {"needed_arena_bytes", s.needed_arena},
          {"buffers", rows}};
}

}  // namespace bufferlab::cli
