// The CUDA mHC hyper-connection ops (docs/spec/numerics.md §3–§4, ops/mhc.h), host-side entry
// points. Each binds its operands through op.bind(ws), uses only the backend's fixed
// LibraryContext (cuBLAS for the slab path's GEMMs, the device counter for MhcDiagnostics),
// allocates nothing, and enqueues on the default stream. Private to the CUDA backend.
#pragma once

#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/workspace.h"
#include "cublas_context.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

void mhc_expand(const Workspace& ws, const MhcExpandOp& op);
// Synchronises (copies the non-finite token counter back). `mutant`: M-SKCOL, M-SKORDER or none.
MhcDiagnostics mhc_pre(LibraryContext& ctx, const Workspace& ws, const MhcPreOp& op, Mutant mutant);
// The norm stages synchronise (non-finite counter); the others return zero diagnostics.
MhcDiagnostics mhc_lowrank_split(LibraryContext& ctx, const Workspace& ws,
                                 const MhcLowRankSplitOp& op);
MhcDiagnostics mhc_lowrank_slab(LibraryContext& ctx, const Workspace& ws,
                                const MhcLowRankSlabOp& op);
// `mutant`: B13 or none.
void mhc_post(const Workspace& ws, const MhcPostOp& op, Mutant mutant);
// Synchronises (non-finite counter).
MhcDiagnostics mhc_head(LibraryContext& ctx, const Workspace& ws, const MhcHeadOp& op);

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
