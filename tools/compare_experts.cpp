// `bufferlab compare --op experts`: the routed-expert chain gather → gate → up → SwiGLU → down
// → combine on seeded routing (zero experts included when the model has them), every stage
// judged on the backend's own stored inputs (oracle/moe_ffn_judge.h).
//
// Only the experts the tokens select get weights, so real presets fit in memory: the selected
// routed experts are renumbered 0..U−1 in ascending order (zero experts follow at U..), and
// the chain runs on a model with U routed experts. Ascending renumbering keeps the gather
// order (rows sorted by expert) and every per-slot product identical to the full model's.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/error.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "bufferlab/oracle/moe_ffn_inputs.h"
#include "bufferlab/oracle/moe_ffn_judge.h"
#include "bufferlab/oracle/pool_placement.h"
#include "compare_ops.h"
#include "compare_routing_dump.h"
#include "human_bytes.h"

namespace bufferlab::cli {
namespace {

struct Renumbered {
  std::vector<uint32_t> ids;  // in the compact numbering
  uint64_t selected = 0;      // U: distinct routed experts the tokens select
};

Renumbered renumber_selected(const std::vector<uint32_t>& ids, uint64_t experts) {
  std::vector<uint32_t> used;
  for (uint32_t id : ids)
    if (id < experts) used.push_back(id);
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  Renumbered r;
  r.selected = used.size();
  r.ids.reserve(ids.size());
  for (uint32_t id : ids) {
    if (id >= experts) {  // a zero expert keeps its place after the routed ones
      r.ids.push_back(static_cast<uint32_t>(id - experts + r.selected));
      continue;
    }
    r.ids.push_back(
        static_cast<uint32_t>(std::lower_bound(used.begin(), used.end(), id) - used.begin()));
  }
  return r;
}

// What one compare run may cost this machine before it is refused with a clear error instead
// of running out of memory or computing for hours: host memory, as a multiple `held` of the
// weight bytes (their host copy, the backend's pool, the copies read back for judging, the
// oracle's arrays — measured: experts 9.4 GiB peak for 2.13 GiB of weights, lm-head 4.5 GiB
// for 0.58 GiB, on qwen3-next-80b at 64 tokens), and the FP64 oracle's multiply-adds (2^37 ≈
// 1.4e11: a few minutes; qwen3-next-80b at 64 tokens needs 2e10).
constexpr double kMaxRunBytes = 12.0 * (uint64_t{1} << 30);
constexpr double kMaxOracleMacs = static_cast<double>(uint64_t{1} << 37);

void require_affordable(const std::string& what, double weight_bytes, double held,
                        double oracle_macs, const CompareSetup& s) {
  const double gib = static_cast<double>(uint64_t{1} << 30);
  if (held * weight_bytes <= kMaxRunBytes && oracle_macs <= kMaxOracleMacs) return;
  throw Error(fmt::format(
      "{} on {} at {} tokens needs about {:.1f} GiB of host memory ({:.1f} GiB of weights, "
      "held about {:g} times) and {:.3g} oracle multiply-adds; the limits are {:.0f} GiB and "
      "{:.3g}: use fewer --tokens",
      what, s.model_label, s.tokens, held * weight_bytes / gib, weight_bytes / gib, held,
      oracle_macs, kMaxRunBytes / gib, kMaxOracleMacs));
}

}  // namespace

CompareResult compare_experts(Backend& backend, const CompareSetup& s) {
  const ModelConfig& cfg = s.config;
  if (cfg.num_experts == 0)
    throw Error(s.model_label +
                " has no routed experts (num_experts = 0): --op experts needs "
                "an MoE model");
  const uint64_t E = cfg.num_experts, zero = cfg.zero_expert_num, k = cfg.num_experts_per_tok;
  oracle::RoutingProfile routing;
  routing.experts = E;
  routing.zero_experts = zero;
  routing.zero_fraction = zero > 0 ? 0.25 : 0.0;
  const std::vector<uint32_t> drawn = oracle::seeded_ids(s.tokens, k, s.seed, routing);
  const Renumbered compact = renumber_selected(drawn, E);

  ModelConfig sub = cfg;
  sub.num_experts = std::max<uint64_t>(compact.selected, 1);  // all slots zero experts: keep 1
  const oracle::ExpertChain chain = oracle::ExpertChain::make(sub, s.tokens, /*hash=*/false);
  std::vector<Access> accesses;
  for (const auto& a : {chain.gather.accesses(), chain.gate.accesses(), chain.up.accesses(),
                        chain.act.accesses(), chain.down.accesses(), chain.combine.accesses()})
    accesses.insert(accesses.end(), a.begin(), a.end());
  require_footprint_fits(chain.params(), accesses, s.layout, s.model_label, s.tokens);
  // Oracle: the faithful chain, the per-stage references and their bounds (~3 passes).
  require_affordable("--op experts", static_cast<double>(chain.weight_pool_bytes), 4.5,
                     3.0 * static_cast<double>(oracle::expert_chain_cost(chain)), s);

  oracle::RoutingProfile compact_profile = routing;
  compact_profile.experts = sub.num_experts;
  oracle::ExpertChainInputs in =
      oracle::generate_expert_chain_inputs(chain, s.seed, compact_profile, oracle::ValueProfile{});
  in.ids = compact.ids;

  const Workspace ws = backend.allocate(s.layout, chain.weight_pool_bytes);
  const oracle::ExpertChainRun run = oracle::run_expert_chain(backend, ws, chain, in);
  const oracle::BoundModel bm =
      backend.name() == "cpu" ? oracle::cpu_bounds() : oracle::device_bounds();
  CompareResult res;
  res.report = oracle::judge_expert_chain(chain, in, run, backend.name(), s.seed, bm);
  res.weight_pool_bytes = chain.weight_pool_bytes;
  res.header = fmt::format(
      "compare experts on {}, {} tokens x top_k {}: arena {}, weight pool {} ({} of {} routed "
      "experts selected, only they get weights; ids renumbered ascending)",
      s.model_label, s.tokens, k, human_bytes(s.layout.arena_bytes()),
      human_bytes(chain.weight_pool_bytes), compact.selected, E);
  res.extra_json = {{"experts_selected", compact.selected}, {"experts", E}, {"zero_experts", zero}};
  if (!s.dump_dir.empty())
    write_experts_dump(s.dump_dir, chain, in, run, res.report, s.model_label, s.seed,
                       backend.name());
  return res;
}

CompareResult compare_lm_head(Backend& backend, const CompareSetup& s) {
  const ModelConfig& cfg = s.config;
  const uint64_t h = cfg.hidden_size, vocab = cfg.vocab_size;
  // Decode-like rows: logits row r is the LM head of input row r (buffers.md §4.9).
  LmHeadOp op = LmHeadOp::make(s.tokens, s.tokens, h, vocab,
                               fmt::format("decode(rows={})", s.tokens), {s.tokens, 0, 0});
  const uint64_t pool = oracle::place_in_pool({&op.table});
  require_footprint_fits(op.params(), op.accesses(), s.layout, s.model_label, s.tokens);
  // Oracle: value and bound, one pass each over tokens × vocab × h.
  require_affordable(
      "--op lm-head", static_cast<double>(op.table.bytes()), 8.0,
      2.0 * static_cast<double>(s.tokens) * static_cast<double>(vocab) * static_cast<double>(h), s);
  oracle::LmHeadInputs in;
  in.input = oracle::seeded_bf16(s.tokens * h, s.seed, oracle::ValueProfile{});
  in.table = oracle::seeded_bf16(vocab * h, s.seed + 1,
                                 oracle::ValueProfile{1.0 / std::sqrt(static_cast<double>(h)), 0});
  const Workspace ws = backend.allocate(s.layout, pool);
  const oracle::LmHeadRun run = oracle::run_lm_head(backend, ws, op, in);
  const oracle::BoundModel bm =
      backend.name() == "cpu" ? oracle::cpu_bounds() : oracle::device_bounds();
  CompareResult res;
  res.report = oracle::judge_lm_head(op, run, backend.name(), s.seed, bm);
  res.weight_pool_bytes = pool;
  res.header = fmt::format(
      "compare lm-head on {}, {} logits rows x vocab {}: arena {}, weight pool {}", s.model_label,
      s.tokens, vocab, human_bytes(s.layout.arena_bytes()), human_bytes(pool));
  if (!s.dump_dir.empty())
    write_lm_head_dump(s.dump_dir, op, in, run, res.report, s.model_label, s.seed, backend.name());
  return res;
}

void require_footprint_fits(const std::string& params, const std::vector<Access>& accesses,
                            const Layout& layout, const std::string& model_label, uint64_t tokens) {
  for (const Access& a : accesses) {
    const TensorRef& t = a.tensor;
    if (t.space != Space::arena) continue;
    const uint64_t have = layout.entry(t.buffer).bytes;
    if (t.offset + t.bytes() > have)
      throw Error(
          fmt::format("{} needs {} bytes of {} ({}), but the sizing of {} at {} tokens "
                      "gives it {} bytes",
                      params, t.offset + t.bytes(), buffer_name(t.buffer), t.to_string(),
                      model_label, tokens, have));
  }
}

}  // namespace bufferlab::cli
