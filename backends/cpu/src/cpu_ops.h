// The CPU implementations of the workspace ops, one free function per op family, each
// reading extents from its descriptor only. Private to the CPU backend.
#pragma once

#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/workspace.h"
#include "cpu_scratch.h"

namespace bufferlab::cpu {

void fused_add_rmsnorm(const Workspace& ws, const FusedAddRmsNormOp& op);

// MoE routing and FFN (docs/spec/numerics.md §2). `mutant` is Mutant::none except in mutation
// tests (Backend::set_kernel_mutant). `scratch` is the backend's fixed working memory
// (cpu_scratch.h): GEMM panels and the expert grouping tables.
void moe_router(const Workspace& ws, const MoeRouterOp& op, Mutant mutant, Scratch& scratch);
TopKDiagnostics moe_topk(const Workspace& ws, const MoeTopKOp& op, Mutant mutant);
void moe_gather(const Workspace& ws, const MoeGatherOp& op, Scratch& scratch);
void moe_expert_gemm(const Workspace& ws, const MoeExpertGemmOp& op, Scratch& scratch);
void swiglu(const Workspace& ws, const SwigluOp& op);
void moe_combine(const Workspace& ws, const MoeCombineOp& op);
void gemm(const Workspace& ws, const GemmOp& op, Scratch& scratch);
void lm_head(const Workspace& ws, const LmHeadOp& op, Scratch& scratch);

// mHC hyper-connections (docs/spec/numerics.md §3–§4, ops/mhc.h). `mutant`: M-SKCOL or M-SKORDER in
// mhc_pre, B13 in hc_post, else Mutant::none. The slab path's GEMMs run on the tiled BF16 GEMM.
void mhc_expand(const Workspace& ws, const MhcExpandOp& op);
MhcDiagnostics mhc_pre(const Workspace& ws, const MhcPreOp& op, Mutant mutant);
MhcDiagnostics mhc_lowrank_split(const Workspace& ws, const MhcLowRankSplitOp& op);
MhcDiagnostics mhc_lowrank_slab(const Workspace& ws, const MhcLowRankSlabOp& op, Scratch& scratch);
void mhc_post(const Workspace& ws, const MhcPostOp& op, Mutant mutant);
MhcDiagnostics mhc_head(const Workspace& ws, const MhcHeadOp& op);

// Gated DeltaNet (docs/spec/numerics.md §5, ops/gdn.h): cpu_gdn_*.cpp. `mutant`: M-GDNCARRY in
// gdn_chunk's state stage, else Mutant::none.
void gdn_conv(const Workspace& ws, const GdnConvOp& op);
void gdn_gates(const Workspace& ws, const GdnGatesOp& op);
void gdn_chunk(const Workspace& ws, const GdnChunkOp& op, Mutant mutant);
void gdn_recurrent(const Workspace& ws, const GdnRecurrentOp& op);
void gdn_gated_norm(const Workspace& ws, const GdnGatedNormOp& op);

// Mamba-2 (docs/spec/numerics.md §6, ops/mamba2.h): cpu_mamba2_*.cpp. `mutant`: M-SSDSTATE in
// mamba2_chunk's scan stage, else Mutant::none.
void mamba2_conv(const Workspace& ws, const Mamba2ConvOp& op);
void mamba2_chunk(const Workspace& ws, const Mamba2ChunkOp& op, Mutant mutant);
void mamba2_recurrent(const Workspace& ws, const Mamba2RecurrentOp& op);
void mamba2_gated_norm(const Workspace& ws, const Mamba2GatedNormOp& op);

// Grouped-query attention (docs/spec/attention.md, ops/attention.h): cpu_attention_*.cpp.
// `mutant`: the attention kernel mutants, else Mutant::none.
void attn_stage(const Workspace& ws, const AttnStageOp& op, Mutant mutant);
void attn_cache_write(const Workspace& ws, const AttnCacheWriteOp& op, Mutant mutant);
void attn_prefill(const Workspace& ws, const AttnPrefillOp& op, Mutant mutant);
void attn_decode(const Workspace& ws, const AttnDecodeOp& op, Mutant mutant);
void splitk_merge(const Workspace& ws, const SplitKMergeOp& op, Mutant mutant);
void attn_gate(const Workspace& ws, const AttnGateOp& op, Mutant mutant);

}  // namespace bufferlab::cpu
