// `bufferlab compare`: runs one op on a backend over the real arena of a model (sized by
// BufferSizes::from_config, laid out by Layout::build, poisoned), judges it against the FP64
// oracle and prints the agreement report. Exit codes: 0 agree, 1 disagree, 2 error, 77 skipped
// (the backend cannot run here).
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bufferlab/backends/backend_factory.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/oracle/rmsnorm_harness.h"
#include "bufferlab/oracle/rmsnorm_inputs.h"
#include "bufferlab/oracle/rmsnorm_judge.h"
#include "commands.h"
#include "compare_dump.h"
#include "compare_ops.h"
#include "compare_report.h"
#include "human_bytes.h"
#include "model_source.h"
#include "parse_number.h"

namespace bufferlab::cli {
namespace {

constexpr int kExitAgree = 0;
constexpr int kExitDisagree = 1;
constexpr int kExitSkipped = 77;  // the automake / CTest convention for "skipped"

struct NamedVariant {
  const char* name;
  RmsNormVariant variant;
};

// {add_residual, write_f32, unit_weight}
constexpr NamedVariant kVariants[] = {
    {"add", {true, false, false}},
    {"f32", {true, true, false}},
    {"unit", {true, false, true}},
    {"norm", {false, false, false}},
};

constexpr const char* kFooter = R"(ops:
  rmsnorm   fused residual add + RMSNorm, y = r * rsqrt(mean(r^2) + eps) * (1 + w)
  router    router GEMM logits = x Wg^T on --path (MoE models)
  topk      router -> top-k selection on --path: ids + weights in scratch, judged on the
            stored logits (tie-stability bounds, exact ties to the lower index) and, for the
            chain, against the oracle keys of the exact logits of the router's stored inputs;
            prints the first token whose selection differs from the oracle's
  experts   routed experts: gather -> gate -> up -> SwiGLU -> down -> combine on seeded
            routing, every stage judged on its stored inputs (only the selected experts get
            weights)
  lm-head   LM head: logits rows = x W_vocab^T (one row per token)
router paths (--path, router and topk): bf16 (default), fp32-gate, fp32-routing
inputs (--pattern, router and topk): random (default), duplicated-rows, perturbed-rows,
            all-equal, bf16-ulp-apart, near-ties
kernel mutants (--mutant): B14 (FP32 paths store BF16-rounded logits), M-TIE (top-k ties to
            the higher index): the catalogue's bugs, for demonstrating a catch
variants (--variant, rmsnorm):
  add       residual = bf16(residual + x); norm_output = bf16(RMSNorm(stored residual)) (default)
  f32       as add, and the FP32 normed row into moe_router_in_f32 (MoE models only: the
            buffer is sized for the router input only when num_experts > 0)
  unit      as add, with the unit weight norm_unit_w (zeros: scale 1 + 0)
  norm      RMSNorm of residual alone, no add (residual is read only)
checks: the stored residual exactly; norm_output and moe_router_in_f32 against the FP64
oracle fed the backend's stored residual, under the derived bounds printed with the report.
exit codes: 0 agree, 1 disagree, 2 error, 77 skipped (backend unavailable here).)";

struct CompareCommand {
  ModelSource model;
  std::string op = "rmsnorm";
  std::string tokens = "16";
  std::string seed = "1";
  std::string backend = "cpu";
  std::string variant = "add";
  std::string path = "bf16";
  std::string pattern = "random";
  std::string mutant = "none";
  bool hash = false;
  std::string dump_dir;
  bool json = false;
  bool from_preset = true;  // --preset (not --config) was given; set when the command runs
};

RmsNormVariant parse_variant(const std::string& name) {
  for (const auto& v : kVariants)
    if (name == v.name) return v.variant;
  throw Error("--variant: unknown variant '" + name + "' (known: add, f32, unit, norm)");
}

std::string rerun_line(const CompareCommand& c, uint64_t seed) {
  std::string line =
      fmt::format("bufferlab compare --op {} --{} {} --tokens {} --seed {} --backend {}", c.op,
                  c.from_preset ? "preset" : "config", c.model.label(), c.tokens, seed, c.backend);
  if (c.op == "rmsnorm") line += " --variant " + c.variant;
  if (c.op == "router" || c.op == "topk") {
    line += " --path " + c.path + " --pattern " + c.pattern;
    if (c.hash) line += " --hash";
  }
  if (c.mutant != "none") line += " --mutant " + c.mutant;
  return line;
}

using OpRunner = CompareResult (*)(Backend&, const CompareSetup&);

OpRunner moe_runner(const std::string& op) {
  if (op == "router") return compare_router;
  if (op == "topk") return compare_topk;
  if (op == "experts") return compare_experts;
  if (op == "lm-head") return compare_lm_head;
  return nullptr;
}

// Opens the backend, or reports "skipped" (exit 77) and returns null.
std::unique_ptr<Backend> open_backend(const CompareCommand& c) {
  try {
    std::unique_ptr<Backend> backend = make_backend(c.backend);
    if (c.mutant != "none") backend->set_kernel_mutant(mutant_from_string(c.mutant));
    return backend;
  } catch (const BackendUnavailable& e) {
    if (c.json)
      fmt::print("{}\n", nlohmann::json{{"skipped", true}, {"reason", e.what()}}.dump(2));
    else
      fmt::print("skipped: {}\n", e.what());
    exit_code() = kExitSkipped;
    return nullptr;
  }
}

void run_moe_compare(const CompareCommand& c, OpRunner runner) {
  const uint64_t tokens = parse_u64("--tokens", c.tokens);
  if (tokens == 0) throw Error("--tokens 0: a pass needs at least one token");
  CompareSetup s;
  s.seed = parse_u64("--seed", c.seed);
  s.config = c.model.load();
  s.model_label = c.model.label();
  s.tokens = tokens;
  RunShape shape;
  shape.max_batch_tokens = tokens;
  s.layout = Layout::build(BufferSizes::from_config(s.config, shape));
  s.path = c.path;
  s.pattern = c.pattern;
  s.hash = c.hash;
  s.dump_dir = c.dump_dir;
  std::unique_ptr<Backend> backend = open_backend(c);
  if (!backend) return;
  const CompareResult r = runner(*backend, s);
  if (c.json) {
    nlohmann::json j = report_json(r.report);
    j["model"] = s.model_label;
    j["tokens"] = tokens;
    j["arena_bytes"] = s.layout.arena_bytes();
    j["weight_pool_bytes"] = r.weight_pool_bytes;
    j["mutant"] = c.mutant;
    for (const auto& [key, value] : r.extra_json.items()) j[key] = value;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}\n", r.header);
    if (c.mutant != "none") fmt::print("kernel mutant {} is active on the backend\n", c.mutant);
    fmt::print("{}", oracle::format_report(r.report));
    fmt::print("{}", r.details);
    fmt::print("re-run: {}\n", rerun_line(c, s.seed));
  }
  exit_code() = r.report.passed() ? kExitAgree : kExitDisagree;
}

