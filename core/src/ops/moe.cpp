// MoE ops: extents from op semantics (the pass's rows, config dims), never from BufferSizes.
#include "bufferlab/core/ops/moe.h"

#include <sstream>
#include <string>

#include "bind_check.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab {
namespace {

uint64_t all_experts(const ModelConfig& c) {
  return (Size(c.num_experts) + c.zero_expert_num).value();
}

// The top-k outputs of `rows` rows (topk_regions) as TensorRefs in scratch.
TensorRef ids_ref(uint64_t rows, uint64_t top_k) {
  const TopKRegions r = topk_regions(rows, top_k);
  return arena_tensor(BufferId::scratch, r.ids_offset, {mul(rows, top_k)}, DType::u32);
}
TensorRef weights_ref(uint64_t rows, uint64_t top_k) {
  const TopKRegions r = topk_regions(rows, top_k);
  return arena_tensor(BufferId::scratch, r.weights_offset, {mul(rows, top_k)}, DType::f32);
}

// expert_gate_out / expert_up_out rows: [T][top_k · I] (docs/spec/numerics.md §2).
TensorRef expert_slices(BufferId id, const ModelConfig& c, uint64_t rows) {
  return arena_tensor(id, 0, {rows, mul(c.num_experts_per_tok, c.moe_intermediate_size)},
                      DType::bf16);
}
// expert_down_out rows: [T·top_k][D] (gathered input, then the down output).
TensorRef expert_rows(const ModelConfig& c, uint64_t rows) {
  return arena_tensor(BufferId::expert_down_out, 0,
                      {mul(rows, c.num_experts_per_tok), c.moe_input_size().value()}, DType::bf16);
}

uint64_t elems(uint64_t a, uint64_t b) { return mul(a, b); }

}  // namespace

MoeRouterOp::Bound MoeRouterOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  const uint64_t n_in = elems(dims.rows, dims.hidden), n_out = elems(dims.rows, dims.experts);
  Bound b;
  detail::require_elements(input, n_in, p);
  if (precision == RouterPrecision::fp32_routing) {
    detail::require_dtype(input, DType::f32, p);
    b.x_f32 = ws.data<const float>(input);
  } else {
    detail::require_dtype(input, DType::bf16, p);
    b.x_bf16 = ws.data<const uint16_t>(input);
  }
  detail::require_elements(weight, elems(dims.experts, dims.hidden), p);
  b.weight = ws.data<const uint16_t>(weight);
  detail::require_elements(logits, n_out, p);
  if (precision == RouterPrecision::bf16) {
    detail::require_dtype(logits, DType::bf16, p);
    b.logits_bf16 = ws.data<uint16_t>(logits);
  } else {
    detail::require_dtype(logits, DType::f32, p);
    b.logits_f32 = ws.data<float>(logits);
  }
  return b;
}

MoeTopKOp::Bound MoeTopKOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  Bound b;
  detail::require_elements(logits, elems(dims.rows, dims.experts), p);
  if (logits.dtype == DType::f32)
    b.logits_f32 = ws.data<const float>(logits);
  else
    b.logits_bf16 = ws.data<const uint16_t>(logits);
  if (use_bias) {
    detail::require_elements(bias, dims.experts, p);
    b.bias = ws.data<const float>(bias);
  }
  if (hash) {
    detail::require_elements(token_ids, dims.rows, p);
    detail::require_elements(tid2eid, elems(dims.vocab, dims.top_k), p);
    b.token_ids = ws.data<const uint32_t>(token_ids);
    b.tid2eid = ws.data<const int32_t>(tid2eid);
  }
  detail::require_elements(ids, elems(dims.rows, dims.top_k), p);
  detail::require_elements(weights, elems(dims.rows, dims.top_k), p);
  b.ids = ws.data<uint32_t>(ids);
  b.weights = ws.data<float>(weights);
  return b;
}

MoeGatherOp::Bound MoeGatherOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  detail::require_elements(input, elems(dims.rows, dims.width), p);
  detail::require_elements(ids, elems(dims.rows, dims.top_k), p);
  detail::require_elements(gathered, elems(elems(dims.rows, dims.top_k), dims.width), p);
  return {ws.data<const uint16_t>(input), ws.data<const uint32_t>(ids),
          ws.data<uint16_t>(gathered)};
}

