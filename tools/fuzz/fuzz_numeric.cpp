// `bufferlab fuzz --numeric routing|experts|mhc|gdn|ssd|attention` (see fuzz_numeric.h): cases
// drawn from the property generators at their full ranges — the routing generator of
// properties/routing_generators.h with the ranges of
// tests/slow/numeric/test_routing_full_range.cpp, an expert-chain generator modelled on
// tests/property/test_moe_ffn_properties.cpp's, widened to real model sizes, the mHC generators
// (fuzz_numeric_mhc.cpp), the GDN / SSD generators (fuzz_numeric_gdn_mamba2.cpp) and the
// attention pass generator (fuzz_numeric_attention.cpp) — run on a backend and judged by the
// oracle's judges.
#include "fuzz/fuzz_numeric.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <rapidcheck.h>
#include <nlohmann/json.hpp>

#include "bufferlab/backends/backend_factory.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "bufferlab/oracle/moe_ffn_inputs.h"
#include "bufferlab/oracle/moe_ffn_judge.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/oracle/routing_judge.h"
#include "bufferlab/oracle/seeded_random.h"
#include "bufferlab/properties/expert_chain_generators.h"
#include "bufferlab/properties/fuzz_engine.h"
#include "bufferlab/properties/routing_generators.h"
#include "common/backend_bounds.h"
#include "common/stopwatch.h"
#include "compare/compare_report.h"
#include "compare/compare_table.h"
#include "fuzz/fuzz_numeric_attention.h"
#include "fuzz/fuzz_numeric_gdn_mamba2.h"
#include "fuzz/fuzz_numeric_mhc.h"
#include "io/json_file.h"

