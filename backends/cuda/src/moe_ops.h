// The CUDA MoE routing and FFN ops (docs/spec/numerics.md §2) and the BF16 GEMM kinds, host-side
// entry points. Each binds its operands through op.bind(ws) (extents from op.shape()), uses
// only the backend's fixed LibraryContext for library workspace and staging (nothing is
// allocated here), and enqueues on the default stream. Private to the CUDA backend.
#pragma once

#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/workspace.h"
#include "cublas_context.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

void moe_router(LibraryContext& ctx, const Workspace& ws, const MoeRouterOp& op, Mutant mutant);
// Synchronises (copies the NaN-key counter and the hash error flag back).
TopKDiagnostics moe_topk(LibraryContext& ctx, const Workspace& ws, const MoeTopKOp& op,
                         Mutant mutant);
void moe_gather(LibraryContext& ctx, const Workspace& ws, const MoeGatherOp& op);
// Synchronises (copies the per-expert row offsets to the host to size one GEMM per expert).
void moe_expert_gemm(LibraryContext& ctx, const Workspace& ws, const MoeExpertGemmOp& op);
void swiglu(const Workspace& ws, const SwigluOp& op);
// Synchronises (copies the corrupt-id flag back).
void moe_combine(LibraryContext& ctx, const Workspace& ws, const MoeCombineOp& op);
void gemm(LibraryContext& ctx, const Workspace& ws, const GemmOp& op);
void lm_head(LibraryContext& ctx, const Workspace& ws, const LmHeadOp& op);

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
