// The CUDA attention ops (docs/spec/attention.md, ops/attention.h), host-side entry points.
// Each binds its operands through op.bind(ws), allocates nothing and enqueues on the default
// stream. Private to the CUDA backend.
#pragma once

#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/workspace.h"
#include "cuda_platform.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

// `mutant`: the attention kernel mutants, else Mutant::none.
void attn_stage(const Workspace& ws, const AttnStageOp& op, Mutant mutant);
void attn_cache_write(const Workspace& ws, const AttnCacheWriteOp& op, Mutant mutant);
void attn_prefill(const Workspace& ws, const AttnPrefillOp& op, Mutant mutant);
void attn_decode(const Workspace& ws, const AttnDecodeOp& op, Mutant mutant);
void splitk_merge(const Workspace& ws, const SplitKMergeOp& op, Mutant mutant);
void attn_gate(const Workspace& ws, const AttnGateOp& op, Mutant mutant);

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
