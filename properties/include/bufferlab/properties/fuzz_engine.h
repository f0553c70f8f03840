// The config-space fuzzer behind `bufferlab fuzz` and the mutation test: draws random
// (config, run shape, launchable pass, paths) cases from the generators, verifies each, and
// shrinks the first failure to a minimal case.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/plan/pass.h"
#include "bufferlab/core/plan/paths.h"
#include "bufferlab/core/run_shape.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/target.h"
#include "bufferlab/core/verify/check.h"

namespace bufferlab::fuzz {

struct FuzzCase {
  ModelConfig config;
  RunShape shape;
  Target target;
  plan::Pass pass;
  plan::Paths paths;
  std::string family;  // generator family the config came from
};

// What a case found: verifier findings of its plan, plus failures of the config-level
// sizing checks (ledger, layout, arena independent of the layer count).
struct CaseResult {
  std::vector<verify::Finding> findings;
  std::vector<std::string> sizing_failures;
  bool refused = false;  // the engine refuses the pass (not a failure)
  // Exceptions thrown while sizing, planning or checking a valid case (a failure too: the
  // generators only draw valid configs and launchable passes).
  std::vector<std::string> errors;
  bool failed() const { return !findings.empty() || !sizing_failures.empty() || !errors.empty(); }
};

CaseResult check_case(const FuzzCase& c, const Sizing& sizing);

// The failure kinds of a result, in order: "<check>:<buffer>" per finding
// ("overlap:scratch"), "sizing:<check>" per failed sizing check ("sizing:ledger"), "error"
// per exception. Shrinking keeps the kind of the failure it started from.
std::vector<std::string> failure_kinds(const CaseResult& r);
bool has_failure_kind(const CaseResult& r, const std::string& kind);

struct Progress {
  uint64_t cases = 0;
  uint64_t refused = 0;
  double elapsed_s = 0;
  double rate = 0;              // cases per second
  uint64_t other_failures = 0;  // failing cases whose kinds FuzzOptions::accept rejected
};

struct FuzzOptions {
  uint64_t seed = 0;
  uint64_t max_cases = 0;             // 0: no limit
  double seconds = 0;                 // 0: no limit (at least one of the two limits must be set)
  std::vector<std::string> families;  // empty: all
  Sizing sizing = Sizing::corrected();
  Target target;            // base target: q2 flags, split-K policy, SM count from the CLI
  bool vary_target = true;  // also draw named targets / split-K policies / Q2 flags
  uint64_t shard_index = 0, shard_count = 1;  // this process checks cases i with i % count == index
  std::function<void(const Progress&)> on_progress;  // called about every 0.5 s

  std::vector<plan::PassKind> pass_kinds;  // empty: every kind
  // Which failure kinds (see failure_kinds) stop the run; empty: every failure. Cases that
  // fail only with other kinds are counted in Progress::other_failures and skipped (the
  // mutation test looks for one expected finding).
  std::function<bool(const std::string& kind)> accept;
  // Shrinking budget: checks of candidate cases, and seconds.
  uint64_t max_shrink_checks = 3000;
  double shrink_seconds = 30;
  // Saved cases (case_to_json files, *.json, name order) checked before the random ones;
  // empty: none.
  std::string corpus_dir;
};

struct FuzzFailure {
  FuzzCase original;
  FuzzCase shrunk;
  CaseResult result;  // of the shrunk case
  uint64_t case_index = 0;
  uint64_t case_seed = 0;  // reproduces `original` alone
  uint64_t shrink_steps = 0;
  uint64_t shrink_checks = 0;  // candidate cases checked while shrinking
  std::string kind;            // the failure kind shrinking kept (failure_kinds)
  std::string corpus_file;     // set when a saved case of corpus_dir failed (not shrunk)
};

struct FuzzResult {
  Progress progress;
  std::optional<FuzzFailure> failure;
};

// Cases 0 ≤ i < max_cases (all shards together), those with i % shard_count == shard_index
// checked here. Throws Error when neither limit is set or the shard is malformed.
FuzzResult run(const FuzzOptions& opts);

// The seed of case i of a run seeded `seed`, and the case it draws under `opts` (families,
// pass kinds, target): generate_case(opts, case_seed(opts.seed, i)) is case i of run(opts).
uint64_t case_seed(uint64_t seed, uint64_t i);
FuzzCase generate_case(const FuzzOptions& opts, uint64_t case_seed);

// Cases as JSON: {"bufferlab_case": 1, "family", "config": <normalized config>, "shape",
// "target", "pass", "paths", "sizing"}; from_json accepts what to_json writes.
nlohmann::json case_to_json(const FuzzCase& c, const Sizing& sizing);
FuzzCase case_from_json(const nlohmann::json& j);
// The "sizing" of a case JSON ("corrected", "spec", "corrected+B8"); corrected when absent.
Sizing case_sizing_from_json(const nlohmann::json& j);
// The saved cases of a directory (*.json, name order) as (file name, JSON).
std::vector<std::pair<std::string, nlohmann::json>> load_corpus(const std::string& dir);

}  // namespace bufferlab::fuzz
