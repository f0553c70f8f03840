// `bufferlab compare --op gdn|ssd`: the SSM mixers between their two projections — Gated
// DeltaNet (core ops/gdn.h, docs/spec/numerics.md §5) and Mamba-2 SSD (ops/mamba2.h,
// docs/spec/numerics.md §6) — on a backend, on seeded inputs (oracle/gdn.h, oracle/ssd.h), driven
// stage by stage by the oracle's harness and judged on the backend's own stored inputs by its
// judges.
//
// The workspace is the model's REAL arena for m = streams·tokens, as the engine sizes it: the
// §4.5 / §4.6 carves then take their chunk count (nt, nc) from the sizing under test, which is
// what the sizing mutant B15 gets wrong. The sizing is `corrected`: the spec's formulas leave
// attn_output short of the GDN core output when nv·vd > nq·hd (finding F1, e.g. tiny-gdn), and
// the mutants are defined relative to `corrected`, so B15 differs from the default in B15 only.
// Before anything runs, the verifier checks the op's accesses against that layout; a bounds or
// overlap finding stops the run (exit 1). A real arena this machine cannot afford falls back to a
// footprint layout (exactly the op's tensors); the header says which.
#include <sys/resource.h>

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/plan/pass_plan.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/verify/check.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/gdn_judge.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_harness.h"
#include "bufferlab/oracle/mamba2_judge.h"
#include "common/backend_bounds.h"
#include "common/human_bytes.h"
#include "common/stopwatch.h"
#include "compare/compare_gdn_mamba2_dump.h"
#include "compare/compare_ops.h"