MoeExpertGemmOp::Bound MoeExpertGemmOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  const uint64_t slots = elems(dims.rows, dims.top_k);
  detail::require_elements(input, elems(slots, dims.K), p);
  detail::require_elements(ids, slots, p);
  detail::require_elements(weight, elems(elems(dims.experts, dims.N), dims.K), p);
  detail::require_elements(output, elems(slots, dims.N), p);
  return {ws.data<const uint16_t>(input), ws.data<const uint32_t>(ids),
          ws.data<const uint16_t>(weight), ws.data<uint16_t>(output)};
}

MoeCombineOp::Bound MoeCombineOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  const uint64_t slots = elems(dims.rows, dims.top_k);
  Bound b;
  detail::require_elements(ids, slots, p);
  detail::require_elements(weights, slots, p);
  detail::require_elements(down, elems(slots, dims.width), p);
  detail::require_elements(output, elems(dims.rows, dims.width), p);
  b.ids = ws.data<const uint32_t>(ids);
  b.weights = ws.data<const float>(weights);
  b.down = ws.data<const uint16_t>(down);
  if (reads_input) {
    detail::require_elements(input, elems(dims.rows, dims.width), p);
    b.input = ws.data<const uint16_t>(input);
  }
  b.output = ws.data<uint16_t>(output);
  return b;
}

TopKRegions topk_regions(uint64_t rows, uint64_t top_k) {
  TopKRegions r;
  r.ids_bytes = (Size(rows) * top_k * 4).value();
  r.weights_offset = r.ids_bytes;
  r.weights_bytes = r.ids_bytes;
  return r;
}

const char* to_string(RouterPrecision p) {
  switch (p) {
    case RouterPrecision::bf16:
      return "bf16";
    case RouterPrecision::fp32_gate:
      return "fp32-gate";
    case RouterPrecision::fp32_routing:
      return "fp32-routing";
  }
  return "?";
}

MoeRouterOp MoeRouterOp::make(const ModelConfig& c, uint64_t rows, RouterPrecision precision) {
  MoeRouterOp op;
  op.dims = {rows, c.hidden_size, all_experts(c)};
  op.precision = precision;
  const bool f32_in = precision == RouterPrecision::fp32_routing;
  op.input = f32_in
                 ? arena_tensor(BufferId::moe_router_in_f32, 0, {rows, c.hidden_size}, DType::f32)
                 : arena_tensor(BufferId::norm_output, 0, {rows, c.hidden_size}, DType::bf16);
  op.input_value = f32_in ? "norm_f32" : "norm";
  op.weight = pool_tensor({op.dims.experts, c.hidden_size}, DType::bf16);
  op.logits = precision == RouterPrecision::bf16
                  ? arena_tensor(BufferId::gate_logits, 0, {rows, op.dims.experts}, DType::bf16)
                  : arena_tensor(BufferId::gate_logits_f32, 0, {rows, op.dims.experts}, DType::f32);
  return op;
}

std::string MoeRouterOp::params() const {
  std::ostringstream s;
  s << "moe_router(rows=" << dims.rows << ",h=" << dims.hidden << ",experts=" << dims.experts
    << ",path=" << to_string(precision) << ")";
  return s.str();
}

std::vector<Access> MoeRouterOp::accesses() const {
  return {{input, AccessKind::read, input_value},
          {weight, AccessKind::read, {}},
          {logits, AccessKind::write, logits_value}};
}

MoeScoring moe_scoring_from_string(const std::string& s) {
  if (s == "softmax") return MoeScoring::softmax;
  if (s == "sigmoid") return MoeScoring::sigmoid;
  if (s == "sqrtsoftplus") return MoeScoring::sqrtsoftplus;
  throw Error("unknown scoring_func \"" + s + "\" (known: softmax, sigmoid, sqrtsoftplus)");
}

const char* to_string(MoeScoring s) {
  switch (s) {
    case MoeScoring::softmax:
      return "softmax";
    case MoeScoring::sigmoid:
      return "sigmoid";
    case MoeScoring::sqrtsoftplus:
      return "sqrtsoftplus";
  }
  return "?";
}

