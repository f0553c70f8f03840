// The non-routing MoE / FFN ops on a backend, through the core interface only.
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "harness_io.h"

#include <algorithm>
#include <string>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab::oracle {
namespace {

using detail::grow_to_hold;
using detail::read_back;
using detail::upload_exact;
std::vector<uint16_t> read_bf16(Backend& b, const Workspace& ws, const TensorRef& t) {
  return read_back<uint16_t>(b, ws, t);
}

void execute(Backend& backend, const Workspace& ws, const OpDescriptor& op) {
  backend.execute(ws, op);
  backend.synchronize();
}

GatherInputs stored_gather(Backend& b, const Workspace& ws, const MoeGatherOp& op) {
  return {read_bf16(b, ws, op.input), read_back<uint32_t>(b, ws, op.ids)};
}
ExpertGemmInputs stored_expert(Backend& b, const Workspace& ws, const MoeExpertGemmOp& op) {
  return {read_bf16(b, ws, op.input), read_back<uint32_t>(b, ws, op.ids),
          read_bf16(b, ws, op.weight)};
}
bool combine_touches_input(const MoeCombineOp& op) {
  const TensorRef &o = op.output, &x = op.input;
  return op.reads_input || (o.space == x.space && o.buffer == x.buffer && o.offset == x.offset);
}
CombineInputs stored_combine(Backend& b, const Workspace& ws, const MoeCombineOp& op) {
  CombineInputs s{read_back<uint32_t>(b, ws, op.ids),
                  read_back<float>(b, ws, op.weights),
                  read_bf16(b, ws, op.down),
                  {}};
  if (combine_touches_input(op)) s.input = read_bf16(b, ws, op.input);
  return s;
}

}  // namespace

Layout ffn_footprint_layout(const std::vector<Access>& accesses) {
  return detail::footprint_of(accesses);
}

uint64_t ffn_weight_pool_bytes(const std::vector<Access>& accesses) {
  uint64_t end = 0;
  for (const Access& a : accesses)
    if (a.tensor.space == Space::weights)
      end = std::max(end, (Size(a.tensor.offset) + a.tensor.bytes()).value());
  return end;
}

Layout ffn_footprint_layout(const ExpertChain& c) {
  std::vector<Access> all;
  for (const auto& part : {c.gather.accesses(), c.gate.accesses(), c.up.accesses(),
                           c.act.accesses(), c.down.accesses(), c.combine.accesses()})
    all.insert(all.end(), part.begin(), part.end());
  // The combine's x is read by the gather even when the combine does not read it.
  all.push_back({c.combine.input, AccessKind::read, {}});
  return ffn_footprint_layout(all);
}

GatherRun run_moe_gather(Backend& backend, const Workspace& ws, const MoeGatherOp& op,
                         const GatherInputs& in) {
  backend.poison(ws);
  upload_exact(backend, ws, op.input, in.input);
  upload_exact(backend, ws, op.ids, in.ids);
  GatherRun r{stored_gather(backend, ws, op), {}};
  execute(backend, ws, op);
  r.out = read_bf16(backend, ws, op.gathered);
  return r;
}

ExpertGemmRun run_moe_expert_gemm(Backend& backend, const Workspace& ws, const MoeExpertGemmOp& op,
                                  const ExpertGemmInputs& in) {
  backend.poison(ws);
  upload_exact(backend, ws, op.input, in.input);
  upload_exact(backend, ws, op.ids, in.ids);
  upload_exact(backend, ws, op.weight, in.weight);
  ExpertGemmRun r{stored_expert(backend, ws, op), {}};
  execute(backend, ws, op);
  r.out = read_bf16(backend, ws, op.output);
  return r;
}

