// `bufferlab compare`: runs one op on a backend over the real arena of a model (sized by
// BufferSizes::from_config, laid out by Layout::build, poisoned), judges it against the FP64
// oracle and prints the agreement report. Exit codes: 0 agree, 1 disagree, 2 error, 77 skipped
// (the backend cannot run here).
#include <memory>
#include <string>
#include <utility>

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
#include "common/commands.h"
#include "common/human_bytes.h"
#include "common/model_source.h"
#include "common/parse_number.h"
#include "compare/compare_dump.h"
#include "compare/compare_ops.h"
#include "compare/compare_report.h"
#include "compare/compare_table.h"

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

// The help after the ops (compare_ops_help(), from the compare table).
constexpr const char* kFooterAfterOps =
    R"(GDN / SSD: --path chunked | recurrent | auto (default: chunked where the model allows it);
            --streams N sequences (default 1); --zero-state (fresh sequences); gdn: --alpha,
            --beta mixed | near-zero | near-one (gate regimes), --parallel-keys; ssd: --dt
            typical | large | tiny. Workspace: the model's real arena for m = N * --tokens
            (the sizing's chunk count carves the scratch) when affordable, else a footprint
mHC inputs (hc-*): --streams normal (default) | zero | huge (x 1e30: the scaled-RMS path);
            --hc-eps E replaces the model's hc_eps (hc-pre, hc-head)
router paths (--path, router and topk): bf16 (default), fp32-gate, fp32-routing
inputs (--pattern, router and topk): random (default), duplicated-rows, perturbed-rows,
            all-equal, bf16-ulp-apart, near-ties, group-ties (router groups tied or a hair
            apart; blocks of 4 without groups)
kernel mutants (--mutant): B14 (router, topk: FP32 paths store BF16-rounded logits), M-TIE
            (topk: ties to the higher index), M-GROUP (topk: router groups ranked by their
            best expert alone), B13 (hc-post: streams rounded to BF16), M-SKCOL
            (hc-pre: Sinkhorn without the final exact column normalisation; invisible when
            hc_eps = 0), M-SKORDER (hc-pre: column before row inside the Sinkhorn loop;
            invisible when hc_eps = 0, seen with --streams zero --logit-range 60),
            M-GDNCARRY (gdn: the state pass carries the BF16 snapshot),
            M-SSDSTATE (ssd: the scan drops the state between chunks); attention (attn-prefill,
            attn-decode): M-CAUSAL (a row also sees position p + 1), M-GQA (KV head
            q % nkv), M-MERGE (attn-decode: split-K merge without the max rescale),
            M-BLOCK (the logical block read as the physical one), M-MROPE (MRoPE's h and w
            streams exchanged), M-SINK (the sink added to the numerator too); B15 (gdn, a SIZING
            mutant: the real layout of corrected+B15, short of chunks when N > 1 and
            --tokens % 64 != 0): the catalogue's bugs, for demonstrating a catch; refused
            (exit 2) on an op they do not change
variants (--variant, rmsnorm):
  add       residual = bf16(residual + x); norm_output = bf16(RMSNorm(stored residual)) (default)
  f32       as add, and the FP32 normed row into moe_router_in_f32 (MoE models only: the
            buffer is sized for the router input only when num_experts > 0)
  unit      as add, with the unit weight norm_unit_w (zeros: scale 1 + 0)
  norm      RMSNorm of residual alone, no add (residual is read only)
checks: the stored residual exactly; norm_output and moe_router_in_f32 against the FP64
oracle fed the backend's stored residual, under the derived bounds printed with the report.)";

struct CompareCommand {
  ModelSource model;
  std::string op = "rmsnorm";
  std::string tokens = "16";
  std::string seed = "1";
  std::string backend = "cpu";
  std::string sim_seed;  // --sim-seed (cuda-sim only); empty: the simulator's default, 1
  std::string variant = "add";
  std::string path = "bf16";
  std::string pattern = "random";
  std::string mutant = "none";
  RawCompareOptions raw;        // mHC / SSM options as given; --streams, --path sorted by the op
  MhcCompareOptions hc;         // mHC ops: parsed from raw when the command runs
  GdnMamba2CompareOptions ssm;  // gdn, ssd: parsed from raw when the command runs
  AttnCompareOptions attn;      // attn-prefill, attn-decode: parsed when the command runs
  bool hash = false;
  std::string dump_dir;
  bool json = false;
  bool from_preset = true;  // --preset (not --config) was given; set when the command runs
  bool path_given = false;  // --path was given; set when the command runs
};

RmsNormVariant parse_variant(const std::string& name) {
  for (const auto& v : kVariants)
    if (name == v.name) return v.variant;
  throw Error("--variant: unknown variant '" + name + "' (known: add, f32, unit, norm)");
}

std::string rerun_line(const CompareCommand& c, const CompareOpEntry& op, uint64_t seed) {
  std::string line =
      fmt::format("bufferlab compare --op {} --{} {} --tokens {} --seed {} --backend {}", c.op,
                  c.from_preset ? "preset" : "config", c.model.label(), c.tokens, seed, c.backend);
  if (op.reads(kOptVariant)) line += " --variant " + c.variant;
  if (op.reads(kOptRouterPath)) {
    line += " --path " + c.path + " --pattern " + c.pattern;
    if (c.hash) line += " --hash";
  }
  if (op.reads(kOptLowRankPath) && c.path_given) line += " --path " + c.path;
  line += op.reads(kOptContext) ? attn_rerun_options(c.attn)
                                : ssm_rerun_options(c.ssm) + hc_rerun_options(c.hc);
  if (c.mutant != "none") line += " --mutant " + c.mutant;
  if (!c.sim_seed.empty()) line += " --sim-seed " + c.sim_seed;
  return line;
}

// A mutant on an op whose kernels (or workspace) it does not change would pass unseen:
// refused, naming the ops it changes (the compare table). Mutants no op accepts are left to
// the backend, which refuses what is not a kernel mutant.
void require_mutant_applies(const CompareCommand& c, const CompareOpEntry& op) {
  for (Mutant m : all_mutants()) {
    if (c.mutant != to_string(m) || op.accepts(m)) continue;
    const std::string ops = compare_ops_accepting(m);
    if (!ops.empty())
      throw Error("--mutant " + c.mutant + " changes the kernels of " + ops + " only, not --op " +
                  c.op + ": it would pass unseen");
  }
}

// Opens the backend, or reports "skipped" (exit 77) and returns null.
std::unique_ptr<Backend> open_backend(const CompareCommand& c) {
  if (!c.sim_seed.empty()) {
    if (c.backend != "cuda-sim")
      throw Error("--sim-seed applies to --backend cuda-sim only, not --backend " + c.backend);
    set_cuda_sim_seed(parse_u64("--sim-seed", c.sim_seed));
  }
  try {
    std::unique_ptr<Backend> backend = make_backend(c.backend);
    // B15 (gdn only, require_mutant_applies) is a sizing mutant: compare_gdn lays out its
    // workspace from it; every other mutant is the backend's to take or refuse.
    if (c.mutant != "none" && c.mutant != "B15")
      backend->set_kernel_mutant(mutant_from_string(c.mutant));
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

void run_op_compare(CompareCommand& c, const CompareOpEntry& op) {
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
  // A valid name by now: open_backend took it or refused it.
  s.mutant = c.mutant == "none" ? Mutant::none : mutant_from_string(c.mutant);
  // Parsed once the run is set up (model, tokens, backend): a bad value is reported where the
  // runners reported it before they took typed options.
  c.hc = s.hc = parse_mhc_options(c.raw);
  c.ssm = s.ssm = parse_gdn_mamba2_options(c.raw);
  if (op.reads(kOptContext)) c.attn = s.attn = parse_attn_options(c.raw);
  const CompareResult r = op.runner(*backend, s);
  const bool agree = r.report.passed() && r.findings.empty();
  const std::string activity = cuda_sim_activity();
  if (c.json) {
    nlohmann::json j = report_json(r.report);
    if (!r.findings.empty()) {
      j["agree"] = false;
      j["findings"] = r.findings;
    }
    j["model"] = s.model_label;
    j["tokens"] = tokens;
    j["arena_bytes"] = s.layout.arena_bytes();
    j["weight_pool_bytes"] = r.weight_pool_bytes;
    j["mutant"] = c.mutant;
    if (!activity.empty()) j["simulator"] = activity;
    for (const auto& [key, value] : r.extra_json.items()) j[key] = value;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}\n", r.header);
    if (c.mutant == "B15")
      fmt::print("sizing mutant B15: the arena is laid out by the sizing corrected+B15\n");
    else if (c.mutant != "none")
      fmt::print("kernel mutant {} is active on the backend\n", c.mutant);
    if (r.findings.empty())
      fmt::print("{}", oracle::format_report_body(r.report));
    else
      for (const std::string& f : r.findings) fmt::print("finding: {}\n", f);
    // The lines that explain the result (tie checks, the first differing token, notes)
    // come before the verdict, which is the last line.
    fmt::print("{}", r.details);
    if (!activity.empty()) fmt::print("cuda-sim: {}\n", activity);
    fmt::print("re-run: {}\n", rerun_line(c, op, s.seed));
    if (r.findings.empty())
      fmt::print("{}", oracle::format_outcome(r.report));
    else
      fmt::print("DISAGREE: the workspace cannot hold the op ({} verifier finding{}); not run\n",
                 r.findings.size(), r.findings.size() == 1 ? "" : "s");
  }
  exit_code() = agree ? kExitAgree : kExitDisagree;
}

// rmsnorm: its own report (the variant, no mutant) and checks before the backend opens.
void run_rmsnorm_compare(const CompareCommand& c, const CompareOpEntry& entry) {
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
    if (const std::string a = cuda_sim_activity(); !a.empty()) j["simulator"] = a;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("compare {} (variant {}) on {}, {} tokens: arena {}, weight pool {}\n", c.op,
               c.variant, c.model.label(), tokens, human_bytes(layout.arena_bytes()),
               human_bytes(op.weight_pool_bytes()));
    fmt::print("{}", oracle::format_report_body(report));
    if (const std::string a = cuda_sim_activity(); !a.empty()) fmt::print("cuda-sim: {}\n", a);
    fmt::print("re-run: {}\n", rerun_line(c, entry, seed));
    fmt::print("{}", oracle::format_outcome(report));
  }
  exit_code() = report.passed() ? kExitAgree : kExitDisagree;
}

void run_compare(CompareCommand& c) {
  const CompareOpEntry* entry = find_compare_op(c.op);
  if (entry == nullptr)
    throw Error("--op: unknown op '" + c.op + "' (known: " + compare_op_names(", ") + ")");
  require_mutant_applies(c, *entry);
  require_options_apply(c.op, c.raw);
  try {
    if (entry->runner != nullptr) return run_op_compare(c, *entry);
    run_rmsnorm_compare(c, *entry);
  } catch (const KernelCheckFailure& e) {
    // The kernel simulator's checkers stopped the op: their findings are the verdict.
    fmt::print("{}", e.what());
    if (const std::string a = cuda_sim_activity(); !a.empty()) fmt::print("cuda-sim: {}\n", a);
    fmt::print("DISAGREE: the kernel simulator's checkers found the problems above\n");
    exit_code() = kExitDisagree;
  }
}

// "a kernel mutant on the backend: B14 | M-TIE | ...; gdn: the sizing mutant B15".
std::string mutant_help() {
  std::string kernel;
  for (Mutant m : compare_kernel_mutants())
    kernel += (kernel.empty() ? "" : " | ") + std::string(to_string(m));
  std::string help = "a kernel mutant on the backend: " + kernel;
  for (const CompareOpEntry& op : compare_ops())
    for (Mutant m : op.sizing_mutants)
      help += fmt::format("; {}: the sizing mutant {}", op.name, to_string(m));
  return help;
}

}  // namespace

