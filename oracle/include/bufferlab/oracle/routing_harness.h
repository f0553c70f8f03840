// Drives MoE routing (MoeRouterOp, MoeTopKOp, or the router → top-k chain) through any Backend
// with the core interface only — layout holding the footprint, weight-pool operands placed one
// after another, poison, upload, execute, synchronize, download — so the oracle still links no
// backend. Host copies carry BF16 as raw bits.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/oracle/routing.h"

namespace bufferlab::oracle {

// The two ops of one routing step, their pool operands placed (place_in_pool): router weight,
// bias, tid2eid. The top-k reads the logits the router writes (gate_logits on the bf16 path,
// gate_logits_f32 otherwise).
struct RoutingOps {
  MoeRouterOp router;
  MoeTopKOp topk;
  uint64_t pool_bytes = 0;
};
RoutingOps make_routing_ops(const ModelConfig& config, uint64_t rows, RouterPrecision precision,
                            bool hash);

// A layout whose buffers hold exactly the footprint of both ops (tests need no real config).
Layout routing_footprint_layout(const RoutingOps& ops);

// The host operands of the top-k besides its logits.
struct TopKHostInputs {
  std::vector<float> bias;          // [E'] when topk.use_bias
  std::vector<uint32_t> token_ids;  // [rows] for hash layers
  std::vector<int32_t> tid2eid;     // [vocab, top_k] for hash layers
};

// The stored logits, as the router wrote them: logits_bf16 on the bf16 path, logits_f32
// otherwise (the other one empty).
struct StoredLogits {
  std::vector<uint16_t> bf16;
  std::vector<float> f32;
  std::vector<double> values() const;  // whichever is set, widened exactly
};

struct TopKOutputs {
  std::vector<uint32_t> ids;    // [rows, top_k] in selection order
  std::vector<float> weights;   // [rows, top_k]
  TopKDiagnostics diagnostics;  // what the backend reported
};

struct ChainOutputs {
  StoredLogits logits;
  TopKOutputs topk;
};

// The router alone: poison, upload x (the path's one) and Wg, execute, download the logits.
StoredLogits run_router(Backend& backend, const Workspace& ws, const MoeRouterOp& op,
                        const RouterInputs& in);

// The top-k alone on the given stored logits (uploaded in the top-k's logit dtype; the values
// must be exactly representable in it — an Error otherwise), bias, token ids and table.
TopKOutputs run_topk(Backend& backend, const Workspace& ws, const MoeTopKOp& op,
                     const StoredLogits& logits, const TopKHostInputs& in);

// Router, then top-k on the router's stored logits (nothing is downloaded in between).
ChainOutputs run_routing_chain(Backend& backend, const Workspace& ws, const RoutingOps& ops,
                               const RouterInputs& router_in, const TopKHostInputs& topk_in);

}  // namespace bufferlab::oracle
