// MoE routing runs on a backend, through the core interface only.
#include "bufferlab/oracle/routing_harness.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/pool_placement.h"
#include "harness_io.h"

namespace bufferlab::oracle {
namespace {

using detail::grow_to_hold;
using detail::upload_exact;

template <class T>
std::vector<T> download(Backend& backend, const Workspace& ws, const TensorRef& t) {
  return detail::read_back<T>(backend, ws, t);
}

void upload_router_inputs(Backend& backend, const Workspace& ws, const MoeRouterOp& op,
                          const RouterInputs& in) {
  if (op.precision == RouterPrecision::fp32_routing)
    upload_exact(backend, ws, op.input, in.x_f32, "x_f32");
  else
    upload_exact(backend, ws, op.input, in.x_bf16, "x_bf16");
  upload_exact(backend, ws, op.weight, in.weight, "weight");
}

void upload_topk_operands(Backend& backend, const Workspace& ws, const MoeTopKOp& op,
                          const TopKHostInputs& in) {
  if (op.use_bias) upload_exact(backend, ws, op.bias, in.bias, "bias");
  if (!op.hash) return;
  upload_exact(backend, ws, op.token_ids, in.token_ids, "token_ids");
  upload_exact(backend, ws, op.tid2eid, in.tid2eid, "tid2eid");
}

StoredLogits download_logits(Backend& backend, const Workspace& ws, const TensorRef& t) {
  StoredLogits out;
  if (t.dtype == DType::bf16)
    out.bf16 = download<uint16_t>(backend, ws, t);
  else
    out.f32 = download<float>(backend, ws, t);
  return out;
}

TopKOutputs download_topk(Backend& backend, const Workspace& ws, const MoeTopKOp& op,
                          TopKDiagnostics diagnostics) {
  return {download<uint32_t>(backend, ws, op.ids), download<float>(backend, ws, op.weights),
          diagnostics};
}

// The logits in the top-k's dtype: a conversion that changes a value is an Error (the judge
// must see what the kernel saw). NaN payloads are not compared.
StoredLogits in_dtype(const StoredLogits& l, DType dtype) {
  const std::vector<double> v = l.values();
  StoredLogits out;
  for (size_t i = 0; i < v.size(); ++i) {
    const auto f = static_cast<float>(v[i]);
    if (dtype == DType::bf16) {
      out.bf16.push_back(l.bf16.empty() ? f32_to_bf16_bits(f) : l.bf16[i]);
      if (bf16_bits_to_f32(out.bf16.back()) != v[i] && !std::isnan(v[i]))
        throw Error(fmt::format("run_topk: logit {} = {} is not a BF16 value", i, v[i]));
    } else {
      out.f32.push_back(l.f32.empty() ? f : l.f32[i]);
    }
  }
  return out;
}

}  // namespace

std::vector<double> StoredLogits::values() const {
  std::vector<double> v;
  v.reserve(bf16.size() + f32.size());
  for (uint16_t b : bf16) v.push_back(bf16_bits_to_f32(b));
  for (float f : f32) v.push_back(f);
  return v;
}

RoutingOps make_routing_ops(const ModelConfig& config, uint64_t rows, RouterPrecision precision,
                            bool hash) {
  RoutingOps ops{MoeRouterOp::make(config, rows, precision),
                 MoeTopKOp::make(config, rows, precision != RouterPrecision::bf16, hash), 0};
  ops.pool_bytes = place_in_pool({&ops.router.weight, &ops.topk.bias, &ops.topk.tid2eid});
  return ops;
}

Layout routing_footprint_layout(const RoutingOps& ops) {
  BufferSizes sizes;
  for (const Access& a : ops.router.accesses()) grow_to_hold(sizes, a.tensor);
  for (const Access& a : ops.topk.accesses()) grow_to_hold(sizes, a.tensor);
  return Layout::build(sizes);
}

StoredLogits run_router(Backend& backend, const Workspace& ws, const MoeRouterOp& op,
                        const RouterInputs& in) {
  backend.poison(ws);
  upload_router_inputs(backend, ws, op, in);
  backend.execute(ws, op);
  backend.synchronize();
  return download_logits(backend, ws, op.logits);
}

TopKOutputs run_topk(Backend& backend, const Workspace& ws, const MoeTopKOp& op,
                     const StoredLogits& logits, const TopKHostInputs& in) {
  backend.poison(ws);
  const StoredLogits stored = in_dtype(logits, op.logits.dtype);
  if (op.logits.dtype == DType::bf16)
    upload_exact(backend, ws, op.logits, stored.bf16, "logits");
  else
    upload_exact(backend, ws, op.logits, stored.f32, "logits");
  upload_topk_operands(backend, ws, op, in);
  const TopKDiagnostics d = backend.moe_topk(ws, op);
  backend.synchronize();
  return download_topk(backend, ws, op, d);
}

ChainOutputs run_routing_chain(Backend& backend, const Workspace& ws, const RoutingOps& ops,
                               const RouterInputs& router_in, const TopKHostInputs& topk_in) {
  if (ops.router.logits.buffer != ops.topk.logits.buffer ||
      ops.router.logits.dtype != ops.topk.logits.dtype)
    throw Error("run_routing_chain: the top-k does not read the router's logits (" +
                ops.router.params() + ", " + ops.topk.params() + ")");
  backend.poison(ws);
  upload_router_inputs(backend, ws, ops.router, router_in);
  upload_topk_operands(backend, ws, ops.topk, topk_in);
  backend.execute(ws, ops.router);
  const TopKDiagnostics d = backend.moe_topk(ws, ops.topk);
  backend.synchronize();
  return {download_logits(backend, ws, ops.router.logits), download_topk(backend, ws, ops.topk, d)};
}

}  // namespace bufferlab::oracle