void register_compare_command(CLI::App& app) {
  auto cmd = std::make_shared<CompareCommand>();
  CLI::App* sub = app.add_subcommand(
      "compare", "run one op on a backend over a model's arena and judge it against the oracle");
  cmd->model.add_options(*sub);
  sub->add_option("--op", cmd->op, compare_op_names(" | ") + " (default rmsnorm)")->type_name("OP");
  sub->add_option("--tokens", cmd->tokens,
                  "tokens of the pass: rows of the op (default 16; gdn/ssd: per sequence)")
      ->type_name("N");
  sub->add_option("--seed", cmd->seed, "seed of the generated inputs (default 1)")->type_name("S");
  sub->add_option("--backend", cmd->backend,
                  "cpu, cuda or cuda-sim (the CUDA kernels on the kernel simulator; default cpu)")
      ->type_name("NAME");
  sub->add_option("--sim-seed", cmd->sim_seed,
                  "cuda-sim: the simulator's schedule seed (block and thread order; default 1)")
      ->type_name("S");
  sub->add_option("--variant", cmd->variant, "rmsnorm: add | f32 | unit | norm (default add)")
      ->type_name("NAME");
  sub->add_option("--path", cmd->path,
                  "router/topk: bf16 | fp32-gate | fp32-routing (default bf16); hc-lowrank: "
                  "split | slab (default: split for T <= 64, else slab); gdn/ssd: chunked | "
                  "recurrent | auto (default auto)")
      ->type_name("PATH");
  sub->add_option("--pattern", cmd->pattern, "router/topk inputs (default random; see below)")
      ->type_name("NAME");
  sub->add_flag("--hash", cmd->hash,
                "topk: a hash-routed layer (tid2eid table; models with hash layers)");
  sub->add_option("--mutant", cmd->mutant, mutant_help())->type_name("ID");
  sub->add_option("--logit-range", cmd->raw.logit_range,
                  "hc-pre/hc-post: spread L of every comb logit row (default 4)")
      ->type_name("L");
  sub->add_option("--streams", cmd->raw.hc_streams,
                  "hc-pre/post/head/lowrank: stream values normal | zero | huge (default "
                  "normal); gdn/ssd: co-dispatched sequences of --tokens each (default 1)")
      ->type_name("KIND|N");
  sub->add_option("--hc-eps", cmd->raw.hc_eps, "hc-pre/hc-head: replace the model's hc_eps")
      ->type_name("E");
  sub->add_option("--alpha", cmd->raw.alpha, "gdn: decay gates mixed | near-zero | near-one")
      ->type_name("REGIME");
  sub->add_option("--beta", cmd->raw.beta, "gdn: write gates mixed | near-zero | near-one")
      ->type_name("REGIME");
  sub->add_flag("--parallel-keys", cmd->raw.parallel_keys,
                "gdn: every key of a head within a few degrees of one direction");
  sub->add_flag("--zero-state", cmd->raw.zero_state,
                "gdn/ssd: fresh sequences (recurrent state and conv tails zero)");
  sub->add_option("--context", cmd->raw.context,
                  "attn-prefill/attn-decode: keys already in each sequence's cache (default 0)")
      ->type_name("C");
  sub->add_option("--chunk", cmd->raw.chunk,
                  "attn-prefill: prefill in chunks of C tokens (default: one chunk)")
      ->type_name("C");
  sub->add_option("--layer", cmd->raw.layer,
                  "attn-prefill/attn-decode: full | sliding (default: the first attention layer's)")
      ->type_name("KIND");
  sub->add_option("--dt", cmd->raw.dt, "ssd: step sizes typical | large | tiny (default typical)")
      ->type_name("REGIME");
  sub->add_option("--dump", cmd->dump_dir,
                  "write inputs, outputs and oracle values as .npy plus manifest.json")
      ->type_name("DIR");
  sub->add_flag("--json", cmd->json, "print the report as JSON");
  sub->footer(compare_ops_help() + kFooterAfterOps);
  sub->callback([cmd, sub] {
    cmd->from_preset = sub->get_option("--preset")->count() > 0;
    cmd->path_given = sub->get_option("--path")->count() > 0;
    const CompareOpEntry* op = find_compare_op(cmd->op);
    const bool mhc = op != nullptr && op->family == NumericFamily::mhc;
    if (cmd->path_given && mhc) cmd->raw.lowrank_path = cmd->path;
    if (op != nullptr && op->reads(kOptSequences)) {  // --streams and --path: gdn / ssd meanings
      cmd->raw.ssm_streams = std::exchange(cmd->raw.hc_streams, std::string());
      if (cmd->path_given) cmd->raw.ssm_path = cmd->path;
    }
    run_compare(*cmd);
  });
}

}  // namespace bufferlab::cli