namespace bufferlab::cli {
namespace {

constexpr uint64_t kChunk =
    GdnChunkCarve::kChunk;  // C of docs/spec/numerics.md §5 / §6 (Mamba-2's is the same)
static_assert(Mamba2ChunkCarve::kChunk == kChunk);

// The largest resident set of the process so far (Linux reports KiB).
uint64_t peak_rss_bytes() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

// Elapsed time and peak memory of the run, printed after the report and put in --json.
void add_cost(CompareResult& r, const Stopwatch& stopwatch) {
  const double seconds = stopwatch.seconds();
  const uint64_t peak = peak_rss_bytes();
  r.details += fmt::format(
      "time: {:.2f} s (inputs, run, read-backs, oracle, judge{}); peak memory {} (max RSS)\n",
      seconds, r.extra_json.contains("dump") ? ", dump" : "", human_bytes(peak));
  r.extra_json["elapsed_s"] = seconds;
  r.extra_json["peak_rss_bytes"] = peak;
}

// ---- Options ----

uint64_t streams_of(const CompareSetup& s) { return s.ssm.streams ? s.ssm.streams->value : 1; }

const char* regime_name(const std::optional<oracle::GdnGateRegime>& r) {
  return to_string(r.value_or(oracle::GdnGateRegime::mixed));
}

const char* dt_name(const std::optional<oracle::Mamba2DtRegime>& r) {
  return to_string(r.value_or(oracle::Mamba2DtRegime::typical));
}

// --path chunked | recurrent | auto (not given = auto): true for the chunked path.
// `chunkable`: whether the model has the op's chunked scratch; `why_not` says why not.
bool chunked_path(std::optional<GdnMamba2Path> path, bool chunkable, const std::string& why_not) {
  if (path == GdnMamba2Path::recurrent) return false;
  if (path == GdnMamba2Path::chunked) {
    if (!chunkable) throw Error("--path chunked: " + why_not + "; use --path recurrent");
    return true;
  }
  return chunkable;
}

const char* path_name(bool chunked) { return chunked ? "chunked" : "recurrent"; }

std::string path_note(std::optional<GdnMamba2Path> path, bool chunked, const char* rule) {
  if (path == GdnMamba2Path::chunked || path == GdnMamba2Path::recurrent) return "forced by --path";
  return fmt::format("auto: {}{}", chunked ? "" : "not ", rule);
}

// ---- Workspace ----

// The run's host memory beyond the arena, as `held` times the operand bytes (inputs, the
// stored stage outputs read back — some twice, for the "intact" checks —, the oracle's FP64
// stage and whole-call references), and the oracle's multiply-adds.
struct RunCost {
  double operand_bytes = 0;
  double held = 8.0;
  double oracle_macs = 0;
};

struct GdnMamba2Workspace {
  bool real = false;
  BufferSizes sizes;
  RunShape shape;
  Layout layout;
  std::string fallback;  // why the footprint layout was used
};

// The real arena for m = rows under `sizing`, when it is affordable on this machine along with
// the run (or `forced`: then unaffordable is an error); else the footprint (affordability of
// the run alone is checked: an Error beyond it).
GdnMamba2Workspace choose_workspace(const std::string& op, const CompareSetup& s, uint64_t rows,
                                    Sizing sizing, const RunCost& cost, bool forced) {
  GdnMamba2Workspace w;
  w.shape.max_batch_tokens = rows;
  w.sizes = BufferSizes::from_config(s.config, w.shape, Target{}, sizing);
  w.layout = Layout::build(w.sizes);
  const double arena = static_cast<double>(w.layout.arena_bytes());
  // require_affordable bounds held·bytes: the arena is held once, the operands `held` times.
  const std::string what = fmt::format("--op {} on the real arena ({}, m = {})", op,
                                       human_bytes(w.layout.arena_bytes()), rows);
  try {
    require_affordable(what, cost.operand_bytes + arena / cost.held, cost.held, cost.oracle_macs,
                       s);
    w.real = true;
    return w;
  } catch (const Error& e) {
    if (forced) throw;
    w.fallback = e.what();
  }
  require_affordable(fmt::format("--op {} (operands)", op), cost.operand_bytes, cost.held,
                     cost.oracle_macs, s);
  return w;
}

std::string workspace_line(const GdnMamba2Workspace& w, const Workspace& ws,
                           const char* chunks_name, uint64_t chunks, uint64_t pool) {
  if (w.real)
    return fmt::format("real arena (sizing {}, m = {}, {} = {}) {}, weight pool {}",
                       w.sizes.sizing.to_string(), w.shape.max_batch_tokens, chunks_name, chunks,
                       human_bytes(ws.layout().arena_bytes()), human_bytes(pool));
  return fmt::format("footprint layout {} (the op's tensors only), weight pool {}",
                     human_bytes(ws.layout().arena_bytes()), human_bytes(pool));
}

template <class Op>
plan::Step step_of(const Op& op) {
  plan::Step step;
  step.op = op.name();
  step.params = op.params();
  step.where = "compare";
  step.accesses = op.accesses();
  return step;
}

// The verifier's bounds and overlap findings of the op's steps on the real layout (liveness
// and read-before-write do not apply: the harness uploads the inputs outside the plan).
std::vector<std::string> workspace_findings(const GdnMamba2Workspace& w, uint64_t streams,
                                            uint64_t L, std::vector<plan::Step> steps,
                                            const std::string& model) {
  plan::PassPlan p;
  p.pass = streams == 1 ? plan::Pass::prefill(L) : plan::Pass::codispatch(streams, L);
  p.sizing = w.sizes.sizing.to_string();
  p.shape = w.shape;
  p.steps = std::move(steps);
  std::vector<std::string> out;
  for (verify::Finding& f : verify::check(p, w.layout)) {
    if (f.check != verify::CheckKind::bounds && f.check != verify::CheckKind::overlap) continue;
    f.config = model;
    out.push_back(f.to_string());
  }
  return out;
}

// The plan's steps in run order: conv (and GDN's gates), the chunk stages or the recurrence,
// the gated norm.
template <class Plan>
std::vector<plan::Step> plan_steps(const Plan& plan, bool chunked) {
  std::vector<plan::Step> steps{step_of(plan.conv)};
  if constexpr (requires { plan.gates; }) steps.push_back(step_of(plan.gates));
  if (chunked)
    for (const auto& op : plan.chunk) steps.push_back(step_of(op));
  else
    steps.push_back(step_of(plan.recurrent));
  steps.push_back(step_of(plan.norm));
  return steps;
}

// On a real arena, the verifier's findings for the plan's steps. An arena the op overflows is
// reported, not run: then `res` is the result (the findings, a header `what` and the arena
// with its `chunks_name` = `chunks`, the arena bytes) and this returns true.
template <class Plan>
bool stop_at_arena_findings(CompareResult& res, const GdnMamba2Workspace& w, const Plan& plan,
                            bool chunked, const char* op, const Backend& backend,
                            const CompareSetup& s, const std::string& what, const char* chunks_name,
                            uint64_t chunks) {
  if (!w.real) return false;
  res.findings =
      workspace_findings(w, streams_of(s), s.tokens, plan_steps(plan, chunked), s.model_label);
  if (res.findings.empty()) return false;
  res.report.op = op;
  res.report.backend = backend.name();
  res.report.seed = s.seed;
  res.header = fmt::format("{}: real arena (sizing {}, m = {}, {} = {}) {}", what,
                           w.sizes.sizing.to_string(), w.shape.max_batch_tokens, chunks_name,
                           chunks, human_bytes(w.layout.arena_bytes()));
  res.extra_json["arena_bytes"] = w.layout.arena_bytes();
  return true;
}

// The result before the run: the weight pool, and the --json fields both ops report about the
// call and its workspace.
CompareResult result_of(uint64_t pool, uint64_t streams, uint64_t tokens, bool chunked,
                        const GdnMamba2Workspace& w) {
  CompareResult res;
  res.weight_pool_bytes = pool;
  res.extra_json = {{"streams", streams},
                    {"tokens_per_stream", tokens},
                    {"rows", w.shape.max_batch_tokens},
                    {"path", path_name(chunked)},
                    {"workspace", w.real ? "real" : "footprint"},
                    {"sizing", w.sizes.sizing.to_string()}};
  return res;
}

// After the run on workspace `ws`: the header (`what`, then the workspace), its arena bytes,
// and on a footprint layout why the real arena was not used.
void note_workspace(CompareResult& res, const GdnMamba2Workspace& w, const Workspace& ws,
                    const std::string& what, const char* chunks_name, uint64_t chunks,
                    uint64_t pool) {
  res.header = fmt::format("{}: {}", what, workspace_line(w, ws, chunks_name, chunks, pool));
  res.extra_json["arena_bytes"] = ws.layout().arena_bytes();
  if (!w.real) {
    res.extra_json["fallback"] = w.fallback;
    res.details += "workspace: footprint layout, not the real arena: " + w.fallback + "\n";
  }
}

// Each family's harness steps, by overload: the footprint workspace, the seeded inputs, the run
// and the judge.
Workspace footprint(Backend& b, const oracle::GdnPlan& p) {
  return oracle::allocate_gdn_footprint(b, p);
}
Workspace footprint(Backend& b, const oracle::Mamba2Plan& p) {
  return oracle::allocate_mamba2_footprint(b, p);
}
oracle::GdnInputs generate(const oracle::GdnDims& d, uint64_t seed,
                           const oracle::GdnInputProfile& profile) {
  return oracle::generate_gdn_inputs(d, seed, profile);
}
oracle::Mamba2Inputs generate(const oracle::Mamba2Dims& d, uint64_t seed,
                              const oracle::Mamba2InputProfile& profile) {
  return oracle::generate_mamba2_inputs(d, seed, profile);
}
oracle::GdnRun run(Backend& b, const Workspace& ws, const oracle::GdnPlan& p,
                   const oracle::GdnInputs& in) {
  return oracle::run_gdn(b, ws, p, in);
}
oracle::Mamba2Run run(Backend& b, const Workspace& ws, const oracle::Mamba2Plan& p,
                      const oracle::Mamba2Inputs& in) {
  return oracle::run_mamba2(b, ws, p, in);
}
oracle::AgreementReport judge(const oracle::GdnPlan& p, const oracle::GdnInputs& in,
                              const oracle::GdnRun& r, const Backend& b, uint64_t seed) {
  return oracle::judge_gdn(p, in, r, b.name(), seed, bounds_of(b));
}
oracle::AgreementReport judge(const oracle::Mamba2Plan& p, const oracle::Mamba2Inputs& in,
                              const oracle::Mamba2Run& r, const Backend& b, uint64_t seed) {
  return oracle::judge_mamba2(p, in, r, b.name(), seed, bounds_of(b));
}

// The plan run on the chosen workspace (the real arena, or the op's footprint) on seeded
// inputs, and judged into res.report.
template <class In, class Run>
struct JudgedRun {
  Workspace ws;
  In in;
  Run run;
};

template <class Plan, class Dims, class Profile>
auto run_and_judge(CompareResult& res, Backend& backend, const GdnMamba2Workspace& w,
                   const Plan& plan, const Dims& dims, const Profile& profile, uint64_t seed) {
  Workspace ws = w.real ? backend.allocate(w.layout, plan.pool_bytes) : footprint(backend, plan);
  auto in = generate(dims, seed, profile);
  auto out = run(backend, ws, plan, in);
  res.report = judge(plan, in, out, backend, seed);
  return JudgedRun<decltype(in), decltype(out)>{std::move(ws), std::move(in), std::move(out)};
}

void write_dump(const std::string& dir, const oracle::GdnPlan& plan, const oracle::GdnInputs& in,
                const oracle::GdnRun& run, const oracle::AgreementReport& report,
                const GdnMamba2DumpInfo& info) {
  write_gdn_dump(dir, plan, in, run, report, info);
}
void write_dump(const std::string& dir, const oracle::Mamba2Plan& plan,
                const oracle::Mamba2Inputs& in, const oracle::Mamba2Run& run,
                const oracle::AgreementReport& report, const GdnMamba2DumpInfo& info) {
  write_mamba2_dump(dir, plan, in, run, report, info);
}

// The end of a run: the dump (--dump, with the input `profile` text), then the cost.
template <class Plan, class In, class Run>
CompareResult finish(CompareResult& res, const JudgedRun<In, Run>& r, const Plan& plan,
                     const CompareSetup& s, const Backend& backend, const std::string& profile,
                     uint64_t streams, const GdnMamba2Workspace& w, const Stopwatch& t0) {
  if (!s.dump_dir.empty()) {
    write_dump(s.dump_dir, plan, r.in, r.run, res.report,
               GdnMamba2DumpInfo{s.model_label, backend.name(), profile, s.tokens, streams, s.seed,
                                 w.real ? "real" : "footprint"});
    res.extra_json["dump"] = s.dump_dir;
  }
  add_cost(res, t0);
  return res;
}
// ---- GDN ----

RunCost gdn_cost(const oracle::GdnDims& d, bool chunked) {
  const GdnGeometry& g = d.geom;
  const double rows = static_cast<double>(d.rows());
  const double kd = static_cast<double>(g.kd), vd = static_cast<double>(g.vd);
  const double nv = static_cast<double>(g.nv);
  const double regions = chunked ? static_cast<double>(d.sequences * cdiv(d.L, kChunk)) * nv : 0.0;
  RunCost c;
  c.operand_bytes = rows * static_cast<double>(g.qkvz * 2 + 4 * g.nv + g.conv_dim * 4 + g.nv * 8 +
                                               g.value_dim * 4) +
                    static_cast<double>(d.sequences) * nv * kd * vd * 8.0 +
                    regions * (64.0 * kd * 2 + 3 * 64.0 * vd * 2 + kd * vd * 2 + 64.0 * 4) * 2;
  // Per token and value head: the recurrence ~4·kd·vd, the chunked form's state pass and
  // output as much again plus the intra-chunk products; the judge runs the faithful and exact
  // references and the stage references.
  c.oracle_macs = 4.0 * rows * nv * (8.0 * kd * vd + 4.0 * 64.0 * (kd + vd));
  return c;
}

std::string gdn_profile_text(const CompareSetup& s) {
  std::string t =
      fmt::format("alpha {}, beta {}", regime_name(s.ssm.alpha), regime_name(s.ssm.beta));
  if (s.ssm.parallel_keys) t += ", parallel keys";
  t += s.ssm.zero_state ? ", zero state" : ", random state";
  return t;
}

// The GDN judge names a row of its [rows, ...] tensors (conv, gates, core output, gated norm)
// by its index in the call: with several sequences, say whose token it is.
std::string sequence_of_first_bad(const oracle::AgreementReport& r, uint64_t n, uint64_t L) {
  std::string out;
  if (n < 2) return out;
  for (const oracle::TensorComparison& c : r.checks) {
    if (c.passed() || !c.first_bad || c.rows != n * L) continue;
    if (c.first_bad->reason.find("sequence") != std::string::npos) continue;
    const uint64_t row = c.first_bad->row;
    out += fmt::format("  first bad {}: row {} is token {} of sequence {}\n", c.name, row, row % L,
                       row / L);
  }
  return out;
}

// B15 drops the 16 chunks of slack: nt = cdiv(m, 64). It is short only when the streams'
// chunks n·cdiv(L, 64) exceed cdiv(n·L, 64) (n > 1 and L % 64 ≠ 0, mostly).
std::string b15_note(const oracle::GdnDims& d, uint64_t nt, nlohmann::json& j) {
  j["mutant_visible"] = false;
  return fmt::format(
      "note: sizing mutant B15 (gdn_fla_scratch carved for nt = cdiv(m, 64) = {} chunks, without "
      "the 16 of slack) holds these {} sequence{} of {} tokens ({} chunks): it shows only when "
      "streams * cdiv(tokens, 64) > cdiv(streams * tokens, 64), e.g. --streams 3 --tokens 65\n",
      nt, d.sequences, d.sequences == 1 ? "" : "s", d.L, d.sequences * cdiv(d.L, kChunk));
}

}  // namespace

CompareResult compare_gdn(Backend& backend, const CompareSetup& s) {
  const Stopwatch t0;
  if (s.config.linear_num_value_heads == 0)
    throw Error(fmt::format(
        "{} has no Gated DeltaNet layers (linear_num_value_heads = 0): --op gdn needs a GDN "
        "model (e.g. qwen3-next-80b, tiny-gdn)",
        s.model_label));
  const uint64_t n = streams_of(s);
  const uint64_t rows = (Size(n) * s.tokens).value();
  const oracle::GdnDims dims = oracle::GdnDims::of(s.config, n, s.tokens);
  const bool chunked = chunked_path(
      s.ssm.path, dims.chunkable(),
      fmt::format("the chunked GDN core runs kd = vd = 128 only (docs/spec/numerics.md §5), {} "
                  "has kd = {}, vd = {}",
                  s.model_label, dims.geom.kd, dims.geom.vd));
  const bool b15 = s.mutant == Mutant::B15;
  if ((b15 || s.mutant == Mutant::M_GDNCARRY) && !chunked)
    throw Error(fmt::format(
        "--mutant {} changes the chunked path ({}), which --path recurrent does not run: it "
        "would pass unseen",
        to_string(s.mutant), b15 ? "the gdn_fla_scratch carve" : "the state pass"));
  oracle::GdnInputProfile profile;
  profile.alpha = s.ssm.alpha.value_or(oracle::GdnGateRegime::mixed);
  profile.beta = s.ssm.beta.value_or(oracle::GdnGateRegime::mixed);
  profile.parallel_keys = s.ssm.parallel_keys;
  profile.zero_state = s.ssm.zero_state;

  const oracle::GdnPath path = chunked ? oracle::GdnPath::chunked : oracle::GdnPath::recurrent;
  const Sizing sizing = b15 ? Sizing::mutant_of_corrected(Mutant::B15) : Sizing::corrected();
  const GdnMamba2Workspace w =
      choose_workspace("gdn", s, rows, sizing, gdn_cost(dims, chunked), b15);
  const uint64_t nt = w.real ? w.sizes.params.gdn_chunks : 0;
  const oracle::GdnPlan plan = oracle::plan_gdn(dims, path, nt);

  CompareResult res = result_of(plan.pool_bytes, n, s.tokens, chunked, w);
  const std::string what = fmt::format(
      "compare gdn, {} path ({}): {}; {} sequence{} of {} tokens; {}; on {}", path_name(chunked),
      path_note(s.ssm.path, chunked, "kd = vd = 128"), dims.geom.to_string(), n, n == 1 ? "" : "s",
      s.tokens, gdn_profile_text(s), s.model_label);
  res.extra_json["gdn_chunks"] = nt;
  res.extra_json["alpha"] = regime_name(s.ssm.alpha);
  res.extra_json["beta"] = regime_name(s.ssm.beta);
  res.extra_json["parallel_keys"] = s.ssm.parallel_keys;
  res.extra_json["zero_state"] = s.ssm.zero_state;
  if (stop_at_arena_findings(res, w, plan, chunked, "gdn", backend, s, what, "nt", nt)) {
    if (b15) res.extra_json["mutant_visible"] = true;
    add_cost(res, t0);
    return res;
  }

  const auto r = run_and_judge(res, backend, w, plan, dims, profile, s.seed);
  res.details += sequence_of_first_bad(res.report, n, s.tokens);
  note_workspace(res, w, r.ws, what, "nt", nt, plan.pool_bytes);
  if (b15) res.details += b15_note(dims, nt, res.extra_json);
  return finish(res, r, plan, s, backend, gdn_profile_text(s), n, w, t0);
}

// ---- SSD ----

namespace {

RunCost mamba2_cost(const oracle::Mamba2Dims& d, bool chunked) {
  const Mamba2Geometry& g = d.geom;
  const double rows = static_cast<double>(d.rows());
  const double H = static_cast<double>(g.H), P = static_cast<double>(g.P),
               N = static_cast<double>(g.N), G = static_cast<double>(g.G);
  const double chunks = chunked ? static_cast<double>(d.sequences * cdiv(d.L, kChunk)) : 0.0;
  RunCost c;
  c.operand_bytes = rows * static_cast<double>(g.in_proj * 2 + g.d_xbc * 2 + g.d_inner * 4) +
                    static_cast<double>(d.sequences) * H * P * N * 4.0 * 2 +
                    chunks * (2.0 * H * 64.0 * 4 + G * 64.0 * 64.0 * 4) * 2;
  // Per token: the state update and read-out H·P·N each, the intra-chunk products H·64·P and
  // the CB products G·64·N; faithful, exact and stage references.
  c.oracle_macs = 4.0 * rows * (4.0 * H * P * N + H * 64.0 * P + G * 64.0 * N);
  return c;
}

std::string mamba2_profile_text(const CompareSetup& s) {
  return fmt::format("dt {}, {}", dt_name(s.ssm.dt),
                     s.ssm.zero_state ? "zero state" : "random state");
}

}  // namespace

CompareResult compare_mamba2(Backend& backend, const CompareSetup& s) {
  const Stopwatch t0;
  if (s.config.mamba_num_heads == 0 || s.config.ssm_state_size == 0)
    throw Error(fmt::format(
        "{} has no Mamba-2 layers (mamba_num_heads = {}, ssm_state_size = {}): --op ssd needs a "
        "Mamba model (e.g. nemotron-h-56b, tiny-mamba)",
        s.model_label, s.config.mamba_num_heads, s.config.ssm_state_size));
  const uint64_t n = streams_of(s);
  const uint64_t rows = (Size(n) * s.tokens).value();
  const oracle::Mamba2Dims dims = oracle::Mamba2Dims::of(s.config, n, s.tokens);
  // Every Mamba-2 model has ssd_scratch (§4.6): the chunked path is the engine's for prefill.
  const bool chunked = chunked_path(s.ssm.path, true, "");
  if (s.mutant == Mutant::M_SSDSTATE && !chunked)
    throw Error(
        "--mutant M-SSDSTATE changes the chunked scan, which --path recurrent does not run: it "
        "would pass unseen");
  oracle::Mamba2InputProfile profile;
  profile.dt = s.ssm.dt.value_or(oracle::Mamba2DtRegime::typical);
  profile.zero_state = s.ssm.zero_state;

  const oracle::Mamba2Path path =
      chunked ? oracle::Mamba2Path::chunked : oracle::Mamba2Path::recurrent;
  const GdnMamba2Workspace w =
      choose_workspace("ssd", s, rows, Sizing::corrected(), mamba2_cost(dims, chunked), false);
  const uint64_t nc = w.real ? w.sizes.params.mamba2_chunks : 0;
  const oracle::Mamba2Plan plan = oracle::plan_mamba2(dims, path, nc);

  CompareResult res = result_of(plan.pool_bytes, n, s.tokens, chunked, w);
  const std::string what = fmt::format(
      "compare ssd, {} path ({}): {}; {} sequence{} of {} tokens{}; {}; on {}", path_name(chunked),
      path_note(s.ssm.path, chunked, "the model has ssd_scratch"), dims.geom.to_string(), n,
      n == 1 ? "" : "s", s.tokens, n > 1 && chunked ? " (the SSD runs them one after another)" : "",
      mamba2_profile_text(s), s.model_label);
  res.extra_json["ssd_chunks"] = nc;
  res.extra_json["dt"] = dt_name(s.ssm.dt);
  res.extra_json["zero_state"] = s.ssm.zero_state;
  if (stop_at_arena_findings(res, w, plan, chunked, "ssd", backend, s, what, "nc", nc)) {
    add_cost(res, t0);
    return res;
  }

  const auto r = run_and_judge(res, backend, w, plan, dims, profile, s.seed);
  note_workspace(res, w, r.ws, what, "nc", nc, plan.pool_bytes);
  return finish(res, r, plan, s, backend, mamba2_profile_text(s), n, w, t0);
}

}  // namespace bufferlab::cli
