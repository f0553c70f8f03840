// `bufferlab verify`: every launchable pass of the boundary grid (docs/spec/buffers.md §2) on
// every path combination (§5), each plan checked against the layout of the sizing under
// test — or of the byte counts of a `plan --json` file. Exit 0 clean, 1 findings, 2 error.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/verify/driver.h"
#include "bufferlab/core/verify/high_water.h"
#include "common/commands.h"
#include "common/model_source.h"
#include "common/parse_number.h"
#include "common/shape_options.h"
#include "common/stopwatch.h"
#include "common/target_options.h"
#include "io/sizes_file.h"
#include "verify/plan_steps.h"
#include "verify/verify_report.h"

namespace bufferlab::cli {
namespace {

struct VerifyCommand {
  ModelSource model;
  TargetOptions target;
  SizingOptions sizing;
  ShapeOptions shape;  // --max-batch-tokens, --max-seq-len, --kv-block-size, --max-batch-size
  std::string sizes_path;
  std::string show = "20";
  std::string pass;   // --pass: print this one plan instead of verifying the grid
  std::string paths;  // --paths: its path choices
  bool json = false;
};

void add_options(CLI::App& sub, VerifyCommand& cmd) {
  cmd.model.add_options(sub);
  cmd.shape.add_options(sub);
  cmd.target.add_options(sub);
  cmd.sizing.add_options(sub);
  sub.add_option("--sizes", cmd.sizes_path,
                 "verify the byte counts of this `plan --json` output instead of computing them "
                 "(sub-layout parameters still from --sizing)")
      ->type_name("FILE");
  sub.add_option("--show", cmd.show,
                 "groups of findings printed in detail (0: every finding, one by one)")
      ->type_name("N")
      ->capture_default_str();
  sub.add_flag("--json", cmd.json, "print the report as one JSON object (every finding)");
  sub.add_option("--pass", cmd.pass,
                 "print the plan of this one pass step by step (every access), then its "
                 "findings: prefill(t=5), decode(n=3), verify(rows=7), mixed(n=3,t=20), "
                 "codispatch(n=2,L=65)")
      ->type_name("PASS");
  sub.add_option("--paths", cmd.paths,
                 "with --pass: the path choices, e.g. proj=fp8,router=fp32-gate,ffn=int8,q2=off,"
                 "lora=on (default: the first combination)")
      ->type_name("PATHS");
}

// --pass: one plan, step by step. The paths must be a combination the model and target
// allow (a LoRA path without an adapter pool is no launchable plan).
int run_one_plan(const VerifyCommand& cmd, const ModelConfig& config, const BufferSizes& sizes,
                 const VerifyOutcome& o) {
  const plan::Pass pass = plan::Pass::from_string(cmd.pass);
  const auto allowed = plan::all_paths(config, o.target);
  const plan::Paths paths =
      cmd.paths.empty() ? allowed.front() : plan::Paths::from_string(cmd.paths);
  if (std::find(allowed.begin(), allowed.end(), paths) == allowed.end()) {
    std::string list;
    for (const auto& p : allowed) list += "\n  " + p.to_string();
    throw Error("paths " + paths.to_string() + " do not apply to this model and target; " +
                "the combinations are:" + list);
  }
  const plan::PassPlan plan = plan::build(config, sizes, o.target, o.shape, pass, paths);
  fmt::print("model:      {}\n", o.model);
  return print_plan_steps(stdout, plan, Layout::build(sizes));
}

// The grid samples boundaries: a short buffer's smallest overflowing prefill chunk usually
// lies between them, so bisect for it and keep whichever pass is smaller.
void refine_short_buffers(VerifyOutcome& o, const ModelConfig& config, const BufferSizes& sizes) {
  for (ShortBuffer& s : o.short_buffers) {
    auto f = verify::smallest_overflowing_prefill(config, sizes, o.target, o.shape, s.buffer);
    if (!f) continue;
    if (f->t >= s.smallest_tokens) continue;
    f->finding.sizing = s.smallest.sizing;  // keeps a --sizes file's label
    s.smallest = std::move(f->finding);
    s.smallest_tokens = f->t;
  }
}

// The run-shape and target options that differ from the defaults, so a suggested command
// asks about the same run (" --max-batch-tokens 100 --target h100").
std::string non_default_options(const RunShape& shape, const Target& target) {
  const RunShape d;
  std::string out;
  const auto add = [&](const char* flag, uint64_t v, uint64_t def) {
    if (v != def) out += fmt::format(" {} {}", flag, v);
  };
  add("--max-batch-tokens", shape.max_batch_tokens, d.max_batch_tokens);
  add("--max-seq-len", shape.max_seq_len, d.max_seq_len);
  add("--kv-block-size", shape.kv_block_size, d.kv_block_size);
  add("--max-batch-size", shape.max_batch_size, d.max_batch_size);
  const Target named = Target::named(target.name);
  if (target.name != Target{}.name) out += " --target " + target.name;
  if (target.splitk_string() != named.splitk_string()) out += " --splitk " + target.splitk_string();
  if (target.q2_dequant) out += " --q2-dequant";
  if (target.q2_mmq) out += " --q2-mmq";
  return out;
}

int run_verify(const VerifyCommand& cmd) {
  VerifyOutcome o;
  const ModelConfig config = cmd.model.load();
  o.model = cmd.model.label();
  o.shape = cmd.shape.shape();
  o.target = cmd.target.target();
  const Sizing sizing = cmd.sizing.sizing();
  const size_t show = parse_u64("--show", cmd.show);

  BufferSizes sizes = BufferSizes::from_config(config, o.shape, o.target, sizing);
  o.sizing = sizing.to_string();
  if (!cmd.sizes_path.empty()) {
    o.sizes_file = apply_sizes_file(cmd.sizes_path, o.shape, o.target, sizes);
  }

  o.capacity = capacity_of(Layout::build(sizes).arena_bytes(), o.target);

  if (!cmd.pass.empty()) return run_one_plan(cmd, config, sizes, o);
  if (!cmd.paths.empty()) throw Error("--paths needs --pass (verify checks every combination)");

  const Stopwatch stopwatch;
  const std::vector<plan::Pass> grid = verify::pass_grid(o.shape);
  o.tokens = pass_tokens(grid, o.shape);
  verify::VerifyOptions opts;
  // Collect every finding: the short-buffer section needs each buffer's smallest pass.
  opts.max_findings = SIZE_MAX;
  opts.config_label = o.model;
  o.report = verify::verify_config(config, sizes, o.target, o.shape, grid, opts);
  o.elapsed_s = stopwatch.seconds();
  // Plans name the sizing they were built with; a file's byte counts are not that sizing.
  if (o.sizes_file)
    for (auto& f : o.report.findings)
      f.sizing = "file " + o.sizes_file->path + " (its sizing " + o.sizes_file->sizing +
                 "; sub-layout " + o.sizing + ")";
  finish_outcome(o);
  refine_short_buffers(o, config, sizes);
  o.slack = verify::slack_report(sizes, o.report.high_water);
  o.model_option = cmd.model.option();
  o.shape_and_target_options = non_default_options(o.shape, o.target);
  if (!cmd.sizes_path.empty()) o.sizing_options = " --sizes " + cmd.sizes_path;
  if (sizing.mutant != Mutant::none)
    o.sizing_options += std::string(" --mutant ") + to_string(sizing.mutant);
  else if (sizing.kind != SizingKind::corrected)
    o.sizing_options += std::string(" --sizing ") + to_string(sizing.kind);

  if (cmd.json)
    fmt::print("{}\n", verify_json(o).dump(2));
  else
    print_verify_report(stdout, o, show);
  return o.clean() ? 0 : 1;
}

}  // namespace

void register_verify_command(CLI::App& app) {
  auto cmd = std::make_shared<VerifyCommand>();
  CLI::App* sub = app.add_subcommand(
      "verify", "check every launchable pass on every path against the arena (exit 1 on findings)");
  add_options(*sub, *cmd);
  sub->callback([cmd] { exit_code() = run_verify(*cmd); });
}

}  // namespace bufferlab::cli
