// The verify report: summary table, short buffers, findings (text and JSON).
#include "verify/verify_report.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "common/capacity_text.h"
#include "common/human_bytes.h"
#include "common/report_header.h"
#include "verify/slack_table.h"

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
  fmt::print(out, "paths:      {} combination{} per pass\n", o.report.paths,
             o.report.paths == 1 ? "" : "s");
}

verify::KindSummary totals(const VerifyOutcome& o) {
  verify::KindSummary total;
  for (const auto& k : o.report.kinds) {
    total.passes += k.passes;
    total.refused += k.refused;
    total.plans += k.plans;
    total.distinct_plans += k.distinct_plans;
    total.findings += k.findings;
  }
  return total;
}

// What the verifier checked, over how much: the checks are the ones check() implements;
// "checks" counts pass × path pairs, "plans" the distinct plans built (decode passes that pad
// to the same rows share one plan).
void print_checked(std::FILE* out, const VerifyOutcome& o) {
  std::string names;
  const auto kinds = verify::all_check_kinds();
  for (size_t i = 0; i < kinds.size(); ++i)
    names += (i == 0                  ? ""
              : i + 1 == kinds.size() ? " and "
                                      : ", ") +
             std::string(verify::to_string(kinds[i]));
  const verify::KindSummary t = totals(o);
  fmt::print(out, "checked:    {}\n", names);
  fmt::print(out,
             "            (docs/spec/buffers.md §2–§5) on every arena access of {} checks: {} "
             "launchable\n",
             t.plans, t.passes - t.refused);
  fmt::print(out,
             "            passes of the boundary grid ({} more refused by the engine) × {} path "
             "combinations;\n",
             t.refused, o.report.paths);
  fmt::print(out,
             "            {} distinct plans (the {} other checks are decode passes padded to the "
             "rows of an\n            earlier decode pass: the same plan, checked once)\n\n",
             o.report.plans, t.plans - o.report.plans);
}

void print_summary(std::FILE* out, const VerifyOutcome& o) {
  const auto row = [&](const std::string& kind, const verify::KindSummary& k,
                       const std::string& range) {
    fmt::print(out, "{:<11} {:>7}  {:<13} {:>7} {:>8} {:>7} {:>9}\n", kind, k.passes, range,
               k.refused, k.plans, k.distinct_plans, k.findings);
  };
  fmt::print(out, "{:<11} {:>7}  {:<13} {:>7} {:>8} {:>7} {:>9}\n", "pass kind", "passes", "tokens",
             "refused", "checks", "plans", "findings");
  for (const auto& k : o.report.kinds) {
    const bool launched = k.passes > k.refused;
    row(plan::to_string(k.kind), k,
        launched ? fmt::format("{}..{}", k.min_tokens, k.max_tokens) : "-");
  }
  row("total", totals(o), "");
  fmt::print(out, "\n");
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

void print_result(std::FILE* out, const VerifyOutcome& o) {
  const verify::KindSummary t = totals(o);
  // The capacity finding is about the arena, not a plan: counted here, printed above.
  const uint64_t findings = t.findings + (o.capacity.fits() ? 0 : 1);
  if (o.clean())
    fmt::print(out, "CLEAN: no findings in {} checks of {} distinct plans ({:.1f} s)\n", t.plans,
               o.report.plans, o.elapsed_s);
  else
    fmt::print(out,
               "FINDINGS: {} in {} checks of {} distinct plans, {} short buffer{}{} ({:.1f} s)\n",
               findings, t.plans, o.report.plans, o.short_buffers.size(),
               o.short_buffers.size() == 1 ? "" : "s",
               o.capacity.fits() ? "" : ", the arena does not fit the target", o.elapsed_s);
}

// Suggested commands, each asking about the same model, run shape and target (and, where it
// reproduces this report, the same sizing): what each does, then the command.
void print_next(std::FILE* out, const VerifyOutcome& o) {
  std::vector<std::pair<std::string, std::string>> next;  // (why, command)
  const std::string run = o.model_option + o.shape_and_target_options;
  const std::string same = run + o.sizing_options;
  if (!o.report.findings.empty()) {
    const Finding& f = o.report.findings.front();
    next.push_back(
        {"the first finding's plan, step by step",
         fmt::format("bufferlab verify {} --pass '{}' --paths '{}'", same, f.pass, f.paths)});
    next.push_back(
        {"every finding, one by one", fmt::format("bufferlab verify {} --show 0", same)});
  }
  next.push_back({"every buffer at its high-water mark",
                  fmt::format("bufferlab plan {} --sizing tight", run)});
  next.push_back({"... as a file for verify --sizes",
                  fmt::format("bufferlab plan {} --sizing tight --json", run)});
  next.push_back(
      {"this report as JSON (slack in bytes)", fmt::format("bufferlab verify {} --json", same)});
  if (o.sizing_options.empty())
    next.push_back(
        {"the formulas as written", fmt::format("bufferlab verify {} --sizing spec", run)});
  next.push_back(
      {"a kernel against the oracle", "bufferlab compare " + o.model_option + " --op rmsnorm"});
  size_t w = 0;
  for (const auto& [why, cmd] : next) w = std::max(w, why.size());
  fmt::print(out, "next:\n");
  for (const auto& [why, cmd] : next) fmt::print(out, "  {:<{}}  {}\n", why + ":", w + 1, cmd);
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
  fmt::print(out, "\n");
  print_checked(out, o);
  print_summary(out, o);
  print_short_buffers(out, o);
  print_findings(out, o, show);
  if (!o.capacity.fits()) fmt::print(out, "{}\n\n", capacity_finding(o.capacity, o.target));
  print_result(out, o);
  fmt::print(out, "\n");
  print_slack_table(out, o.slack, o.sizes_file ? "the file " + o.sizes_file->path : o.sizing);
  fmt::print(out, "\n");
  print_next(out, o);
}

nlohmann::json verify_json(const VerifyOutcome& o) {
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& k : o.report.kinds) {
    nlohmann::json j = {{"kind", plan::to_string(k.kind)},
                        {"passes", k.passes},
                        {"refused", k.refused},
                        {"checks", k.plans},
                        {"plans", k.distinct_plans},
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
  nlohmann::json checked = nlohmann::json::array();
  for (CheckKind k : verify::all_check_kinds()) checked.push_back(verify::to_string(k));
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
          {"checked", checked},
          {"checks", totals(o).plans},
          {"plans", o.report.plans},
          {"kinds", kinds},
          {"capacity", capacity_json(o.capacity)},
          {"clean", o.clean()},
          {"short_buffers", shorts},
          {"findings", findings},
          {"slack", slack_json(o.slack)},
          {"elapsed_s", o.elapsed_s}};
}

}  // namespace bufferlab::cli
