// `bufferlab compare --op hc-pre|hc-post|hc-head|hc-expand|hc-lowrank`: the mHC
// hyper-connection ops (core ops/mhc.h) on a backend over the model's real arena, on seeded
// inputs (oracle/mhc_inputs.h), run by oracle/mhc_harness.h and judged stage by stage on the
// backend's own stored inputs by oracle/mhc_judge.h.
//
// hc-lowrank runs the path the engine would (docs/spec/numerics.md §4, docs/spec/buffers.md §4.7):
// the split path for T <= 64 tokens, the slab GEMM path in slabs of <= 2048 rows above; --path
// forces one where it is legal (split only for T <= 64).
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/error.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/oracle/mhc_judge.h"
#include "common/backend_bounds.h"
#include "common/human_bytes.h"
#include "compare/compare_mhc_dump.h"
#include "compare/compare_ops.h"

namespace bufferlab::cli {
namespace {

constexpr uint64_t kSplitMaxRows =
    MhcSplitCarve::kMaxRows;  // docs/spec/numerics.md §4 (core ops/mhc.h)

// What an mHC op run is given: the model (hc_eps replaced by --hc-eps) and the input profile.
struct MhcRun {
  ModelConfig config;
  oracle::MhcInputProfile profile;
  std::string streams = "normal";  // --streams, as the report and dump name it
};

MhcRun hc_run(const CompareSetup& s, const std::string& op) {
  MhcRun r;
  r.config = s.config;
  if (r.config.hc_mult == 0)
    throw Error(
        fmt::format("{} has no mHC hyper-connections (hc_mult = 0): --op {} needs an mHC model "
                    "(e.g. deepseek-v4-flash, tiny-mhc, tiny-mhc-lowrank)",
                    s.model_label, op));
  if (s.hc.hc_eps) r.config.hc_eps = s.hc.hc_eps->value;
  if (s.hc.logit_range) r.profile.logit_range = s.hc.logit_range->value;
  r.profile.magnitude = s.hc.streams.value_or(oracle::MhcStreamMagnitude::normal);
  r.streams = to_string(r.profile.magnitude);
  return r;
}

void require_sinkhorn_form(const CompareSetup& s, const std::string& op) {
  if (s.config.hc_lowrank > 0)
    throw Error(fmt::format(
        "{} uses the low-rank mHC form (hc_lowrank = {}): it has no Sinkhorn pre step; --op {} "
        "needs hc_lowrank = 0 (its pre step is --op hc-lowrank)",
        s.model_label, s.config.hc_lowrank, op));
}

double bytes_of(const TensorRef& t) { return static_cast<double>(t.bytes()); }

std::string arena_and_pool(const CompareSetup& s, uint64_t pool) {
  return fmt::format("arena {}, weight pool {}", human_bytes(s.layout.arena_bytes()),
                     human_bytes(pool));
}

MhcDumpInfo dump_info(const CompareSetup& s, const Backend& backend, const MhcRun& r) {
  return {s.model_label, backend.name(), r.streams, r.profile.logit_range, s.tokens, s.seed};
}

// M-SKCOL skips the exact column normalisation after the last eps one: the column sums then
// miss 1 by about hc_eps, which the column-sum check sees only above its tolerance.
std::string skcol_note(const MhcPreOp& op, nlohmann::json& j) {
  const double tol = oracle::col_sum_tolerance_fp32(op.shape().hc);
  if (op.hc_eps > tol) {
    j["mutant_visible"] = true;
    return {};
  }
  j["mutant_visible"] = false;
  if (op.hc_eps == 0.0)
    return "note: kernel mutant M-SKCOL is invisible with hc_eps = 0, by construction: the "
           "Sinkhorn's last column normalisation already makes every column sum 1 (to FP32 "
           "rounding), so skipping the final exact one changes nothing; pass --hc-eps E (e.g. "
           "1e-6) to see it\n";
  return fmt::format(
      "note: kernel mutant M-SKCOL moves the column sums by about hc_eps = {:g}, not above the "
      "column-sum tolerance (hc+1)*2^-24 = {:.3g}: it may pass unseen; pass a larger --hc-eps "
      "to see it\n",
      op.hc_eps, tol);
}

// M-SKORDER normalises the columns before the rows inside the loop. With hc_eps = 0 that is the
// defined iteration (a column normalisation is then idempotent: C, (C, R)^(t-1), C* = C, (R,
// C)^(t-1), C*), and so it is with one iteration or hc = 1; with hc_eps > 0 it differs only
// where hc_eps moves a line sum, i.e. at large comb logit ranges where K has entries near
// hc_eps (docs/findings.md: below FP32's resolution at range 4 after 20 iterations, up to ~1%
// at range 60), and the element-wise bound sees that only when the comb logits' error bound is
// small (exact logits: --streams zero). A run that agrees says so.
std::string skorder_note(const MhcPreOp& op, double logit_range, bool passed, nlohmann::json& j) {
  j["mutant_visible"] = !passed;
  if (!passed) return {};
  const auto& d = op.shape();
  if (op.hc_eps == 0.0 || d.iters == 1 || d.hc == 1)
    return fmt::format(
        "note: kernel mutant M-SKORDER is invisible here by construction: with {} the swapped "
        "loop is the defined iteration (up to rounding); pass --hc-eps 1e-6 with hc > 1 and "
        "more than one iteration\n",
        op.hc_eps == 0.0 ? "hc_eps = 0" : (d.iters == 1 ? "one iteration" : "hc = 1"));
  return fmt::format(
      "note: kernel mutant M-SKORDER moves the comb only where hc_eps = {:g} moves a line sum, "
      "by <= ~1% at comb logit range 60 and below FP32's resolution at range 4; the element-wise "
      "bound grows with ~4*iters times the comb logits' a-priori error (the mix GEMV over hc*h), "
      "which hides it at this range ({:g}) and these streams; pass --streams zero (the comb "
      "logits are then the bias rows, exactly) and --logit-range 60 to see it (caught on about "
      "two seeds in three)\n",
      op.hc_eps, logit_range);
}

// pre and head: the op's weights placed in the pool, its footprint and cost checked, its
// inputs generated, run on `backend`, judged and dumped (--dump). Host: the inputs, the stored
// outputs and the oracle's FP64 arrays (~6 copies of fn and the streams); oracle: the faithful
// and exact references and the bounds, each rows·width·hc·h (width: mix for pre, hc for head).
// The result has the report, the pool and the JSON fields both report; the header is the op's.
template <class Op, class Generate, class Run, class Judge, class Dump>
CompareResult run_weighted(Backend& backend, const CompareSetup& s, const MhcRun& r, Op& op,
                           const char* what, uint64_t width, Generate generate, Run run,
                           Judge judge, Dump dump) {
  const uint64_t pool = oracle::place_mhc_weights(op);
  require_footprint_fits(op.params(), op.accesses(), s.layout, s.model_label, s.tokens);
  const auto& d = op.shape();
  require_affordable(what, bytes_of(op.fn) + bytes_of(op.streams), 6.0,
                     3.0 * static_cast<double>(d.rows) * static_cast<double>(width) *
                         static_cast<double>(d.hc) * static_cast<double>(d.h),
                     s);
  const auto in = generate(op, s.seed, r.profile);
  const Workspace ws = backend.allocate(s.layout, pool);
  const auto out = run(backend, ws, op, in);

  CompareResult res;
  res.report = judge(op, in, out, backend.name(), s.seed, bounds_of(backend));
  res.weight_pool_bytes = pool;
  res.extra_json = {{"streams", r.streams},
                    {"hc_eps", op.hc_eps},
                    {"nonfinite_tokens", out.diagnostics.nonfinite_tokens}};
  if (!s.dump_dir.empty()) dump(s.dump_dir, op, in, out, res.report, dump_info(s, backend, r));
  return res;
}

}  // namespace

CompareResult compare_mhc_pre(Backend& backend, const CompareSetup& s) {
  const MhcRun r = hc_run(s, "hc-pre");
  require_sinkhorn_form(s, "hc-pre");
  MhcPreOp op = MhcPreOp::make(r.config, s.tokens);
  CompareResult res = run_weighted(backend, s, r, op, "--op hc-pre (weights and streams)",
                                   op.shape().mix, oracle::generate_mhc_pre_inputs,
                                   oracle::run_mhc_pre, oracle::judge_mhc_pre, write_mhc_pre_dump);
  const auto& d = op.shape();
  res.header = fmt::format(
      "compare hc-pre (Sinkhorn form: hc {}, {} iterations, hc_eps {:g}; comb logit range {:g}, "
      "{} streams) on {}, {} tokens: {}",
      d.hc, d.iters, op.hc_eps, r.profile.logit_range, r.streams, s.model_label, s.tokens,
      arena_and_pool(s, res.weight_pool_bytes));
  res.extra_json["logit_range"] = r.profile.logit_range;
  if (s.mutant == Mutant::M_SKCOL) res.details = skcol_note(op, res.extra_json);
  if (s.mutant == Mutant::M_SKORDER)
    res.details = skorder_note(op, r.profile.logit_range, res.report.passed(), res.extra_json);
  return res;
}

CompareResult compare_mhc_post(Backend& backend, const CompareSetup& s) {
  const MhcRun r = hc_run(s, "hc-post");
  const MhcPostOp op = MhcPostOp::make(r.config, s.tokens);  // in place, as the engine runs it
  require_footprint_fits(op.params(), op.accesses(), s.layout, s.model_label, s.tokens);
  // Host: the streams before and after, the oracle's values and bounds (FP64, ~8 copies).
  const auto& d = op.shape();
  require_affordable("--op hc-post (streams)", bytes_of(op.streams), 8.0,
                     2.0 * static_cast<double>(d.rows) * static_cast<double>(d.hc) *
                         static_cast<double>(d.hc + 1) * static_cast<double>(d.h),
                     s);
  const oracle::MhcPostInputs in = oracle::generate_mhc_post_inputs(op, s.seed, r.profile);
  const Workspace ws = backend.allocate(s.layout, 0);
  const std::vector<float> out = oracle::run_mhc_post(backend, ws, op, in);

  CompareResult res;
  res.report = oracle::judge_mhc_post(op, in, out, backend.name(), s.seed, bounds_of(backend));
  res.weight_pool_bytes = 0;
  res.header = fmt::format(
      "compare hc-post ({} form, in place on hc_streams: hc {}; {}{} streams) on {}, {} tokens: "
      "{}",
      d.lowrank ? "low-rank" : "Sinkhorn", d.hc,
      d.lowrank ? "" : fmt::format("comb logit range {:g}, ", r.profile.logit_range), r.streams,
      s.model_label, s.tokens, arena_and_pool(s, 0));
  res.extra_json = {{"streams", r.streams},
                    {"form", d.lowrank ? "low-rank" : "sinkhorn"},
                    {"logit_range", r.profile.logit_range}};
  if (!s.dump_dir.empty())
    write_mhc_post_dump(s.dump_dir, op, in, out, res.report, dump_info(s, backend, r));
  return res;
}

CompareResult compare_mhc_head(Backend& backend, const CompareSetup& s) {
  const MhcRun r = hc_run(s, "hc-head");
  MhcHeadOp op = MhcHeadOp::make(r.config, s.tokens);
  CompareResult res =
      run_weighted(backend, s, r, op, "--op hc-head (weights and streams)", op.shape().hc,
                   oracle::generate_mhc_head_inputs, oracle::run_mhc_head, oracle::judge_mhc_head,
                   write_mhc_head_dump);
  res.header = fmt::format("compare hc-head (hc {}, hc_eps {:g}; {} streams) on {}, {} tokens: {}",
                           op.shape().hc, op.hc_eps, r.streams, s.model_label, s.tokens,
                           arena_and_pool(s, res.weight_pool_bytes));
  return res;
}

CompareResult compare_mhc_expand(Backend& backend, const CompareSetup& s) {
  const MhcRun r = hc_run(s, "hc-expand");
  const MhcExpandOp op = MhcExpandOp::make(r.config, s.tokens);
  require_footprint_fits(op.params(), op.accesses(), s.layout, s.model_label, s.tokens);
  require_affordable("--op hc-expand (streams)", bytes_of(op.streams), 4.0, 0.0, s);
  const std::vector<uint16_t> in = oracle::generate_mhc_expand_input(op, s.seed);
  const Workspace ws = backend.allocate(s.layout, 0);
  const std::vector<float> out = oracle::run_mhc_expand(backend, ws, op, in);

  CompareResult res;
  res.report = oracle::judge_mhc_expand(op, in, out, backend.name(), s.seed);
  res.weight_pool_bytes = 0;
  res.header = fmt::format("compare hc-expand (hc {}) on {}, {} tokens: {}", op.shape().hc,
                           s.model_label, s.tokens, arena_and_pool(s, 0));
  if (!s.dump_dir.empty())
    write_mhc_expand_dump(s.dump_dir, op, in, out, res.report, dump_info(s, backend, r));
  return res;
}

CompareResult compare_mhc_lowrank(Backend& backend, const CompareSetup& s) {
  const MhcRun r = hc_run(s, "hc-lowrank");
  if (r.config.hc_lowrank == 0)
    throw Error(fmt::format(
        "{} uses the Sinkhorn mHC form (hc_lowrank = 0): --op hc-lowrank needs a low-rank model "
        "(e.g. tiny-mhc-lowrank); its pre step is --op hc-pre",
        s.model_label));
  const bool forced = s.hc.lowrank_path.has_value();
  const oracle::MhcLowRankPath path = s.hc.lowrank_path.value_or(
      MhcSplitCarve::takes_split_path(s.tokens) ? oracle::MhcLowRankPath::split
                                                : oracle::MhcLowRankPath::slab);
  if (path == oracle::MhcLowRankPath::split && s.tokens > kSplitMaxRows)
    throw Error(
        fmt::format("--path split: the split path runs T <= {} tokens (docs/spec/numerics.md §4), "
                    "not {}: use --path slab or at most {} --tokens",
                    kSplitMaxRows, s.tokens, kSplitMaxRows));

  // m = --tokens: the layout was sized for it, so the slab carve is the engine's.
  const oracle::MhcLowRankPlan plan = oracle::plan_mhc_lowrank(r.config, s.tokens, path, s.tokens);
  const oracle::MhcLowRankDims& d = plan.dims;
  const std::string params = fmt::format("hc_lowrank_{}(rows={},hc={},h={},r={})",
                                         oracle::to_string(path), d.rows, d.hc, d.h, d.r);
  require_footprint_fits(params, plan.accesses(), s.layout, s.model_label, s.tokens);
  // Host: the stage tensors read back before and after every stage, the weights, and the
  // oracle's FP64 stage and chain references (~24 copies of the streams' bytes); oracle: the
  // down / inject / up products rows·(2r + hc)·hc·h for the stage references, their bounds and
  // the faithful and exact chains.
  const double W = static_cast<double>(d.hc) * static_cast<double>(d.h);
  const double weight_bytes = 4.0 * W * static_cast<double>(1 + 2 * d.r + d.hc);
  require_affordable(
      "--op hc-lowrank (weights and streams)", weight_bytes + bytes_of(plan.streams), 24.0,
      4.0 * static_cast<double>(d.rows) * static_cast<double>(2 * d.r + d.hc) * W, s);
  const oracle::MhcLowRankInputs in = oracle::generate_mhc_lowrank_inputs(d, s.seed, r.profile);
  const Workspace ws = backend.allocate(s.layout, plan.pool_bytes);
  const oracle::MhcLowRankRun run = oracle::run_mhc_lowrank(backend, ws, plan, in);

  CompareResult res;
  res.report = oracle::judge_mhc_lowrank(run, in, backend.name(), s.seed, bounds_of(backend));
  res.weight_pool_bytes = plan.pool_bytes;
  const uint64_t slabs = plan.slab.size() / 5;
  const char* engine = MhcSplitCarve::takes_split_path(s.tokens) ? "split" : "slab";
  const std::string why =
      forced
          ? fmt::format("forced by --path; the engine runs {} at T = {}", engine, s.tokens)
          : std::string("chosen by the token count as the engine does: T <= 64 split, else slab");
  const std::string stages =
      path == oracle::MhcLowRankPath::split
          ? std::string("norm -> down -> collapse in FP32")
          : fmt::format("norm -> down -> inject -> up -> collapse in BF16, {} slab{} of <= {} rows",
                        slabs, slabs == 1 ? "" : "s", plan.slab.front().carve.slab_rows);
  res.header = fmt::format(
      "compare hc-lowrank, {} path ({}): {}; hc {}, r {}, {} streams; on {}, {} tokens: {}",
      oracle::to_string(path), why, stages, d.hc, d.r, r.streams, s.model_label, s.tokens,
      arena_and_pool(s, plan.pool_bytes));
  res.extra_json = {{"streams", r.streams},
                    {"path", oracle::to_string(path)},
                    {"path_forced", forced},
                    {"slabs", slabs},
                    {"nonfinite_tokens", run.diagnostics.nonfinite_tokens}};
  if (!s.dump_dir.empty())
    write_mhc_lowrank_dump(s.dump_dir, plan, in, run, res.report, dump_info(s, backend, r));
  return res;
}

}  // namespace bufferlab::cli
