// What `bufferlab verify` prints, as one report: the header (model, run shape, target,
// sizing), what was checked over how many plans, the summary table per pass kind, the short
// buffers (each with the smallest pass that overflows it), the findings in detail, the
// result, the slack table and what to try next; or all of it as one JSON object. `fuzz`
// reuses the finding forms.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/core/capacity.h"
#include "bufferlab/core/run_shape.h"
#include "bufferlab/core/target.h"
#include "bufferlab/core/verify/driver.h"
#include "bufferlab/core/verify/high_water.h"
#include "io/sizes_file.h"

namespace bufferlab::cli {

// Pass::to_string() → tokens of that pass, for the passes of a grid the engine launches
// (findings name their pass by its string).
using PassTokens = std::map<std::string, uint64_t>;
PassTokens pass_tokens(const std::vector<plan::Pass>& passes, const RunShape& shape);

// A buffer some launchable pass overflows (bounds findings on it).
struct ShortBuffer {
  std::string buffer;
  uint64_t buffer_bytes = 0;
  uint64_t needed_bytes = 0;  // the largest end among its bounds findings
  uint64_t findings = 0;      // bounds findings on it
  verify::Finding smallest;   // the finding of the smallest pass (fewest tokens, then step)
  uint64_t smallest_tokens = 0;
};

struct VerifyOutcome {
  std::string model;
  RunShape shape;
  Target target;
  std::string sizing;  // of the byte counts, or with --sizes of the sub-layout parameters
  std::optional<SizesFile> sizes_file;
  verify::ConfigReport report;  // findings sorted by their pass's tokens, then step
  PassTokens tokens;
  std::vector<ShortBuffer> short_buffers;  // in registry order
  verify::SlackReport slack;               // of report.high_water against the sizes verified
  // For the suggested next commands: the model option ("--preset X"), the run-shape and
  // target options that differ from the defaults (" --max-batch-tokens 100") and the sizing
  // options that do (" --mutant B4", " --sizing spec", " --sizes FILE").
  std::string model_option;
  std::string shape_and_target_options;
  std::string sizing_options;
  double elapsed_s = 0;
  Capacity capacity;  // the arena against the target's memory: a finding when it does not fit

  bool clean() const { return report.clean() && capacity.fits(); }
};

// Sorts report.findings (stable) and fills short_buffers; call once the report is complete.
void finish_outcome(VerifyOutcome& outcome);

// The human report. `show` bounds how many groups of findings (same check, buffer and op)
// are printed in detail; 0 prints every finding, one by one.
void print_verify_report(std::FILE* out, const VerifyOutcome& outcome, size_t show);
nlohmann::json verify_json(const VerifyOutcome& outcome);

// One finding in detail, each line prefixed by `indent` (the first by `first`).
void print_finding(std::FILE* out, const verify::Finding& f, const std::string& first,
                   const std::string& indent);
nlohmann::json finding_json(const verify::Finding& f);

std::string describe_target(const Target& t);  // "h200 (132 SMs, split-K auto, ...)"

}  // namespace bufferlab::cli