MoeTopKOp MoeTopKOp::make(const ModelConfig& c, uint64_t rows, bool logits_f32, bool hash) {
  MoeTopKOp op;
  const uint64_t k = c.num_experts_per_tok;
  op.dims = {rows, all_experts(c), c.num_experts, k, hash ? c.vocab_size : 0};
  op.scoring = moe_scoring_from_string(c.scoring_func);
  op.norm_topk_prob = c.norm_topk_prob;
  op.routed_scaling_factor = c.routed_scaling_factor;
  op.hash = hash;
  // Hash layers select by table: groups do not apply to them.
  // 0 or 1 router group means none (docs/spec/buffers.md §1).
  const bool grouped = !hash && c.router_groups > 1;
  op.groups = grouped ? c.router_groups : 1;
  op.topk_groups = grouped ? c.router_topk_groups : 1;
  // docs/spec/numerics.md §2: the bias shifts selection for sigmoid / sqrtsoftplus only; softmax
  // selects by logit.
  op.use_bias = c.use_routing_bias && op.scoring != MoeScoring::softmax;
  op.logits = logits_f32
                  ? arena_tensor(BufferId::gate_logits_f32, 0, {rows, op.dims.experts}, DType::f32)
                  : arena_tensor(BufferId::gate_logits, 0, {rows, op.dims.experts}, DType::bf16);
  op.bias = pool_tensor({op.dims.experts}, DType::f32);
  op.token_ids = arena_tensor(BufferId::token_ids, 0, {rows}, DType::u32);
  op.tid2eid = pool_tensor({op.dims.vocab, k}, DType::i32);
  op.ids = ids_ref(rows, k);
  op.weights = weights_ref(rows, k);
  return op;
}

std::string MoeTopKOp::params() const {
  std::ostringstream s;
  s << name() << "(rows=" << dims.rows << ",experts=" << dims.experts
    << ",routed=" << dims.routed_experts << ",top_k=" << dims.top_k
    << ",scoring=" << to_string(scoring) << ",bias=" << use_bias
    << ",norm_topk_prob=" << norm_topk_prob << ",scale=" << routed_scaling_factor
    << ",logits=" << to_string(logits.dtype);
  if (hash) s << ",vocab=" << dims.vocab;
  if (grouped()) s << ",groups=" << topk_groups << "/" << groups;
  s << ")";
  return s.str();
}

std::string MoeTopKOp::group_error() const {
  if (groups == 1 && topk_groups == 1) return "";
  const uint64_t E = dims.experts, G = groups, g = topk_groups;
  if (G == 0) return "groups = 0 (1 means none)";
  if (hash) return "router groups on a hash layer (it selects by table)";
  if (E % G != 0)
    return std::to_string(G) + " groups do not divide " + std::to_string(E) + " experts";
  if (E / G < 2)
    return "groups of " + std::to_string(E / G) + " expert (a group scores its two best)";
  if (g == 0 || g > G)
    return "kept groups " + std::to_string(g) + " not in [1, " + std::to_string(G) + "]";
  if (dims.top_k > g * (E / G))
    return "top_k " + std::to_string(dims.top_k) + " exceeds the " + std::to_string(g * (E / G)) +
           " experts of the kept groups";
  return "";
}

std::vector<Access> MoeTopKOp::accesses() const {
  std::vector<Access> out = {{logits, AccessKind::read, logits_value}};
  if (use_bias) out.push_back({bias, AccessKind::read, {}});
  if (hash) {
    out.push_back({token_ids, AccessKind::read, "@token_ids"});
    out.push_back({tid2eid, AccessKind::read, {}});
  }
  out.push_back({ids, AccessKind::write, ids_value});
  out.push_back({weights, AccessKind::write, weights_value});
  return out;
}

TensorRef moe_expert_input(const ModelConfig& c, uint64_t rows) {
  if (c.moe_latent_size > 0)
    return arena_tensor(BufferId::ssm_ba, 0, {rows, c.moe_latent_size}, DType::bf16);
  return arena_tensor(BufferId::norm_output, 0, {rows, c.hidden_size}, DType::bf16);
}

MoeGatherOp MoeGatherOp::make(const ModelConfig& c, uint64_t rows) {
  MoeGatherOp op;
  op.dims = {rows, c.num_experts_per_tok, c.moe_input_size().value(), c.num_experts};
  op.input = moe_expert_input(c, rows);
  op.input_value = c.moe_latent_size > 0 ? "moe_latent" : "norm";
  op.ids = ids_ref(rows, op.dims.top_k);
  op.gathered = expert_rows(c, rows);
  return op;
}

