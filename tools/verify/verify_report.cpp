// The verify report: summary table, short buffers, findings (text and JSON).
#include "verify/verify_report.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "common/capacity_text.h"
#include "common/human_bytes.h"
#include "common/report_header.h"

namespace bufferlab::cli {
namespace {

using verify::CheckKind;
using verify::Finding;

uint64_t tokens_of(const PassTokens& tokens, const Finding& f) {
  const auto it = tokens.find(f.pass);
  return it == tokens.end() ? UINT64_MAX : it->second;
}

std::string on_off(bool b) { return b ? "on" : "off"; }

// "[b, e) of N B" plus how far a bounds finding runs past the end.
std::string byte_range(const Finding& f) {
  std::string s = fmt::format("bytes [{}, {}) of {} B", f.begin, f.end, f.buffer_bytes);
  if (f.check == CheckKind::bounds) {
    if (f.buffer_bytes == 0)
      s += " (the buffer is null)";
    else if (f.end > f.buffer_bytes)
      s += fmt::format(" ({} B past the end)", f.end - f.buffer_bytes);
  }
  return s;
}

void print_header(std::FILE* out, const VerifyOutcome& o) {
  print_model_and_shape(out, o.model, o.shape);
  fmt::print(out, "target:     {}\n", describe_target(o.target));
  fmt::print(out, "capacity:   {}\n", capacity_share(o.capacity, o.target));
  if (o.sizes_file) {
    fmt::print(out, "sizes:      {} (the file's sizing: {}; sub-layout parameters: {})\n",
               o.sizes_file->path, o.sizes_file->sizing, o.sizing);
    for (const auto& d : o.sizes_file->sub_layout_differences)
      fmt::print(out, "            note: sub-layout {}\n", d);
  } else {
    fmt::print(out, "sizing:     {}\n", o.sizing);
  }
  fmt::print(out, "paths:      {} combination{} per pass\n\n", o.report.paths,
             o.report.paths == 1 ? "" : "s");
}

void print_summary(std::FILE* out, const VerifyOutcome& o) {
  fmt::print(out, "{:<11} {:>7}  {:<13} {:>7} {:>8} {:>9}\n", "pass kind", "passes", "tokens",
             "refused", "plans", "findings");
  verify::KindSummary total;
  for (const auto& k : o.report.kinds) {
    const bool launched = k.passes > k.refused;
    const std::string range = launched ? fmt::format("{}..{}", k.min_tokens, k.max_tokens) : "-";
    fmt::print(out, "{:<11} {:>7}  {:<13} {:>7} {:>8} {:>9}\n", plan::to_string(k.kind), k.passes,
               range, k.refused, k.plans, k.findings);
    total.passes += k.passes;
    total.refused += k.refused;
    total.plans += k.plans;
    total.findings += k.findings;
  }
  fmt::print(out, "{:<11} {:>7}  {:<13} {:>7} {:>8} {:>9}\n\n", "total", total.passes, "",
             total.refused, total.plans, total.findings);
}

void print_short_buffers(std::FILE* out, const VerifyOutcome& o) {
  if (o.short_buffers.empty()) return;
  fmt::print(out, "short buffers (bounds findings; the smallest pass that overflows each):\n");
  fmt::print(out, "  {:<20} {:>14} {:>14} {:>9}  {}\n", "buffer", "bytes", "needs", "findings",
             "smallest pass");
  for (const auto& s : o.short_buffers)
    fmt::print(out, "  {:<20} {:>14} {:>14} {:>9}  {} [{}] step {} {} ({})\n", s.buffer,
               s.buffer_bytes, s.needed_bytes, s.findings, s.smallest.pass, s.smallest.paths,
               s.smallest.step, s.smallest.op, s.smallest.where);
  fmt::print(out, "\n");
}

// Findings that share a check, a buffer and an op are one defect seen in several passes or
// paths: print the smallest instance in detail and count the rest.
struct Group {
  const Finding* first = nullptr;
  const Finding* last = nullptr;  // of the largest pass
  uint64_t count = 0;
};

std::vector<Group> group_findings(const std::vector<Finding>& findings) {
  std::vector<Group> groups;
  std::map<std::tuple<CheckKind, std::string, std::string>, size_t> index;
  for (const Finding& f : findings) {
    const auto key = std::make_tuple(f.check, f.buffer, f.op);
    auto [it, inserted] = index.emplace(key, groups.size());
    if (inserted) groups.push_back(Group{&f, &f, 0});
    Group& g = groups[it->second];
    g.last = &f;
    ++g.count;
  }
  return groups;
}

void print_findings(std::FILE* out, const VerifyOutcome& o, size_t show) {
  const auto& findings = o.report.findings;
  if (findings.empty()) return;
  if (show == 0) {
    fmt::print(out, "findings ({}):\n", findings.size());
    for (size_t i = 0; i < findings.size(); ++i)
      print_finding(out, findings[i], fmt::format("  [{}] ", i + 1), "      ");
    fmt::print(out, "\n");
    return;
  }
  const std::vector<Group> groups = group_findings(findings);
  // The table counts a decode plan once per pass of its rows; the list holds it once.
  fmt::print(out,
             "findings: {} distinct, in {} group{} (same check, buffer and op); the smallest "
             "pass of each:\n",
             findings.size(), groups.size(), groups.size() == 1 ? "" : "s");
  for (size_t i = 0; i < groups.size() && i < show; ++i) {
    const Group& g = groups[i];
    print_finding(out, *g.first, fmt::format("  [{}] ", i + 1), "      ");
    if (g.count > 1)
      fmt::print(out, "      + {} more like it, up to {} [{}]\n", g.count - 1, g.last->pass,
                 g.last->paths);
  }
  if (groups.size() > show)
    fmt::print(out, "  … {} more groups not shown (--show 0 lists every finding; --json)\n",
               groups.size() - show);
  fmt::print(out, "\n");
}

}  // namespace

std::string describe_target(const Target& t) {
  return fmt::format("{} ({} SMs, split-K {}, q2_dequant {}, q2_mmq {})", t.name, t.sm_count,
                     t.splitk_string(), on_off(t.q2_dequant), on_off(t.q2_mmq));
}

PassTokens pass_tokens(const std::vector<plan::Pass>& passes, const RunShape& shape) {
  PassTokens out;
  for (const auto& p : passes)
    if (!p.refusal(shape)) out.emplace(p.to_string(), p.tokens());
  return out;
}

void finish_outcome(VerifyOutcome& o) {
  auto& findings = o.report.findings;
  // By tokens only: the sort is stable, so passes of equal tokens keep the grid's order and
  // the findings of one plan their step order (step indices of two plans do not compare).
  std::stable_sort(findings.begin(), findings.end(), [&](const Finding& a, const Finding& b) {
    return tokens_of(o.tokens, a) < tokens_of(o.tokens, b);
  });
  std::map<std::string, ShortBuffer> by_buffer;
  for (const Finding& f : findings) {
    if (f.check != CheckKind::bounds) continue;
    auto [it, inserted] = by_buffer.emplace(f.buffer, ShortBuffer{});
    ShortBuffer& s = it->second;
    if (inserted) {
      s.buffer = f.buffer;
      s.buffer_bytes = f.buffer_bytes;
      s.smallest = f;  // findings are sorted: the first one has the fewest tokens
      s.smallest_tokens = tokens_of(o.tokens, f);
    }
    s.needed_bytes = std::max(s.needed_bytes, f.end);
    ++s.findings;
  }
  o.short_buffers.clear();
  for (const auto& info : kBufferRegistry)
    if (auto it = by_buffer.find(std::string(info.name)); it != by_buffer.end())
      o.short_buffers.push_back(it->second);
}

void print_finding(std::FILE* out, const Finding& f, const std::string& first,
                   const std::string& indent) {
  fmt::print(out, "{}{} on {}: {}\n", first, verify::to_string(f.check), f.buffer, byte_range(f));
  fmt::print(out, "{}pass:   {} [{}]\n", indent, f.pass, f.paths);
  fmt::print(out, "{}step:   {} {} ({})\n", indent, f.step, f.op, f.where);
  if (!f.params.empty()) fmt::print(out, "{}params: {}\n", indent, f.params);
  fmt::print(out, "{}sizing: {}\n", indent, f.sizing);
  if (!f.detail.empty()) fmt::print(out, "{}why:    {}\n", indent, f.detail);
}

nlohmann::json finding_json(const Finding& f) {
  return {{"check", verify::to_string(f.check)},
          {"pass", f.pass},
          {"paths", f.paths},
          {"step", f.step},
          {"op", f.op},
          {"layer", f.where},
          {"params", f.params},
          {"buffer", f.buffer},
          {"begin", f.begin},
          {"end", f.end},
          {"buffer_bytes", f.buffer_bytes},
          {"sizing", f.sizing},
          {"config", f.config},
          {"shape", f.shape},
          {"detail", f.detail}};
}

void print_verify_report(std::FILE* out, const VerifyOutcome& o, size_t show) {
  print_header(out, o);
  print_summary(out, o);
  print_short_buffers(out, o);
  print_findings(out, o, show);
  uint64_t total = 0;
  for (const auto& k : o.report.kinds) total += k.findings;
  if (!o.capacity.fits()) {
    fmt::print(out, "{}\n\n", capacity_finding(o.capacity, o.target));
    ++total;
  }
  if (o.clean())
    fmt::print(out, "CLEAN: no findings in {} distinct plans ({:.1f} s)\n", o.report.plans,
               o.elapsed_s);
  else
    fmt::print(out, "FINDINGS: {} in {} distinct plans, {} short buffer{}{} ({:.1f} s)\n", total,
               o.report.plans, o.short_buffers.size(), o.short_buffers.size() == 1 ? "" : "s",
               o.capacity.fits() ? "" : ", the arena does not fit the target", o.elapsed_s);
}

nlohmann::json verify_json(const VerifyOutcome& o) {
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& k : o.report.kinds) {
    nlohmann::json j = {{"kind", plan::to_string(k.kind)},
                        {"passes", k.passes},
                        {"refused", k.refused},
                        {"plans", k.plans},
                        {"findings", k.findings},
                        {"min_tokens", nullptr},
                        {"max_tokens", nullptr}};
    if (k.passes > k.refused) {
      j["min_tokens"] = k.min_tokens;
      j["max_tokens"] = k.max_tokens;
    }
    kinds.push_back(std::move(j));
  }
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : o.report.findings) {
    nlohmann::json j = finding_json(f);
    j["tokens"] = tokens_of(o.tokens, f);
    findings.push_back(std::move(j));
  }
  nlohmann::json shorts = nlohmann::json::array();
  for (const auto& s : o.short_buffers) {
    nlohmann::json j = finding_json(s.smallest);
    j["tokens"] = s.smallest_tokens;
    shorts.push_back({{"buffer", s.buffer},
                      {"bytes", s.buffer_bytes},
                      {"needed_bytes", s.needed_bytes},
                      {"findings", s.findings},
                      {"smallest_pass", s.smallest.pass},
                      {"smallest_tokens", s.smallest_tokens},
                      {"smallest", std::move(j)}});
  }
  nlohmann::json sizes_file = nullptr;
  if (o.sizes_file)
    sizes_file = {{"path", o.sizes_file->path},
                  {"sizing", o.sizes_file->sizing},
                  {"sub_layout_differences", o.sizes_file->sub_layout_differences}};
  return {{"model", o.model},
          {"run_shape",
           {{"max_batch_tokens", o.shape.max_batch_tokens},
            {"max_seq_len", o.shape.max_seq_len},
            {"kv_block_size", o.shape.kv_block_size},
            {"max_batch_size", o.shape.max_batch_size}}},
          {"target",
           {{"name", o.target.name},
            {"sm_count", o.target.sm_count},
            {"splitk", o.target.splitk_string()},
            {"q2_dequant", o.target.q2_dequant},
            {"q2_mmq", o.target.q2_mmq}}},
          {"sizing", o.sizing},
          {"sizes_file", sizes_file},
          {"paths", o.report.paths},
          {"plans", o.report.plans},
          {"kinds", kinds},
          {"capacity",
           {{"arena_bytes", o.capacity.arena_bytes},
            {"memory_bytes", o.capacity.memory_bytes},
            {"percent", o.capacity.percent()},
            {"fits", o.capacity.fits()}}},
          {"clean", o.clean()},
          {"short_buffers", shorts},
          {"findings", findings},
          {"elapsed_s", o.elapsed_s}};
}

}  // namespace bufferlab::cli
