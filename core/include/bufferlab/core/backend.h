// Backend: one implementation of every workspace op over ONE Layout. CpuBackend (Eigen +
// OpenMP) and CudaBackend implement it; the FP64 oracle stands beside them, independent.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
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

namespace bufferlab {

// Thrown when a backend cannot run here (no GPU, no driver); callers report "skipped".
class BackendUnavailable : public Error {
 public:
  explicit BackendUnavailable(const std::string& why) : Error(why) {}
};

// Every op descriptor a backend executes. Later op families append to this variant.
using OpDescriptor =
    std::variant<FusedAddRmsNormOp, MoeRouterOp, MoeTopKOp, MoeGatherOp, MoeExpertGemmOp, SwigluOp,
                 MoeCombineOp, GemmOp, LmHeadOp, HcExpandOp, HcPreOp, HcLowRankSplitOp,
                 HcLowRankSlabOp, HcPostOp, HcHeadOp, GdnConvOp, GdnGatesOp, GdnChunkOp,
                 GdnRecurrentOp, GdnGatedNormOp, Mamba2ConvOp, SsdChunkOp, Mamba2RecurrentOp,
                 Mamba2GatedNormOp>;

// Whether a backend can execute this descriptor (GemmOp: the BF16 kinds only). Plans hold
// ops no backend runs yet (attention, SSM, quantized GEMMs); execute() refuses those.
bool has_kernel(const OpDescriptor& op);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Allocates the arena for `layout` and a weight pool of `weights_bytes`, and zero-fills
  // norm_unit_w (spec §3 #24). Nothing else is initialised: callers poison or upload.
  Workspace allocate(const Layout& layout, uint64_t weights_bytes);

  virtual void upload(const Workspace& ws, const TensorRef& dst, const void* src) = 0;
  virtual void download(const Workspace& ws, const TensorRef& src, void* dst) = 0;
  // Sets every byte of the tensor to `byte`.
  virtual void fill(const Workspace& ws, const TensorRef& t, uint8_t byte) = 0;
  // Fills the whole arena with kPoisonByte so an output an op fails to write shows up as
  // NaN; norm_unit_w keeps its zeros (an allocation invariant, not an output).
  void poison(const Workspace& ws);
  // Waits for all work issued so far; surfaces asynchronous errors as Error.
  virtual void synchronize() = 0;

  virtual void fused_add_rmsnorm(const Workspace& ws, const FusedAddRmsNormOp& op) = 0;

  // MoE routing and FFN (spec/numerics.md §2; each descriptor's header says what it
  // computes and where). Router, experts, dense / shared GEMMs and the LM head are BF16-in,
  // FP32-accumulate GEMMs.
  virtual void moe_router(const Workspace& ws, const MoeRouterOp& op) = 0;
  // Returns the per-call diagnostic (NaN keys met). Throws Error for E' > kMaxScoredExperts,
  // top_k > kMaxTopK or top_k > E'.
  virtual TopKDiagnostics moe_topk(const Workspace& ws, const MoeTopKOp& op) = 0;
  virtual void moe_gather(const Workspace& ws, const MoeGatherOp& op) = 0;
  virtual void moe_expert_gemm(const Workspace& ws, const MoeExpertGemmOp& op) = 0;
  virtual void swiglu(const Workspace& ws, const SwigluOp& op) = 0;
  virtual void moe_combine(const Workspace& ws, const MoeCombineOp& op) = 0;
  // BF16 kinds of GemmOp (dense FFN, shared expert, latent up): Error for other kinds.
  virtual void gemm(const Workspace& ws, const GemmOp& op) = 0;
  virtual void lm_head(const Workspace& ws, const LmHeadOp& op) = 0;

  // mHC hyper-connections (spec/numerics.md §3–§4; each descriptor's header in ops/mhc.h
  // says what it computes, in which precision, and where). Pre, head and the low-rank norm
  // stages return the count of tokens with non-finite streams (their outputs are NaN).
  virtual void hc_expand(const Workspace& ws, const HcExpandOp& op) = 0;
  virtual HcDiagnostics hc_pre(const Workspace& ws, const HcPreOp& op) = 0;
  virtual HcDiagnostics hc_lowrank_split(const Workspace& ws, const HcLowRankSplitOp& op) = 0;
  virtual HcDiagnostics hc_lowrank_slab(const Workspace& ws, const HcLowRankSlabOp& op) = 0;
  virtual void hc_post(const Workspace& ws, const HcPostOp& op) = 0;
  virtual HcDiagnostics hc_head(const Workspace& ws, const HcHeadOp& op) = 0;

  // Gated DeltaNet and Mamba-2 (spec/numerics.md §5–§6; ops/gdn.h and ops/mamba2.h pin the
  // layouts, precisions and what the spec leaves open). The chunked ops run one stage per
  // call (GDN: wu, state, output; SSD: cumsum, bmm, scan); the recurrent ops carry the state
  // token by token. States and conv tails live in the weight pool, read and updated in place.
  virtual void gdn_conv(const Workspace& ws, const GdnConvOp& op) = 0;
  virtual void gdn_gates(const Workspace& ws, const GdnGatesOp& op) = 0;
  virtual void gdn_chunk(const Workspace& ws, const GdnChunkOp& op) = 0;
  virtual void gdn_recurrent(const Workspace& ws, const GdnRecurrentOp& op) = 0;
  virtual void gdn_gated_norm(const Workspace& ws, const GdnGatedNormOp& op) = 0;
  virtual void mamba2_conv(const Workspace& ws, const Mamba2ConvOp& op) = 0;
  virtual void ssd_chunk(const Workspace& ws, const SsdChunkOp& op) = 0;
  virtual void mamba2_recurrent(const Workspace& ws, const Mamba2RecurrentOp& op) = 0;
  virtual void mamba2_gated_norm(const Workspace& ws, const Mamba2GatedNormOp& op) = 0;

  // Kernel mutants of spec/bug-catalogue.md, for the mutation tests and `--mutant`: B14 (the
  // FP32 router paths round their logits to BF16 before storing them), M-TIE (top-k exact
  // ties go to the HIGHER index), B13 (hc_post rounds every stream value it writes to BF16),
  // M-SKCOL (hc_pre's Sinkhorn without the final exact column normalisation), M-GDNCARRY
  // (gdn_chunk's state pass carries the BF16 snapshot instead of the FP32 state) and
  // M-SSDSTATE (ssd_chunk's scan starts every chunk from the zero state). Error for
  // any other mutant (sizing / plan mutants live in Sizing; a kernel mutant of another op
  // family is added with its kernels).
  void set_kernel_mutant(Mutant m);
  Mutant kernel_mutant() const { return mutant_; }
  static bool is_backend_mutant(Mutant m);

  // Dispatches any descriptor to its method.
  void execute(const Workspace& ws, const OpDescriptor& op);

 protected:
  virtual Workspace do_allocate(const Layout& layout, uint64_t weights_bytes) = 0;
  // Sets every byte of the arena to `byte`.
  virtual void fill_arena(const Workspace& ws, uint8_t byte) = 0;

  Mutant mutant_ = Mutant::none;

 private:
  void zero_unit_weight(const Workspace& ws);
};

// The poison byte: 0xFF makes every BF16/FP32 element a NaN, so an unwritten output fails.
inline constexpr uint8_t kPoisonByte = 0xFF;

}  // namespace bufferlab