SwigluRun run_swiglu(Backend& backend, const Workspace& ws, const SwigluOp& op,
                     const SwigluInputs& in) {
  backend.poison(ws);
  upload_exact(backend, ws, op.gate, in.gate);
  upload_exact(backend, ws, op.up, in.up);
  SwigluRun r{{read_bf16(backend, ws, op.gate), read_bf16(backend, ws, op.up)}, {}};
  execute(backend, ws, op);
  r.out = read_bf16(backend, ws, op.gate);
  return r;
}

CombineRun run_moe_combine(Backend& backend, const Workspace& ws, const MoeCombineOp& op,
                           const CombineInputs& in) {
  backend.poison(ws);
  upload_exact(backend, ws, op.ids, in.ids);
  upload_exact(backend, ws, op.weights, in.weights);
  upload_exact(backend, ws, op.down, in.down);
  if (combine_touches_input(op)) upload_exact(backend, ws, op.input, in.input);
  CombineRun r{stored_combine(backend, ws, op), {}};
  execute(backend, ws, op);
  r.out = read_bf16(backend, ws, op.output);
  return r;
}

GemmRun run_gemm(Backend& backend, const Workspace& ws, const GemmOp& op, const GemmInputs& in) {
  if (op.inputs.empty()) throw Error(op.params() + ": no activation input");
  const bool in_place = op.epilogue() != GemmEpilogue::store;
  backend.poison(ws);
  upload_exact(backend, ws, op.inputs[0].tensor, in.x);
  upload_exact(backend, ws, op.weight, in.weight);
  if (in_place) upload_exact(backend, ws, op.output, in.out_old);
  GemmRun r{{read_bf16(backend, ws, op.inputs[0].tensor), read_bf16(backend, ws, op.weight),
             in_place ? read_bf16(backend, ws, op.output) : std::vector<uint16_t>{}},
            {}};
  execute(backend, ws, op);
  r.out = read_bf16(backend, ws, op.output);
  return r;
}

LmHeadRun run_lm_head(Backend& backend, const Workspace& ws, const LmHeadOp& op,
                      const LmHeadInputs& in) {
  backend.poison(ws);
  upload_exact(backend, ws, op.input, in.input);
  upload_exact(backend, ws, op.table, in.table);
  LmHeadRun r{{read_bf16(backend, ws, op.input), read_bf16(backend, ws, op.table)}, {}};
  execute(backend, ws, op);
  r.out = read_bf16(backend, ws, op.output);
  return r;
}

ExpertChainRun run_expert_chain(Backend& backend, const Workspace& ws, const ExpertChain& c,
                                const ExpertChainInputs& in) {
  backend.poison(ws);
  upload_exact(backend, ws, c.gather.input, in.x);
  upload_exact(backend, ws, c.gather.ids, in.ids);
  upload_exact(backend, ws, c.combine.weights, in.weights);
  upload_exact(backend, ws, c.gate.weight, in.w_gate);
  upload_exact(backend, ws, c.up.weight, in.w_up);
  upload_exact(backend, ws, c.down.weight, in.w_down);

  ExpertChainRun r;
  r.gather.stored = stored_gather(backend, ws, c.gather);
  execute(backend, ws, c.gather);
  r.gather.out = read_bf16(backend, ws, c.gather.gathered);

  for (auto [op, run] : {std::pair{&c.gate, &r.gate}, std::pair{&c.up, &r.up}}) {
    run->stored = stored_expert(backend, ws, *op);
    execute(backend, ws, *op);
    run->out = read_bf16(backend, ws, op->output);
  }

  r.act.stored = {read_bf16(backend, ws, c.act.gate), read_bf16(backend, ws, c.act.up)};
  execute(backend, ws, c.act);
  r.act.out = read_bf16(backend, ws, c.act.gate);

  r.down.stored = stored_expert(backend, ws, c.down);
  execute(backend, ws, c.down);
  r.down.out = read_bf16(backend, ws, c.down.output);

  r.combine.stored = stored_combine(backend, ws, c.combine);
  execute(backend, ws, c.combine);
  r.combine.out = read_bf16(backend, ws, c.combine.output);
  return r;
}

}  // namespace bufferlab::oracle
