// The .npy + manifest.json dumps of the MoE compare runs. Weight tables are not dumped (they
// are regenerated from the seed and can be gigabytes); every activation, stored output and
// oracle value is.
#include "compare/compare_routing_dump.h"

#include <nlohmann/json.hpp>

#include "bufferlab/oracle/mode.h"
#include "bufferlab/oracle/routing.h"
#include "compare/compare_dump.h"
#include "compare/compare_report.h"

namespace bufferlab::cli {
namespace {

nlohmann::json manifest_head(const std::string& op, const std::string& params,
                             const std::string& model, uint64_t seed, const std::string& backend,
                             const oracle::AgreementReport& report) {
  nlohmann::json m = dump_manifest_head(op, params, seed, backend, report);
  m["model"] = model;
  m["formats"]["u32"] = "<u4";
  m["weights"] = "not dumped: regenerated from the seed by the same command";
  return m;
}

}  // namespace

void write_routing_dump(const std::string& dir, const oracle::RoutingOps& ops,
                        const oracle::RouterInputs& router_in,
                        const oracle::TopKHostInputs& topk_in, const oracle::StoredLogits& logits,
                        const oracle::TopKOutputs* topk, const oracle::AgreementReport& report,
                        const std::string& model, uint64_t seed, const std::string& backend) {
  DumpWriter w(dir);
  const auto& d = ops.router.shape();
  const std::vector<uint64_t> x_shape{d.rows, d.hidden}, l_shape{d.rows, d.experts};
  if (!router_in.x_bf16.empty())
    w.bf16("input_x.npy", "norm_output (router input)", router_in.x_bf16, x_shape);
  if (!router_in.x_f32.empty())
    w.f32("input_x_f32.npy", "moe_router_in_f32", router_in.x_f32, x_shape);
  if (!logits.bf16.empty()) w.bf16("backend_logits.npy", "gate_logits", logits.bf16, l_shape);
  if (!logits.f32.empty()) w.f32("backend_logits.npy", "gate_logits_f32", logits.f32, l_shape);
  w.f64("oracle_exact_logits.npy", "FP64 logits of the stored router inputs",
        oracle::router_logits(ops.router, router_in, oracle::Mode::exact), l_shape);
  if (!topk_in.bias.empty()) w.f32("input_bias.npy", "routing bias", topk_in.bias, {d.experts});
  std::string op = "router";
  if (topk != nullptr) {
    op = "topk";
    const uint64_t k = ops.topk.shape().top_k;
    w.u32("backend_topk_ids.npy", "top-k ids (scratch)", topk->ids, {d.rows, k});
    w.f32("backend_topk_weights.npy", "top-k weights (scratch)", topk->weights, {d.rows, k});
    const oracle::TopKReference ref = oracle::select_topk(
        ops.topk, {logits.values(), topk_in.bias, topk_in.token_ids, topk_in.tid2eid});
    w.u32("oracle_topk_ids_of_stored_logits.npy", "FP64 top-k of the backend's stored logits",
          ref.ids, {d.rows, k});
    w.f64("oracle_topk_weights_of_stored_logits.npy", "their FP64 weights", ref.weights,
          {d.rows, k});
  }
  w.write_manifest(manifest_head(op, topk ? ops.topk.params() : ops.router.params(), model, seed,
                                 backend, report));
}

void write_experts_dump(const std::string& dir, const oracle::ExpertChain& chain,
                        const oracle::ExpertChainInputs& in, const oracle::ExpertChainRun& run,
                        const oracle::AgreementReport& report, const std::string& model,
                        uint64_t seed, const std::string& backend) {
  DumpWriter w(dir);
  const auto& c = chain.combine.shape();
  const uint64_t I = chain.gate.shape().N;
  w.bf16("input_x.npy", "expert input x", in.x, {c.rows, c.width});
  w.u32("input_ids.npy", "top-k ids (renumbered)", in.ids, {c.rows, c.top_k});
  w.f32("input_weights.npy", "top-k weights", in.weights, {c.rows, c.top_k});
  w.bf16("backend_gate.npy", "expert_gate_out after gate", run.gate.out, {c.rows, c.top_k * I});
  w.bf16("backend_up.npy", "expert_up_out", run.up.out, {c.rows, c.top_k * I});
  w.bf16("backend_act.npy", "expert_gate_out after swiglu", run.act.out, {c.rows, c.top_k * I});
  w.bf16("backend_down.npy", "expert_down_out", run.down.out, {c.rows * c.top_k, c.width});
  w.bf16("backend_out.npy", "combine output", run.combine.out, {c.rows, c.width});
  w.f64("oracle_faithful_chain.npy", "FP64 chain of the original inputs, stores rounded",
        oracle::expert_chain(chain, in, oracle::Mode::faithful), {c.rows, c.width});
  w.write_manifest(manifest_head("experts", chain.params(), model, seed, backend, report));
}

void write_lm_head_dump(const std::string& dir, const LmHeadOp& op, const oracle::LmHeadInputs& in,
                        const oracle::LmHeadRun& run, const oracle::AgreementReport& report,
                        const std::string& model, uint64_t seed, const std::string& backend) {
  DumpWriter w(dir);
  const auto& d = op.shape();
  w.bf16("input_x.npy", "final norm rows", in.input, {d.rows, d.hidden});
  w.bf16("backend_logits.npy", "logits", run.out, {d.logits_rows, d.vocab});
  const oracle::OpReference ref =
      oracle::lm_head(op, in, oracle::Mode::faithful, oracle::cpu_bounds());
  w.f64("oracle_faithful_logits.npy", "FP64 logits, BF16-rounded", ref.value,
        {d.logits_rows, d.vocab});
  w.write_manifest(manifest_head("lm-head", op.params(), model, seed, backend, report));
}

}  // namespace bufferlab::cli