namespace bufferlab::cli {
namespace {

using U = uint64_t;

// The expert chain: gen::full_expert_chain_ranges — oracle work T·top_k·(3·I·D + D) ≤ 2^28
// multiply-adds, and the expert weights E·3·I·D ≤ 2^26 elements (128 MiB of BF16: one
// DeepSeek-V3-sized expert, 3·2048·7168, fits; the host copy, the pool and the read-back
// copies stay well under a GiB).

// As the plan fuzz: three cases in four at RapidCheck's full size (every inRange over its
// whole range), one in four at a size drawn from the seed, so small cases come up often.
int case_size(uint64_t seed) {
  return (seed >> 62) == 0 ? static_cast<int>((seed >> 32) % (rc::kNominalSize + 1))
                           : rc::kNominalSize;
}

// ---- Routing ----

enum class RoutingCheck { chain, topk, topk_nonfinite };

// Each check's name and what it runs, in the enum's order.
struct RoutingCheckInfo {
  const char* name;
  const char* description;
};
constexpr RoutingCheckInfo kRoutingChecks[] = {
    {"chain", "router -> top-k on the case's path, judge_routing_chain"},
    {"topk", "top-k alone on stored logits with exact ties, judge_topk"},
    {"topk-nonfinite", "top-k alone on stored logits with NaN / +-Inf, judge_topk"}};

const char* to_string(RoutingCheck c) { return kRoutingChecks[static_cast<size_t>(c)].name; }

const char* check_description(RoutingCheck c) {
  return kRoutingChecks[static_cast<size_t>(c)].description;
}

// Half the cases run the chain (its path drawn by the generator: bf16, fp32-gate,
// fp32-routing), a quarter each the top-k alone without and with non-finite logits.
RoutingCheck routing_check(uint64_t cs) {
  switch (oracle::splitmix64_hash(cs ^ 0x5a5a5a5a5a5a5a5aull) % 4) {
    case 2:
      return RoutingCheck::topk;
    case 3:
      return RoutingCheck::topk_nonfinite;
    default:
      return RoutingCheck::chain;
  }
}

struct Outcome {
  bool passed = true;
  std::string what;    // "chain fp32-gate: gate_logits_f32" — names the failure
  std::string report;  // format_verdict / format_report, or the error
  std::optional<oracle::AgreementReport> agreement;
};

// `what` names the check and path, then the first failing comparison.
Outcome routing_outcome(const oracle::RoutingVerdict& v, const std::string& what) {
  const auto* bad = v.report.first_failure();
  return {v.passed(), bad ? what + ": " + bad->name : what, oracle::format_verdict(v), v.report};
}

Outcome run_routing_case(Backend& backend, const gen::RoutingCase& c, RoutingCheck check) {
  const auto ops = oracle::make_routing_ops(c.config, c.rows, c.precision, c.hash);
  const gen::RoutingTensors t = gen::routing_tensors(c);
  const oracle::TopKHostInputs tin{t.bias, t.token_ids, t.tid2eid};
  const Workspace ws = backend.allocate(oracle::routing_footprint_layout(ops), ops.pool_bytes);
  const std::string what = fmt::format("{} {}", to_string(check), to_string(c.precision));
  if (check == RoutingCheck::chain) {
    const oracle::RouterInputs rin{t.x_bf16, t.x_f32, t.weight};
    const auto out = oracle::run_routing_chain(backend, ws, ops, rin, tin);
    const double u = bounds_of(backend).gemm_u;
    return routing_outcome(
        oracle::judge_routing_chain(ops, rin, tin, out, u, backend.name(), c.seed), what);
  }
  oracle::StoredLogits logits;
  for (float v : gen::topk_logits(c, check == RoutingCheck::topk_nonfinite)) {
    if (c.precision == RouterPrecision::bf16)
      logits.bf16.push_back(f32_to_bf16_bits(v));
    else
      logits.f32.push_back(v);
  }
  const auto out = oracle::run_topk(backend, ws, ops.topk, logits, tin);
  Outcome o =
      routing_outcome(oracle::judge_topk(ops.topk, logits, tin, out, backend.name(), c.seed), what);
  if (check == RoutingCheck::topk_nonfinite && o.passed) {
    // The NaN keys the kernel reports equal the oracle's count (the defined NaN order).
    const auto ref =
        oracle::select_topk(ops.topk, {logits.values(), tin.bias, tin.token_ids, tin.tid2eid});
    if (out.diagnostics.nan_keys != ref.nan_keys) {
      o.passed = false;
      o.what += ": nan_keys count";
      o.report += fmt::format("nan_keys: the backend reported {}, the oracle counts {}\n",
                              out.diagnostics.nan_keys, ref.nan_keys);
    }
  }
  return o;
}

// ---- The routed-expert chain ----

Outcome run_expert_case(Backend& backend, const gen::ExpertChainCase& c) {
  const auto chain = oracle::ExpertChain::make(c.config, c.rows, c.hash);
  const uint64_t cap = gen::full_expert_chain_ranges().cost_cap;
  if (oracle::expert_chain_cost(chain) > cap)
    throw Error(fmt::format("expert case over the cost cap: {} > {}",
                            oracle::expert_chain_cost(chain), cap));
  const auto in =
      oracle::generate_expert_chain_inputs(chain, c.seed, c.routing, c.act, c.weight_wide);
  const Workspace ws = oracle::allocate_footprint(backend, chain);
  const auto run = oracle::run_expert_chain(backend, ws, chain, in);
  const auto bounds = bounds_of(backend);
  auto report = oracle::judge_expert_chain(chain, in, run, backend.name(), c.seed, bounds);
  const auto* bad = report.first_failure();
  const std::string what = bad ? "chain: " + bad->name : "chain";
  return {report.passed(), what, oracle::format_report(report), std::move(report)};
}

// ---- One case of either family ----

struct DrawnCase {
  std::string description;  // the generator's describe()
  std::string check;        // routing: chain / topk / topk-nonfinite; experts: chain
  std::string check_description;
  Outcome outcome;
  // gdn / ssd: the case's model in the normalized config form and the `compare` options that
  // re-run it from that config (fuzz_numeric_gdn_mamba2.h); null / empty otherwise.
  nlohmann::json config;
  std::string compare_options;
};

// A family runner's outcome as the drawn case's.
void take(DrawnCase& d, NumericCaseOutcome&& m) {
  d.description = std::move(m.description);
  d.check = std::move(m.check);
  d.check_description = std::move(m.check_description);
  d.outcome = {m.passed, std::move(m.what), std::move(m.report), std::move(m.agreement)};
}

DrawnCase draw_and_run(const std::string& family, Backend& backend, uint64_t cs) {
  DrawnCase d;
  const rc::Random random(cs);
  const int size = case_size(cs);
  const NumericFamily f = find_numeric_family(family)->family;  // checked by the caller
  if (f == NumericFamily::gdn || f == NumericFamily::ssd) {
    try {
      GdnMamba2FuzzOutcome m =
          f == NumericFamily::gdn
              ? run_gdn_fuzz_case(backend, cs, size, backend.kernel_mutant())
              : run_mamba2_fuzz_case(backend, cs, size, backend.kernel_mutant());
      d.config = std::move(m.config);
      d.compare_options = std::move(m.compare_options);
      take(d, std::move(m));
    } catch (const std::exception& e) {
      d.check = family;
      d.outcome = {false, "error", std::string("error: ") + e.what() + "\n", std::nullopt};
    }
  } else if (f == NumericFamily::attention) {
    try {
      take(d, run_attention_fuzz_case(backend, cs, size));
    } catch (const std::exception& e) {  // drawing the case
      d.check = "attention";
      d.outcome = {false, "error", std::string("error: ") + e.what() + "\n", std::nullopt};
    }
  } else if (f == NumericFamily::mhc) {
    try {
      MhcFuzzOutcome m = run_mhc_fuzz_case(backend, cs, size, backend.kernel_mutant());
      take(d, std::move(m));
    } catch (const std::exception& e) {
      d.check = "mhc";
      d.outcome = {false, "error", std::string("error: ") + e.what() + "\n", std::nullopt};
    }
  } else if (f == NumericFamily::routing) {
    const gen::RoutingCase c = gen::routing_case(gen::full_routing_ranges())(random, size).value();
    const RoutingCheck check = routing_check(cs);
    d.description = c.describe();
    d.check = to_string(check);
    d.check_description = check_description(check);
    try {
      d.outcome = run_routing_case(backend, c, check);
    } catch (const std::exception& e) {
      d.outcome = {false, "error", std::string("error: ") + e.what() + "\n", std::nullopt};
    }
  } else {
    const gen::ExpertChainCase c =
        gen::expert_chain_case(gen::full_expert_chain_ranges())(random, size).value();
    d.description = c.describe();
    d.check = "chain";
    d.check_description =
        "gather -> gate -> up -> SwiGLU -> down -> combine, judge_expert_chain (" +
        std::string(backend.name() == "cpu" ? "cpu_bounds" : "device_bounds") + ")";
    try {
      d.outcome = run_expert_case(backend, c);
    } catch (const std::exception& e) {
      d.outcome = {false, "error", std::string("error: ") + e.what() + "\n", std::nullopt};
    }
  }
  return d;
}

std::string rerun_line(const NumericFuzzOptions& o, uint64_t index) {
  std::string line = fmt::format("bufferlab fuzz --numeric {} --seed {} --skip {} --cases 1",
                                 o.family, o.seed, index);
  if (o.backend != "cpu") line += " --backend " + o.backend;
  if (!o.mutant.empty()) line += " --mutant " + o.mutant;
  return line;
}

// gdn / ssd: the case's config beside the failure (`<stem>.config.json`) and the compare
// command that re-runs the case from it; empty when the case has no config.
std::string write_case_config(const std::filesystem::path& failure, const DrawnCase& d) {
  if (d.config.is_null()) return {};
  std::filesystem::path path = failure;
  path.replace_extension(".config.json");
  write_json_file(path, d.config);
  return d.compare_options.empty()
             ? std::string()
             : "bufferlab compare --config " + path.string() + " " + d.compare_options;
}

std::filesystem::path write_failure(const NumericFuzzOptions& o, uint64_t index, uint64_t cs,
                                    const DrawnCase& d) {
  nlohmann::json j;
  j["bufferlab_numeric_case"] = 1;
  j["numeric"] = o.family;
  j["check"] = d.check;
  j["check_description"] = d.check_description;
  j["case"] = d.description;
  j["seed"] = o.seed;
  j["shard"] = fmt::format("{}/{}", o.shard_index, o.shard_count);
  j["case_index"] = index;
  j["case_seed"] = cs;
  j["case_size"] = case_size(cs);
  j["backend"] = o.backend;
  j["mutant"] = o.mutant.empty() ? "none" : o.mutant;
  j["failure"] = d.outcome.what;
  j["report"] = d.outcome.report;
  if (d.outcome.agreement) j["agreement"] = report_json(*d.outcome.agreement);
  j["rerun"] = rerun_line(o, index);
  const std::filesystem::path dir = create_output_dir("--out", o.out_dir);
  const std::filesystem::path path =
      dir / fmt::format("fuzz-numeric-{}-seed{}-shard{}of{}-case{}.json", o.family, o.seed,
                        o.shard_index, o.shard_count, index);
  if (!d.config.is_null()) {
    j["config"] = d.config;
    const std::string compare = write_case_config(path, d);
    if (!compare.empty()) j["compare_rerun"] = compare;
  }
  write_json_file(path, j);
  return path;
}

// Opens the backend with the mutant; null when it cannot run here (the reason printed).
std::unique_ptr<Backend> open_backend(const NumericFuzzOptions& o) {
  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend(o.backend);
  } catch (const BackendUnavailable& e) {
    fmt::print("skipped: {}\n", e.what());
    return nullptr;
  }
  if (!o.mutant.empty()) backend->set_kernel_mutant(mutant_from_string(o.mutant));
  return backend;
}

// A kernel mutant is only fuzzed by the family that runs the kernels it changes — elsewhere a
// clean run would prove nothing: B14 (the router's logit store) and M-TIE (the top-k's tie
// order) change the routing kernels, B13 (hc_post's stream store), M-SKCOL (mhc_pre's final
// column normalisation) and M-SKORDER (its loop order) the mHC kernels, M-GDNCARRY (the GDN state
// pass's carry) the GDN kernels and M-SSDSTATE (the SSD scan's state between chunks) the SSD
// kernels; the expert chain runs none.
void check_numeric_mutant(const std::string& family, const std::string& mutant) {
  const Mutant m = mutant_from_string(mutant);  // Error for an unknown id
  if (!Backend::is_backend_mutant(m) || m == Mutant::none) {
    std::string kernel;
    for (Mutant k : compare_kernel_mutants())
      kernel += (kernel.empty() ? "" : ", ") + std::string(to_string(k));
    throw Error("--mutant " + mutant + ": --numeric takes a kernel mutant of the backend (" +
                kernel + ")");
  }
  const NumericFamily owner_family = family_of_kernel_mutant(m);
  const NumericFamilyInfo* owner = nullptr;
  for (const NumericFamilyInfo& f : numeric_families())
    if (f.family == owner_family) owner = &f;
  if (owner == nullptr) throw Error("--mutant " + mutant + ": no --numeric family runs it");
  if (family != owner->name)
    throw Error(fmt::format(
        "--mutant {} changes the {} kernels; --numeric {} runs none of them (use --numeric {})",
        mutant, owner->kernels, family, owner->name));
}

}  // namespace

