// The CUDA Mamba-2 ops (docs/spec/numerics.md §6, ops/mamba2.h), host-side entry points. Each
// binds its operands through op.bind(ws), allocates nothing and enqueues on the default
// stream. Private to the CUDA backend.
#pragma once

#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/workspace.h"
#include "cublas_context.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

void mamba2_conv(const Workspace& ws, const Mamba2ConvOp& op);
// `mutant`: M-SSDSTATE (scan stage) or none.
void mamba2_chunk(LibraryContext& ctx, const Workspace& ws, const Mamba2ChunkOp& op, Mutant mutant);
void mamba2_recurrent(const Workspace& ws, const Mamba2RecurrentOp& op);
void mamba2_gated_norm(const Workspace& ws, const Mamba2GatedNormOp& op);

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
