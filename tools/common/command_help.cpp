// command_help: the required options, exit codes and examples of every `bufferlab` command,
// shown at the end of its --help.
#include "common/command_help.h"

#include <functional>

#include <fmt/format.h>

#include "bufferlab/core/error.h"

namespace bufferlab::cli {
namespace {

constexpr const char* kModel = "one of --preset NAME or --config FILE (exactly one)";
const std::pair<int, std::string> kExitError = {
    2,
    "error: a bad option, config or run shape, or a size that overflows 64 bits (the "
    "message names it)"};

std::string footer(const CommandHelp& help) {
  std::string text;
  if (!help.required.empty()) text += "Required: " + help.required + ".\n\n";
  text += "Exit codes:\n";
  for (const auto& [code, meaning] : help.exit_codes)
    text += fmt::format("  {:<3} {}\n", code, meaning);
  text += "\nExamples:\n";
  for (const auto& example : help.examples) text += "  " + example + "\n";
  return text;
}

}  // namespace

const std::vector<CommandHelp>& command_help() {
  static const std::vector<CommandHelp> help = {
      {"presets",
       "",
       {{0, "the list"}, kExitError},
       {"bufferlab presets", "bufferlab presets --json"}},
      {"config",
       kModel,
       {{0, "the normalized config"}, kExitError},
       {"bufferlab config --preset qwen3-next-80b",
        "bufferlab config --config data/configs/Qwen3-8B.json --json"}},
      {"plan",
       kModel,
       {{0, "the plan"},
        {1, "capacity: the arena does not fit the target's device memory (the plan is printed)"},
        kExitError},
       {"bufferlab plan --preset qwen3-next-80b",
        "bufferlab plan --config data/configs/Qwen3-8B.json --sizing corrected --json"}},
      {"compare",
       kModel,
       {{0, "AGREE: every asserted comparison within its bound"},
        {1, "DISAGREE: a comparison out of bound, or the arena cannot hold the op"},
        kExitError,
        {77, "skipped: the backend is not available here (no CUDA device)"}},
       {"bufferlab compare --op topk --preset qwen3-next-80b --tokens 64",
        "bufferlab compare --op gdn --preset qwen3-next-80b --tokens 200"}},
      {"verify",
       kModel,
       {{0, "CLEAN: no findings"},
        {1, "findings: a plan the arena cannot hold, or an arena larger than the target's memory"},
        kExitError},
       {"bufferlab verify --preset qwen3-next-80b",
        "bufferlab verify --preset qwen3-next-80b --max-batch-tokens 1193 --mutant B4"}},
      {"fuzz",
       "",
       {{0, "no failing case"},
        {1, "a failing case (written to --out)"},
        kExitError,
        {77, "--numeric: skipped, the backend is not available here (no CUDA device)"}},
       {"bufferlab fuzz --cases 2000 --sizing spec",
        "bufferlab fuzz --numeric routing --cases 50 --seed 7"}},
      {"sinkhorn",
       "",
       {{0, "every row-sum error within the Birkhoff-Hopf bound"},
        {1, "a violation (the first is named)"},
        kExitError},
       {"bufferlab sinkhorn --range 8 --iters 100 --svg sinkhorn.svg",
        "bufferlab sinkhorn --frontier"}},
  };
  return help;
}

void apply_command_help(CLI::App& app) {
  const std::function<bool(CLI::App*)> all = [](CLI::App*) { return true; };
  for (CLI::App* command : app.get_subcommands(all)) {
    const CommandHelp* entry = nullptr;
    for (const CommandHelp& h : command_help())
      if (h.command == command->get_name()) entry = &h;
    if (entry == nullptr) throw Error("command '" + command->get_name() + "' has no help entry");
    // After what the command's own footer explains (compare's ops, paths and variants).
    const std::string own = command->get_footer();
    command->footer(own.empty() ? footer(*entry) : own + "\n\n" + footer(*entry));
  }
}

}  // namespace bufferlab::cli
