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
#include "common/backend_bounds.h"
#include "common/human_bytes.h"
#include "compare/compare_ops.h"
#include "compare/compare_routing_dump.h"

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
  const oracle::BoundModel bm = bounds_of(backend);
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
}  // namespace bufferlab::cli
