// `bufferlab fuzz`: random (config, run shape, pass, paths) cases through the verifier and
// the sizing checks until a limit or the first failure, which is shrunk and saved as JSON.
// With --numeric routing|experts|mhc|gdn|ssd|attention, the numerical properties instead
// (fuzz_numeric.h).
// Exit 0 clean, 1 a failure (written under --out), 2 bad input (77: --numeric's backend
// cannot run here).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bufferlab/core/error.h"
#include "bufferlab/properties/fuzz_engine.h"
#include "bufferlab/properties/generators.h"
#include "common/commands.h"
#include "common/parse_number.h"
#include "common/target_options.h"
#include "fuzz/fuzz_numeric.h"
#include "io/json_file.h"
#include "verify/verify_report.h"

namespace bufferlab::cli {
namespace {

struct FuzzCommand {
  TargetOptions target;
  SizingOptions sizing;
  std::string seconds;
  std::string cases;
  std::string seed = "1";
  std::vector<std::string> families;
  std::vector<std::string> pass_kinds;
  std::vector<std::string> stop_on;
  std::string corpus_dir;
  std::string out_dir = "fuzz-out";
  std::string shard;
  CLI::Option* seconds_option = nullptr;
  CLI::Option* cases_option = nullptr;
  CLI::Option* shard_option = nullptr;
  // --numeric routing|experts|mhc|gdn|ssd|attention and the options only it takes.
  std::string numeric;
  std::string backend = "cpu";
  std::string skip;
  CLI::App* app = nullptr;
};

struct Shard {
  uint64_t index = 0, count = 1;
};

// Non-negative decimal seconds: "60", "0.5". No sign, exponent or suffix.
double parse_seconds(const std::string& text) {
  const std::string where = "--seconds = '" + text + "'";
  const bool ok = !text.empty() && text.find_first_not_of("0123456789.") == std::string::npos &&
                  std::count(text.begin(), text.end(), '.') <= 1 && text != ".";
  if (!ok) throw Error(where + ": expected a non-negative number of seconds");
  return std::stod(text);
}

Shard parse_shard(const std::string& what, const std::string& index, const std::string& count) {
  Shard s;
  s.index = parse_u64(what + " index", index);
  s.count = parse_u64(what + " count", count);
  if (s.count == 0) throw Error(what + ": the shard count must be >= 1");
  if (s.index >= s.count)
    throw Error(what + ": shard index " + index + " must be < the shard count " + count);
  return s;
}

// --shard i/n, else the GoogleTest sharding variables (the library reads no environment:
// mapping it onto options is the CLI's job), else the whole case space.
Shard shard_of(const FuzzCommand& cmd) {
  if (cmd.shard_option->count() > 0) {
    const size_t slash = cmd.shard.find('/');
    if (slash == std::string::npos)
      throw Error("--shard = '" + cmd.shard + "': expected INDEX/COUNT, e.g. 0/4");
    return parse_shard("--shard = '" + cmd.shard + "'", cmd.shard.substr(0, slash),
                       cmd.shard.substr(slash + 1));
  }
  const char* index = std::getenv("GTEST_SHARD_INDEX");
  const char* count = std::getenv("GTEST_TOTAL_SHARDS");
  if (index == nullptr && count == nullptr) return {};
  // As GoogleTest does: one of the two without the other is a configuration error.
  if (index == nullptr || count == nullptr)
    throw Error("GTEST_SHARD_INDEX and GTEST_TOTAL_SHARDS must be set together");
  return parse_shard(
      "GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS = '" + std::string(index) + "/" + count + "'", index,
      count);
}

void check_families(const std::vector<std::string>& families) {
  const auto& known = gen::family_names();
  for (const auto& f : families) {
    if (std::find(known.begin(), known.end(), f) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw Error("--family = '" + f + "': unknown family (known: " + list + ")");
  }
}

// The live progress line: rewritten in place on a terminal, one line every ~5 s otherwise
// (a log file should not fill with carriage returns).
class ProgressLine {
 public:
  ProgressLine() : tty_(isatty(fileno(stderr)) != 0) {}

  void update(const fuzz::Progress& p) {
    show(fmt::format("fuzz: {} cases ({} refused), {:.0f} cases/s, {:.1f} s", p.cases, p.refused,
                     p.rate, p.elapsed_s),
         p.elapsed_s);
  }

  void show(const std::string& line, double elapsed_s) {
    if (tty_) {
      fmt::print(stderr, "\r{:<{}}", line, width_);
      width_ = std::max(width_, line.size());
      std::fflush(stderr);
      shown_ = true;
    } else if (elapsed_s >= last_ + 5.0) {
      fmt::print(stderr, "{}\n", line);
      last_ = elapsed_s;
    }
  }

  void finish() {
    if (tty_ && shown_) fmt::print(stderr, "\n");
  }

 private:
  bool tty_;
  bool shown_ = false;
  size_t width_ = 0;
  double last_ = 0;
};

std::string describe_case(const fuzz::FuzzCase& c) {
  return fmt::format(
      "family {}, {} layers, h {}; max_batch_tokens {}, max_seq_len {}, kv_block_size {}, "
      "max_batch_size {}; target {}; pass {}; paths {}",
      c.family, c.config.num_hidden_layers, c.config.hidden_size, c.shape.max_batch_tokens,
      c.shape.max_seq_len, c.shape.kv_block_size, c.shape.max_batch_size, describe_target(c.target),
      c.pass.to_string(), c.paths.to_string());
}

// The shrunk case as fuzz::case_to_json writes it, plus where it came from and what it
// found; the name carries seed, shard and case index so corpora of shards merge by copying.
std::filesystem::path write_failure(const FuzzCommand& cmd, const fuzz::FuzzOptions& opts,
                                    const fuzz::FuzzFailure& f) {
  nlohmann::json j = fuzz::case_to_json(f.shrunk, opts.sizing);
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& x : f.result.findings) findings.push_back(finding_json(x));
  j["seed"] = opts.seed;
  j["shard"] = fmt::format("{}/{}", opts.shard_index, opts.shard_count);
  j["case_index"] = f.case_index;
  j["case_seed"] = f.case_seed;
  j["shrink_steps"] = f.shrink_steps;
  j["failure_kind"] = f.kind;
  j["findings"] = std::move(findings);
  j["sizing_failures"] = f.result.sizing_failures;
  j["errors"] = f.result.errors;
  j["original"] = fuzz::case_to_json(f.original, opts.sizing);
  const std::filesystem::path dir = create_output_dir("--out", cmd.out_dir);
  const std::filesystem::path path =
      dir / fmt::format("fuzz-seed{}-shard{}of{}-case{}.json", opts.seed, opts.shard_index,
                        opts.shard_count, f.case_index);
  write_json_file(path, j);
  return path;
}

void print_result(const fuzz::CaseResult& r) {
  for (size_t i = 0; i < r.findings.size(); ++i)
    print_finding(stdout, r.findings[i], fmt::format("  [{}] ", i + 1), "      ");
  for (const auto& s : r.sizing_failures) fmt::print("  sizing check: {}\n", s);
  for (const auto& e : r.errors) fmt::print("  error: {}\n", e);
}

void print_failure(const fuzz::FuzzOptions& opts, const fuzz::FuzzResult& r,
                   const std::filesystem::path& path) {
  const fuzz::FuzzFailure& f = *r.failure;
  fmt::print(
      "FAIL: case {} of seed {} (shard {}/{}, sizing {}) after {} cases in {:.1f} s: {}; "
      "shrunk in {} steps ({} candidates)\n",
      f.case_index, opts.seed, opts.shard_index, opts.shard_count, opts.sizing.to_string(),
      r.progress.cases, r.progress.elapsed_s, f.kind, f.shrink_steps, f.shrink_checks);
  fmt::print("wrote {}\n", path.string());
  fmt::print("shrunk case: {}\n", describe_case(f.shrunk));
  fmt::print("original:    {}\n", describe_case(f.original));
  print_result(f.result);
}

// A saved case of --corpus failed: it is already on disk, nothing to shrink or write.
void print_corpus_failure(const fuzz::FuzzOptions& opts, const fuzz::FuzzFailure& f) {
  fmt::print("FAIL: saved case {} of {} (sizing {}): {}\n", f.corpus_file, opts.corpus_dir,
             opts.sizing.to_string(), f.kind);
  fmt::print("case: {}\n", describe_case(f.original));
  print_result(f.result);
}

bool given(const FuzzCommand& cmd, const char* option) {
  return cmd.app->get_option(option)->count() > 0;
}

// When a run stops: --seconds (default 60 without --cases), --cases (0: no limit).
struct Limits {
  double seconds = 0;
  uint64_t max_cases = 0;
};

Limits limits_of(const FuzzCommand& cmd) {
  Limits l;
  const bool has_seconds = cmd.seconds_option->count() > 0;
  const bool has_cases = cmd.cases_option->count() > 0;
  l.seconds = has_seconds ? parse_seconds(cmd.seconds) : has_cases ? 0.0 : 60.0;
  if (has_cases) {
    l.max_cases = parse_u64("--cases", cmd.cases);
    if (l.max_cases == 0) throw Error("--cases = 0: give at least one case");
  }
  if (l.seconds == 0 && l.max_cases == 0)
    throw Error("--seconds 0 without --cases: the run would never stop");
  return l;
}

// --numeric: the options of the plan fuzz that mean nothing there are refused, as are
// --backend and --skip without it.
int run_numeric(const FuzzCommand& cmd) {
  for (const char* option : {"--family", "--pass-kind", "--stop-on", "--corpus", "--target",
                             "--splitk", "--q2-dequant", "--q2-mmq", "--sizing"})
    if (given(cmd, option))
      throw Error(std::string(option) + " applies to the plan fuzz, not to --numeric");
  check_numeric_family(cmd.numeric);
  NumericFuzzOptions opts;
  opts.family = cmd.numeric;
  opts.backend = cmd.backend;
  if (given(cmd, "--mutant")) opts.mutant = cmd.app->get_option("--mutant")->as<std::string>();
  const Limits limits = limits_of(cmd);
  opts.seconds = limits.seconds;
  opts.max_cases = limits.max_cases;
  opts.seed = parse_u64("--seed", cmd.seed);
  if (given(cmd, "--skip")) opts.skip = parse_u64("--skip", cmd.skip);
  const Shard shard = shard_of(cmd);
  opts.shard_index = shard.index;
  opts.shard_count = shard.count;
  opts.out_dir = cmd.out_dir;

  ProgressLine progress;
  return run_numeric_fuzz(opts, [&progress, &opts](const NumericProgress& p) {
    progress.show(fmt::format("fuzz --numeric {}: {} cases, {} failures, {:.1f} cases/s, {:.1f} s",
                              opts.family, p.cases, p.failures, p.rate, p.elapsed_s),
                  p.elapsed_s);
    if (p.done) progress.finish();
  });
}

int run_fuzz(const FuzzCommand& cmd) {
  if (given(cmd, "--numeric")) return run_numeric(cmd);
  for (const char* option : {"--backend", "--skip"})
    if (given(cmd, option)) throw Error(std::string(option) + " applies only to --numeric");
  fuzz::FuzzOptions opts;
  const Limits limits = limits_of(cmd);
  opts.seconds = limits.seconds;
  opts.max_cases = limits.max_cases;
  opts.seed = parse_u64("--seed", cmd.seed);
  check_families(cmd.families);
  opts.families = cmd.families;
  for (const auto& k : cmd.pass_kinds) opts.pass_kinds.push_back(plan::pass_kind_from_string(k));
  if (!cmd.stop_on.empty())
    opts.accept = [kinds = cmd.stop_on](const std::string& kind) {
      return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
    };
  opts.corpus_dir = cmd.corpus_dir;
  if (!opts.corpus_dir.empty() && !std::filesystem::is_directory(opts.corpus_dir))
    throw Error("--corpus " + opts.corpus_dir + ": not a directory");
  opts.sizing = cmd.sizing.sizing();
  opts.target = cmd.target.target();
  // A target flag on the command line pins the target; otherwise cases draw their own.
  opts.vary_target = !cmd.target.given();
  const Shard shard = shard_of(cmd);
  opts.shard_index = shard.index;
  opts.shard_count = shard.count;

  ProgressLine progress;
  opts.on_progress = [&progress](const fuzz::Progress& p) { progress.update(p); };
  const fuzz::FuzzResult r = fuzz::run(opts);
  progress.finish();

  if (r.failure && !r.failure->corpus_file.empty()) {
    print_corpus_failure(opts, *r.failure);
    return 1;
  }
  if (r.failure) {
    print_failure(opts, r, write_failure(cmd, opts, *r.failure));
    return 1;
  }
  const std::string others = cmd.stop_on.empty()
                                 ? std::string()
                                 : fmt::format(" of the kinds stopped on ({} other failing cases)",
                                               r.progress.other_failures);
  fmt::print(
      "fuzz: {} cases ({} refused) in {:.1f} s, {:.0f} cases/s, seed {}, shard {}/{}, "
      "sizing {}: no failure{}\n",
      r.progress.cases, r.progress.refused, r.progress.elapsed_s, r.progress.rate, opts.seed,
      opts.shard_index, opts.shard_count, opts.sizing.to_string(), others);
  return 0;
}

}  // namespace

void register_fuzz_command(CLI::App& app) {
  auto cmd = std::make_shared<FuzzCommand>();
  CLI::App* sub = app.add_subcommand(
      "fuzz", "verify random configs, run shapes, passes and paths; save the first failure");
  cmd->seconds_option = sub->add_option("--seconds", cmd->seconds,
                                        "stop after N seconds (default 60 without --cases)")
                            ->type_name("N");
  cmd->cases_option = sub->add_option("--cases", cmd->cases, "stop after N cases")->type_name("N");
  sub->add_option("--seed", cmd->seed, "seed of the case sequence")
      ->type_name("S")
      ->capture_default_str();
  sub->add_option("--family", cmd->families, "only these config families (default: all)")
      ->type_name("NAME");
  sub->add_option(
         "--pass-kind", cmd->pass_kinds,
         "only these pass kinds: prefill, decode, verify, mixed, codispatch (default: all)")
      ->type_name("KIND");
  sub->add_option("--stop-on", cmd->stop_on,
                  "stop only at failures of these kinds, as printed: CHECK:BUFFER "
                  "(overlap:scratch), sizing:CHECK or error; other failing cases are counted")
      ->type_name("KIND");
  sub->add_option("--corpus", cmd->corpus_dir,
                  "check the saved cases (*.json) of DIR first, e.g. earlier --out directories")
      ->type_name("DIR");
  cmd->target.add_options(*sub);
  cmd->sizing.add_options(*sub);
  sub->add_option("--out", cmd->out_dir, "directory the failing case is written to")
      ->type_name("DIR")
      ->capture_default_str();
  cmd->shard_option =
      sub->add_option("--shard", cmd->shard,
                      "check only shard i of n of the case space (default: GTEST_SHARD_INDEX / "
                      "GTEST_TOTAL_SHARDS when set, else all)")
          ->type_name("i/n");
  sub->add_option("--numeric", cmd->numeric,
                  "fuzz the numerical properties of routing (router -> top-k), experts (the "
                  "routed-expert chain), mhc (every mHC op, both low-rank paths, the deep "
                  "stack), gdn (Gated DeltaNet, chunked and recurrent), ssd (Mamba-2 SSD, "
                  "chunked and recurrent) or attention (grouped-query attention prefill, decode, "
                  "verify and mixed passes over a paged KV cache) at their full ranges on "
                  "--backend, instead of plans")
      ->type_name("FAMILY");
  sub->add_option(
         "--backend", cmd->backend,
         "--numeric: cpu, cuda or cuda-sim (the CUDA kernels on the kernel simulator; default cpu)")
      ->type_name("NAME");
  sub->add_option("--skip", cmd->skip,
                  "--numeric: start at case index N (with --cases 1: re-run case N alone)")
      ->type_name("N");
  cmd->app = sub;
  sub->callback([cmd] { exit_code() = run_fuzz(*cmd); });
}

}  // namespace bufferlab::cli
