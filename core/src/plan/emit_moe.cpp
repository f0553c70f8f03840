// The steps of a routed MoE FFN sub-block (FfnKind moe and hash_moe), docs/spec/numerics.md §2 and
// docs/spec/buffers.md §5. Input norm_output "norm" (and moe_router_in_f32 "norm_f32" on the
// FP32-routing path); output moe_output "@block_out". All GEMMs here are BF16-in /
// FP32-accumulate (§5 "Paths": router and experts never take the FP8, Q2 or LoRA paths).
//
//   router → top-k (scratch) → [latent down → ssm_ba] → gather → expert_down_out
//   → gate → expert_gate_out, up → expert_up_out → swiglu in place → down → expert_down_out
//   → combine → moe_output (latent: ssm_ba in place, then latent up → moe_output)
//   → [shared: up → ssm_qkvz, gate+swiglu in place, down accumulating into moe_output]
#include <string>

#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "builder.h"

namespace bufferlab::plan::detail {
namespace {

RouterPrecision router_precision(RouterPath p) {
  switch (p) {
    case RouterPath::bf16:
      return RouterPrecision::bf16;
    case RouterPath::fp32_gate:
      return RouterPrecision::fp32_gate;
    case RouterPath::fp32_routing:
      return RouterPrecision::fp32_routing;
  }
  return RouterPrecision::bf16;
}

TensorRef norm_in(const Ctx& c) {
  return arena(BufferId::norm_output, 0, {c.T, c.config.hidden_size}, DType::bf16);
}

TensorRef moe_out(const Ctx& c) {
  return arena(BufferId::moe_output, 0, {c.T, c.config.hidden_size}, DType::bf16);
}

// A plain BF16 GEMM with T result rows (no padding: the BF16 path writes exactly T rows).
GemmOp bf16_gemm(const Ctx& c, std::string label, std::vector<Access> inputs, uint64_t K,
                 uint64_t N, BufferId out, std::string out_value, std::string kind = "bf16") {
  return GemmOp::make(std::move(label), std::move(kind), std::move(inputs), c.T, c.T, K, N, out, 0,
                      DType::bf16, std::move(out_value));
}

void emit_routing(Builder& b, const Ctx& c, bool hash) {
  const MoeRouterOp router = MoeRouterOp::make(c.config, c.T, router_precision(c.paths.router));
  b.add(router);
  b.add(MoeTopKOp::make(c.config, c.T, router.logits.dtype == DType::f32, hash));
}

// Latent MoE (moe_latent_size > 0): experts run in latent space; the latent lives in ssm_ba
// (docs/spec/buffers.md §5 "latent-MoE latent").
void emit_latent_down(Builder& b, const Ctx& c) {
  b.add(bf16_gemm(c, "moe_latent_down", {rd(norm_in(c), "norm")}, c.config.hidden_size,
                  c.config.moe_latent_size, BufferId::ssm_ba, "moe_latent"));
}

// Routed experts through the combine. `routed_value` names the combine's (or latent
// up-projection's) output in moe_output.
void emit_routed_experts(Builder& b, const Ctx& c, bool hash, const std::string& routed_value) {
  const ModelConfig& cfg = c.config;
  b.add(MoeGatherOp::make(cfg, c.T));
  b.add(MoeExpertGemmOp::make(cfg, c.T, ExpertProj::gate));
  b.add(MoeExpertGemmOp::make(cfg, c.T, ExpertProj::up));
  const uint64_t width = (Size(cfg.num_experts_per_tok) * cfg.moe_intermediate_size).value();
  b.add(SwigluOp::make(c.T, width, cfg.swiglu_limit, "expert_gate", "expert_up", "expert_act"));
  b.add(MoeExpertGemmOp::make(cfg, c.T, ExpertProj::down));
  MoeCombineOp combine = MoeCombineOp::make(cfg, c.T, hash);
  const bool latent = cfg.moe_latent_size > 0;
  if (!latent) combine.output_value = routed_value;
  b.add(combine);
  if (!latent) return;
  const TensorRef combined = combine.output;  // ssm_ba [T, latent]
  b.add(bf16_gemm(c, "moe_latent_up", {rd(combined, combine.output_value)}, cfg.moe_latent_size,
                  cfg.hidden_size, BufferId::moe_output, routed_value));
}

// Shared expert (width S): docs/spec/buffers.md §5 gives it ONE home, ssm_qkvz [T, S] ("MoE
// shared-expert up scratch"), so the up output goes there and the gate GEMM applies silu(g)·u in
// its epilogue, reading and rewriting that same tensor in place (the gate never lands in memory).
// The down GEMM accumulates into moe_output in place (β = 1): a declared in-place access.
void emit_shared_expert(Builder& b, const Ctx& c, const std::string& routed_value) {
  const ModelConfig& cfg = c.config;
  const uint64_t S = cfg.shared_expert_intermediate_size, h = cfg.hidden_size;
  const TensorRef up = arena(BufferId::ssm_qkvz, 0, {c.T, S}, DType::bf16);
  b.add(bf16_gemm(c, "shared_expert_up", {rd(norm_in(c), "norm")}, h, S, BufferId::ssm_qkvz,
                  "shared_up"));
  b.add(bf16_gemm(c, "shared_expert_gate_swiglu", {rd(norm_in(c), "norm"), rd(up, "shared_up")}, h,
                  S, BufferId::ssm_qkvz, "shared_act", "bf16+swiglu-epilogue"));
  b.add(bf16_gemm(c, "shared_expert_down", {rd(up, "shared_act"), rd(moe_out(c), routed_value)}, S,
                  h, BufferId::moe_output, "@block_out", "bf16+accumulate"));
}

}  // namespace

void emit_moe(Builder& b, const Ctx& c) {
  const bool hash = c.ffn == FfnKind::hash_moe;
  const bool shared = c.config.shared_expert_intermediate_size > 0;
  const std::string routed_value = shared ? "moe_routed" : "@block_out";
  emit_routing(b, c, hash);
  if (c.config.moe_latent_size > 0) emit_latent_down(b, c);
  emit_routed_experts(b, c, hash, routed_value);
  if (shared) emit_shared_expert(b, c, routed_value);
}

}  // namespace bufferlab::plan::detail
