// The CUDA mHC hyper-connection ops (spec/numerics.md §3–§4, ops/mhc.h), host-side entry
// points. Each binds its operands through op.bind(ws), uses only the backend's fixed
// LibraryContext (cuBLAS for the slab path's GEMMs, the device counter for HcDiagnostics),
// allocates nothing, and enqueues on the default stream. Private to the CUDA backend.
#pragma once

#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/workspace.h"
#include "cublas_context.h"

namespace bufferlab::cuda {

void hc_expand(const Workspace& ws, const HcExpandOp& op);
// Synchronises (copies the non-finite token counter back). `mutant`: M-SKCOL or none.
HcDiagnostics hc_pre(LibraryContext& ctx, const Workspace& ws, const HcPreOp& op, Mutant mutant);
// The norm stages synchronise (non-finite counter); the others return zero diagnostics.
HcDiagnostics hc_lowrank_split(LibraryContext& ctx, const Workspace& ws,
                               const HcLowRankSplitOp& op);
HcDiagnostics hc_lowrank_slab(LibraryContext& ctx, const Workspace& ws, const HcLowRankSlabOp& op);
// `mutant`: B13 or none.
void hc_post(const Workspace& ws, const HcPostOp& op, Mutant mutant);
// Synchronises (non-finite counter).
HcDiagnostics hc_head(LibraryContext& ctx, const Workspace& ws, const HcHeadOp& op);

}  // namespace bufferlab::cuda
