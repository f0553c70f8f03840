// The CUDA MoE routing and FFN ops (spec/numerics.md §2), host-side entry points. Private to
// the CUDA backend.
#pragma once

#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab::cuda {

void moe_router(const Workspace& ws, const MoeRouterOp& op, Mutant mutant);
TopKDiagnostics moe_topk(const Workspace& ws, const MoeTopKOp& op, Mutant mutant);
void moe_gather(const Workspace& ws, const MoeGatherOp& op);
void moe_expert_gemm(const Workspace& ws, const MoeExpertGemmOp& op);
void swiglu(const Workspace& ws, const SwigluOp& op);
void moe_combine(const Workspace& ws, const MoeCombineOp& op);
void gemm(const Workspace& ws, const GemmOp& op);
void lm_head(const Workspace& ws, const LmHeadOp& op);

}  // namespace bufferlab::cuda