std::string MoeGatherOp::params() const {
  std::ostringstream s;
  s << "moe_gather(rows=" << dims.rows << ",top_k=" << dims.top_k << ",width=" << dims.width
    << ",experts=" << dims.experts << ")";
  return s.str();
}

std::vector<Access> MoeGatherOp::accesses() const {
  return {{input, AccessKind::read, input_value},
          {ids, AccessKind::read, ids_value},
          {gathered, AccessKind::write, gathered_value}};
}

const char* to_string(ExpertProj p) {
  switch (p) {
    case ExpertProj::gate:
      return "gate";
    case ExpertProj::up:
      return "up";
    case ExpertProj::down:
      return "down";
  }
  return "?";
}

MoeExpertGemmOp MoeExpertGemmOp::make(const ModelConfig& c, uint64_t rows, ExpertProj proj) {
  MoeExpertGemmOp op;
  op.proj = proj;
  const uint64_t D = c.moe_input_size().value(), I = c.moe_intermediate_size;
  const bool down = proj == ExpertProj::down;
  op.dims = {rows, c.num_experts_per_tok, c.num_experts, down ? I : D, down ? D : I};
  op.ids = ids_ref(rows, op.dims.top_k);
  op.weight = pool_tensor({c.num_experts, op.dims.N, op.dims.K}, DType::bf16);
  if (down) {
    op.input = expert_slices(BufferId::expert_gate_out, c, rows);
    op.input_value = "expert_act";
    op.output = expert_rows(c, rows);
    op.output_value = "expert_down";
    return op;
  }
  op.input = expert_rows(c, rows);
  op.input_value = "moe_gathered";
  const bool gate = proj == ExpertProj::gate;
  op.output = expert_slices(gate ? BufferId::expert_gate_out : BufferId::expert_up_out, c, rows);
  op.output_value = gate ? "expert_gate" : "expert_up";
  return op;
}

std::string MoeExpertGemmOp::name() const { return std::string("moe_expert_") + to_string(proj); }

std::string MoeExpertGemmOp::params() const {
  std::ostringstream s;
  s << name() << "(rows=" << dims.rows << ",top_k=" << dims.top_k << ",experts=" << dims.experts
    << ",K=" << dims.K << ",N=" << dims.N << ")";
  return s.str();
}

std::vector<Access> MoeExpertGemmOp::accesses() const {
  return {{input, AccessKind::read, input_value},
          {ids, AccessKind::read, ids_value},
          {weight, AccessKind::read, {}},
          {output, AccessKind::write, output_value}};
}

MoeCombineOp MoeCombineOp::make(const ModelConfig& c, uint64_t rows, bool hash) {
  MoeCombineOp op;
  const uint64_t k = c.num_experts_per_tok, D = c.moe_input_size().value();
  op.dims = {rows, k, c.num_experts, c.zero_expert_num, D};
  // Hash layers clamp ids ≥ E to 0 (docs/spec/numerics.md §2): their zero experts are never
  // selected.
  op.reads_input = c.zero_expert_num > 0 && !hash;
  op.ids = ids_ref(rows, k);
  op.weights = weights_ref(rows, k);
  op.down = expert_rows(c, rows);
  op.input = moe_expert_input(c, rows);
  const bool latent = c.moe_latent_size > 0;
  op.input_value = latent ? "moe_latent" : "norm";
  // Latent MoE combines in latent space, in place of the latent input (ssm_ba): the same
  // TensorRef as `input`, so a zero-expert read of it is a declared in-place access.
  op.output =
      latent ? op.input : arena_tensor(BufferId::moe_output, 0, {rows, c.hidden_size}, DType::bf16);
  if (latent) op.output_value = "moe_latent_out";
  return op;
}

std::string MoeCombineOp::params() const {
  std::ostringstream s;
  s << "moe_combine(rows=" << dims.rows << ",top_k=" << dims.top_k << ",experts=" << dims.experts
    << ",zero_experts=" << dims.zero_experts << ",width=" << dims.width
    << ",out=" << output.to_string() << ")";
  return s.str();
}

std::vector<Access> MoeCombineOp::accesses() const {
  std::vector<Access> out = {{ids, AccessKind::read, ids_value},
                             {weights, AccessKind::read, weights_value},
                             {down, AccessKind::read, down_value}};
  if (reads_input) out.push_back({input, AccessKind::read, input_value});
  out.push_back({output, AccessKind::write, output_value});
  return out;
}

}  // namespace bufferlab
