// `bufferlab compare --op router|topk`: the router GEMM alone, or router → top-k, on the path
// of --path, judged by oracle/routing_judge.h. For top-k the report also names the first token
// whose selection differs from the oracle's (on the exact logits of the router's stored
// inputs) and prints both ranked key lists around the cut.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/error.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/oracle/routing_judge.h"
#include "bufferlab/properties/routing_generators.h"
#include "common/backend_bounds.h"
#include "common/human_bytes.h"
#include "compare/compare_ops.h"
#include "compare/compare_routing_dump.h"

namespace bufferlab::cli {
namespace {

RouterPrecision parse_path(const std::string& s) {
  if (s == "bf16") return RouterPrecision::bf16;
  if (s == "fp32-gate") return RouterPrecision::fp32_gate;
  if (s == "fp32-routing") return RouterPrecision::fp32_routing;
  throw Error("--path: unknown router path '" + s + "' (known: bf16, fp32-gate, fp32-routing)");
}

gen::RoutingPattern parse_pattern(const std::string& s) {
  std::string known;
  for (gen::RoutingPattern p : gen::kRoutingPatterns) {
    if (s == gen::to_string(p)) return p;
    known += (known.empty() ? "" : ", ") + std::string(gen::to_string(p));
  }
  throw Error("--pattern: unknown input pattern '" + s + "' (known: " + known + ")");
}

struct RoutingRun {
  gen::RoutingCase c;
  gen::RoutingTensors t;
  oracle::RoutingOps ops;
  oracle::RouterInputs router_in;
  oracle::TopKHostInputs topk_in;
};

RoutingRun prepare(const CompareSetup& s) {
  const ModelConfig& cfg = s.config;
  if (cfg.num_experts == 0)
    throw Error(s.model_label +
                " has no routed experts (num_experts = 0): --op router and "
                "--op topk need an MoE model");
  if (s.hash && cfg.num_hash_layers == 0)
    throw Error("--hash: " + s.model_label + " has no hash-routed layers (num_hash_layers = 0)");
  RoutingRun r;
  r.c.config = cfg;
  r.c.rows = s.tokens;
  r.c.precision = parse_path(s.path);
  r.c.hash = s.hash;
  r.c.pattern = parse_pattern(s.pattern);
  r.c.magnitude = 0;
  r.c.seed = s.seed;
  r.t = gen::routing_tensors(r.c);
  r.ops = oracle::make_routing_ops(cfg, s.tokens, r.c.precision, s.hash);
  r.router_in = {r.t.x_bf16, r.t.x_f32, r.t.weight};
  r.topk_in = {r.t.bias, r.t.token_ids, r.t.tid2eid};
  return r;
}

std::string header(const char* what, const CompareSetup& s, const RoutingRun& r) {
  return fmt::format("compare {} (path {}, inputs {}{}) on {}, {} tokens: arena {}, weight pool {}",
                     what, s.path, s.pattern, s.hash ? ", hash layer" : "", s.model_label, s.tokens,
                     human_bytes(s.layout.arena_bytes()), human_bytes(r.ops.pool_bytes));
}

// Experts of one row ranked by the total order of routing.h (key desc, index asc, NaN last).
std::vector<uint32_t> ranking(const std::vector<double>& keys, uint64_t row, uint64_t cols) {
  std::vector<uint32_t> order(cols);
  for (uint32_t e = 0; e < cols; ++e) order[e] = e;
  const double* k = keys.data() + row * cols;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return oracle::ranks_before(k[a], a, k[b], b); });
  return order;
}

// "rank  expert  key" lines for ranks [center−3, center+3) of one ranked list (center is
// 1-based), the cut after rank k marked, the backend's choices flagged.
std::string ranks_around(const std::vector<uint32_t>& order, const std::vector<double>& keys,
                         uint64_t row, uint64_t cols, uint64_t k, uint64_t center,
                         const std::vector<uint32_t>& chosen) {
  std::string out;
  const uint64_t from = center > 3 ? center - 3 : 0, to = std::min<uint64_t>(cols, center + 3);
  for (uint64_t i = from; i < to; ++i) {
    const uint32_t e = order[i];
    const bool picked = std::find(chosen.begin(), chosen.end(), e) != chosen.end();
    out += fmt::format("      {:>4}  expert {:>5}  key {:>+.9g}{}\n", i + 1, e,
                       keys[row * cols + e], picked ? "  selected" : "");
    if (i + 1 == k) out += "      ---- cut (top_k = " + std::to_string(k) + ") ----\n";
  }
  return out;
}