std::string numeric_families_list() {
  std::string list;
  for (const NumericFamilyInfo& f : numeric_families())
    list += (list.empty() ? "" : ", ") + std::string(f.name);
  return list;
}

void check_numeric_family(const std::string& family) {
  if (find_numeric_family(family) == nullptr)
    throw Error("--numeric = '" + family +
                "': unknown numeric family (known: " + numeric_families_list() + ")");
}

int run_numeric_fuzz(const NumericFuzzOptions& o,
                     const std::function<void(const NumericProgress&)>& on_progress) {
  check_numeric_family(o.family);
  if (o.max_cases == 0 && o.seconds <= 0)
    throw Error("fuzz --numeric: set --cases or --seconds (at least one limit)");
  if (o.shard_count == 0 || o.shard_index >= o.shard_count)
    throw Error(fmt::format("fuzz: shard {} of {} is not a shard", o.shard_index, o.shard_count));
  if (!o.mutant.empty()) check_numeric_mutant(o.family, o.mutant);
  const std::unique_ptr<Backend> backend = open_backend(o);
  if (!backend) return 77;

  const Stopwatch run;
  NumericProgress p;
  auto update = [&] {
    p.elapsed_s = run.seconds();
    p.rate = p.elapsed_s > 0 ? static_cast<double>(p.cases) / p.elapsed_s : 0;
  };
  Stopwatch last_report;
  // The first index of this shard at or after skip.
  uint64_t first =
      o.skip + (o.shard_index + o.shard_count - o.skip % o.shard_count) % o.shard_count;
  for (uint64_t i = first;; i += o.shard_count) {
    if (o.max_cases > 0 && i >= o.skip + o.max_cases) break;
    if (o.seconds > 0 && run.seconds() >= o.seconds) break;
    const uint64_t cs = fuzz::case_seed(o.seed, i);  // the plan fuzz's derivation
    DrawnCase d;
    try {
      d = draw_and_run(o.family, *backend, cs);
    } catch (const KernelCheckFailure& e) {  // the kernel simulator's checkers (cuda-sim)
      d.check = o.family;
      d.outcome = {false, "kernel check", std::string(e.what()), std::nullopt};
    }
    ++p.cases;
    if (!d.outcome.passed) {
      ++p.failures;
      update();
      p.done = true;
      if (on_progress) on_progress(p);
      const std::filesystem::path path = write_failure(o, i, cs, d);
      fmt::print(
          "FAIL: case {} of seed {} (numeric {}, shard {}/{}, backend {}{}) after {} cases in "
          "{:.1f} s: {}\n",
          i, o.seed, o.family, o.shard_index, o.shard_count, backend->name(),
          o.mutant.empty() ? "" : ", mutant " + o.mutant, p.cases, p.elapsed_s, d.outcome.what);
      fmt::print("wrote {}\n", path.string());
      fmt::print("case:  {}\n", d.description);
      fmt::print("check: {} ({})\n", d.check, d.check_description);
      fmt::print("{}", d.outcome.report);
      if (const std::string a = cuda_sim_activity(); !a.empty()) fmt::print("cuda-sim: {}\n", a);
      fmt::print("re-run: {}\n", rerun_line(o, i));
      if (!d.config.is_null() && !d.compare_options.empty()) {
        std::filesystem::path config = path;
        config.replace_extension(".config.json");
        fmt::print("compare: bufferlab compare --config {} {}\n", config.string(),
                   d.compare_options);
      }
      return 1;
    }
    if (on_progress && last_report.seconds() >= 0.5) {
      last_report = Stopwatch();
      update();
      on_progress(p);
    }
  }
  update();
  p.done = true;
  if (on_progress) on_progress(p);
  if (const std::string a = cuda_sim_activity(); !a.empty()) fmt::print("cuda-sim: {}\n", a);
  fmt::print(
      "fuzz --numeric {}: {} cases in {:.1f} s, {:.1f} cases/s, seed {}, shard {}/{}, backend "
      "{}{}: no failure\n",
      o.family, p.cases, p.elapsed_s, p.rate, o.seed, o.shard_index, o.shard_count, backend->name(),
      o.mutant.empty() ? "" : ", mutant " + o.mutant);
  return 0;
}

}  // namespace bufferlab::cli
