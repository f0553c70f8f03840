// The CUDA Gated DeltaNet ops (docs/spec/numerics.md §5, ops/gdn.h), host-side entry points. Each
// binds its operands through op.bind(ws), allocates nothing and enqueues on the default
// stream. Private to the CUDA backend.
#pragma once

#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/workspace.h"
#include "cublas_context.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

void gdn_conv(const Workspace& ws, const GdnConvOp& op);
void gdn_gates(const Workspace& ws, const GdnGatesOp& op);
// `mutant`: M-GDNCARRY (state stage) or none.
void gdn_chunk(LibraryContext& ctx, const Workspace& ws, const GdnChunkOp& op, Mutant mutant);
void gdn_recurrent(const Workspace& ws, const GdnRecurrentOp& op);
void gdn_gated_norm(const Workspace& ws, const GdnGatedNormOp& op);

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
