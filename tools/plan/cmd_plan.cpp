// `bufferlab plan`: size and lay out the arena for one model and run shape, printed as a
// table, as JSON (plan_json and the capacity object), as an SVG, or swept over max_batch_tokens.
// Exit 1 when the arena does not fit the target's memory (a `capacity` finding), 2 on errors.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/error.h"
#include "common/capacity_text.h"
#include "common/commands.h"
#include "plan/plan_options.h"
#include "plan/plan_table.h"
#include "plan/sweep.h"
#include "svg/svg_arena.h"
#include "svg/svg_sweep.h"
#include "svg/svg_util.h"

namespace bufferlab::cli {
namespace {

struct PlanCommand {
  PlanOptions options;
  bool json = false;
  std::string svg_path;
  std::string sweep;
  CLI::Option* sweep_option = nullptr;
};

// An arena larger than the target's memory is a `capacity` finding: printed after the plan
// (on stderr with --json, which keeps stdout one JSON document) and exit 1. Returns the code.
int report_capacity(const PlanCommand& cmd, const std::vector<const PlanResult*>& plans) {
  int code = 0;
  for (const PlanResult* p : plans) {
    if (p->capacity.fits()) continue;
    std::string line = capacity_finding(p->capacity, p->context.target);
    if (plans.size() > 1)
      line += fmt::format(" (max_batch_tokens {})", p->context.shape.max_batch_tokens);
    fmt::print(cmd.json ? stderr : stdout, "{}\n", line);
    code = 1;
  }
  return code;
}

int run_single(const PlanCommand& cmd, const PlanRequest& request) {
  const PlanResult plan = evaluate(request);
  if (cmd.json)
    fmt::print("{}\n", plan.json.dump(2));
  else
    print_plan_table(stdout, plan);
  if (!cmd.svg_path.empty()) write_text_file(cmd.svg_path, arena_svg(plan));
  return report_capacity(cmd, {&plan});
}

int run_sweep_command(const PlanCommand& cmd, const PlanRequest& request) {
  if (cmd.options.max_batch_tokens_given())
    throw Error("--sweep max-batch-tokens=A:B and --max-batch-tokens exclude each other");
  const std::vector<PlanResult> sweep = run_sweep(request, sweep_points(parse_sweep(cmd.sweep)));
  if (cmd.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& p : sweep) all.push_back(p.json);
    fmt::print("{}\n", all.dump(2));
  } else {
    print_sweep_table(stdout, sweep);
  }
  if (!cmd.svg_path.empty()) write_text_file(cmd.svg_path, sweep_svg(sweep));
  std::vector<const PlanResult*> plans;
  for (const auto& p : sweep) plans.push_back(&p);
  return report_capacity(cmd, plans);
}

}  // namespace

void register_plan_command(CLI::App& app) {
  auto cmd = std::make_shared<PlanCommand>();
  CLI::App* sub = app.add_subcommand(
      "plan", "size and lay out the per-pass arena (one row per buffer, totals, sub-layout)");
  cmd->options.add_options(*sub);
  sub->add_flag("--json", cmd->json, "print the plan as JSON (one object; an array with --sweep)");
  sub->add_option("--svg", cmd->svg_path, "also draw the arena (or the sweep) as an SVG file")
      ->type_name("FILE");
  cmd->sweep_option =
      sub->add_option("--sweep", cmd->sweep,
                      "evaluate max-batch-tokens=A:B at A, B and the powers of two between")
          ->type_name("max-batch-tokens=A:B");
  sub->callback([cmd] {
    const PlanRequest request = cmd->options.request();
    exit_code() = cmd->sweep_option->count() > 0 ? run_sweep_command(*cmd, request)
                                                 : run_single(*cmd, request);
  });
}

}  // namespace bufferlab::cli