// The first token whose backend selection (set or order) differs from the oracle's selection
// on the exact logits of the stored router inputs, with both key lists around the cut.
std::string first_difference(const RoutingRun& r, const oracle::ChainOutputs& out,
                             nlohmann::json& j) {
  const MoeTopKOp& op = r.ops.topk;
  const uint64_t rows = op.shape().rows, cols = op.shape().experts, k = op.shape().top_k;
  const std::vector<double> exact =
      oracle::router_logits(r.ops.router, r.router_in, oracle::Mode::exact);
  const oracle::TopKReference want =
      oracle::select_topk(op, {exact, r.topk_in.bias, r.topk_in.token_ids, r.topk_in.tid2eid});
  const oracle::TopKReference seen = oracle::select_topk(
      op, {out.logits.values(), r.topk_in.bias, r.topk_in.token_ids, r.topk_in.tid2eid});
  uint64_t differing = 0, first = rows;
  for (uint64_t t = 0; t < rows; ++t) {
    const bool same = std::equal(want.ids.begin() + t * k, want.ids.begin() + (t + 1) * k,
                                 out.topk.ids.begin() + t * k);
    if (same) continue;
    ++differing;
    if (first == rows) first = t;
  }
  j["selection_rows_differing_from_oracle"] = differing;
  if (differing == 0)
    return fmt::format(
        "selection: all {} tokens select the oracle's experts in the oracle's "
        "order (oracle: exact logits of the stored router inputs)\n",
        rows);
  j["first_differing_token"] = first;
  const std::vector<uint32_t> chosen(out.topk.ids.begin() + first * k,
                                     out.topk.ids.begin() + (first + 1) * k);
  uint64_t rank = 0;  // the first selection position where backend and oracle differ
  while (rank < k && chosen[rank] == want.ids[first * k + rank]) ++rank;
  j["first_differing_rank"] = rank + 1;
  std::string s = fmt::format(
      "selection: {} of {} tokens differ from the oracle's selection (set or order); the first "
      "is token {}, at rank {}: the oracle has expert {}, the backend expert {}\n",
      differing, rows, first, rank + 1, want.ids[first * k + rank], chosen[rank]);
  s += "    oracle (exact logits of the stored inputs), ranked:\n";
  s += ranks_around(ranking(want.keys, first, cols), want.keys, first, cols, k, rank + 1, chosen);
  s += "    backend (keys of its stored logits), ranked; `selected` = what the backend chose:\n";
  s += ranks_around(ranking(seen.keys, first, cols), seen.keys, first, cols, k, rank + 1, chosen);
  s += "    a difference is a failure only where the gap clears the bounds (see the tie checks)\n";
  return s;
}

}  // namespace

CompareResult compare_router(Backend& backend, const CompareSetup& s) {
  const RoutingRun r = prepare(s);
  require_footprint_fits(r.ops.router.params(), r.ops.router.accesses(), s.layout, s.model_label,
                         s.tokens);
  const Workspace ws = backend.allocate(s.layout, r.ops.pool_bytes);
  const oracle::StoredLogits stored = oracle::run_router(backend, ws, r.ops.router, r.router_in);
  CompareResult res;
  res.report = oracle::judge_router(r.ops.router, r.router_in, stored, bounds_of(backend).gemm_u,
                                    backend.name(), s.seed);
  res.header = header("router", s, r);
  res.weight_pool_bytes = r.ops.pool_bytes;
  res.extra_json = {{"path", s.path}, {"pattern", s.pattern}};
  if (!s.dump_dir.empty())
    write_routing_dump(s.dump_dir, r.ops, r.router_in, r.topk_in, stored, nullptr, res.report,
                       s.model_label, s.seed, backend.name());
  return res;
}

CompareResult compare_topk(Backend& backend, const CompareSetup& s) {
  const RoutingRun r = prepare(s);
  std::vector<Access> accesses = r.ops.router.accesses();
  for (const Access& a : r.ops.topk.accesses()) accesses.push_back(a);
  require_footprint_fits(r.ops.topk.params(), accesses, s.layout, s.model_label, s.tokens);
  const Workspace ws = backend.allocate(s.layout, r.ops.pool_bytes);
  const oracle::ChainOutputs out =
      oracle::run_routing_chain(backend, ws, r.ops, r.router_in, r.topk_in);
  const oracle::RoutingVerdict v = oracle::judge_routing_chain(
      r.ops, r.router_in, r.topk_in, out, bounds_of(backend).gemm_u, backend.name(), s.seed);
  CompareResult res;
  res.report = v.report;
  res.header = header("topk (router -> top-k)", s, r);
  res.weight_pool_bytes = r.ops.pool_bytes;
  res.extra_json = {
      {"path", s.path}, {"pattern", s.pattern}, {"nan_keys", out.topk.diagnostics.nan_keys}};
  // What the verdict adds to the report; cmd_compare prints it before the verdict line.
  res.details = oracle::format_tie_checks(v);
  if (!r.c.hash) res.details += first_difference(r, out, res.extra_json);
  if (!s.dump_dir.empty())
    write_routing_dump(s.dump_dir, r.ops, r.router_in, r.topk_in, out.logits, &out.topk, res.report,
                       s.model_label, s.seed, backend.name());
  return res;
}

}  // namespace bufferlab::cli