void run_compare(const CompareCommand& c) {
  if (OpRunner runner = moe_runner(c.op)) return run_moe_compare(c, runner);
  if (c.op != "rmsnorm")
    throw Error("--op: unknown op '" + c.op + "' (known: rmsnorm, router, topk, experts, lm-head)");
  const RmsNormVariant variant = parse_variant(c.variant);
  const uint64_t tokens = parse_u64("--tokens", c.tokens);
  if (tokens == 0) throw Error("--tokens 0: a pass needs at least one token");
  const uint64_t seed = parse_u64("--seed", c.seed);
  const ModelConfig config = c.model.load();

  RunShape shape;
  shape.max_batch_tokens = tokens;
  const Layout layout = Layout::build(BufferSizes::from_config(config, shape));
  const FusedAddRmsNormOp op = FusedAddRmsNormOp::make(config, tokens, variant);
  require_footprint_fits(op.params(), op.accesses(), layout, c.model.label(), tokens);

  std::unique_ptr<Backend> backend = open_backend(c);
  if (!backend) return;

  const Workspace ws = backend->allocate(layout, op.weight_pool_bytes());
  const oracle::RmsNormInputs in = oracle::generate_rmsnorm_inputs(op, seed);
  const oracle::RmsNormOutputs out = oracle::run_fused_add_rmsnorm(*backend, ws, op, in);
  const oracle::AgreementReport report =
      oracle::judge_fused_add_rmsnorm(op, in, out, backend->name(), seed);

  if (!c.dump_dir.empty())
    write_rmsnorm_dump(
        c.dump_dir, op, in, out, report,
        CompareRunInfo{c.model.label(), c.from_preset, c.variant, tokens, seed, backend->name()});
  if (c.json) {
    nlohmann::json j = report_json(report);
    j["model"] = c.model.label();
    j["tokens"] = tokens;
    j["variant"] = c.variant;
    j["arena_bytes"] = layout.arena_bytes();
    j["weight_pool_bytes"] = op.weight_pool_bytes();
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("compare {} (variant {}) on {}, {} tokens: arena {}, weight pool {}\n", c.op,
               c.variant, c.model.label(), tokens, human_bytes(layout.arena_bytes()),
               human_bytes(op.weight_pool_bytes()));
    fmt::print("{}", oracle::format_report(report));
    fmt::print("re-run: {}\n", rerun_line(c, seed));
  }
  exit_code() = report.passed() ? kExitAgree : kExitDisagree;
}

}  // namespace

void register_compare_command(CLI::App& app) {
  auto cmd = std::make_shared<CompareCommand>();
  CLI::App* sub = app.add_subcommand(
      "compare", "run one op on a backend over a model's arena and judge it against the oracle");
  cmd->model.add_options(*sub);
  sub->add_option("--op", cmd->op, "rmsnorm | router | topk | experts | lm-head (default rmsnorm)")
      ->type_name("OP");
  sub->add_option("--tokens", cmd->tokens, "tokens of the pass: rows of the op (default 16)")
      ->type_name("N");
  sub->add_option("--seed", cmd->seed, "seed of the generated inputs (default 1)")->type_name("S");
  sub->add_option("--backend", cmd->backend, "cpu or cuda (default cpu)")->type_name("NAME");
  sub->add_option("--variant", cmd->variant, "rmsnorm: add | f32 | unit | norm (default add)")
      ->type_name("NAME");
  sub->add_option("--path", cmd->path,
                  "router/topk: bf16 | fp32-gate | fp32-routing (default bf16)")
      ->type_name("PATH");
  sub->add_option("--pattern", cmd->pattern, "router/topk inputs (default random; see below)")
      ->type_name("NAME");
  sub->add_flag("--hash", cmd->hash,
                "topk: a hash-routed layer (tid2eid table; models with hash layers)");
  sub->add_option("--mutant", cmd->mutant, "a kernel mutant on the backend: B14 | M-TIE")
      ->type_name("ID");
  sub->add_option("--dump", cmd->dump_dir,
                  "write inputs, outputs and oracle values as .npy plus manifest.json")
      ->type_name("DIR");
  sub->add_flag("--json", cmd->json, "print the report as JSON");
  sub->footer(kFooter);
  sub->callback([cmd, sub] {
    cmd->from_preset = sub->get_option("--preset")->count() > 0;
    run_compare(*cmd);
  });
}

}  // namespace bufferlab::cli
