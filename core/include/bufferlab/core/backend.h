// Backend: one implementation of every workspace op over ONE Layout. CpuBackend (Eigen +
// OpenMP) and CudaBackend implement it; the FP64 oracle stands beside them, independent.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/op_registry.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/core/ops/mla.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "bufferlab/core/ops/qsa.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

// Thrown when a backend cannot run here (no GPU, no driver); callers report "skipped".
class BackendUnavailable : public Error {
 public:
  explicit BackendUnavailable(const std::string& why) : Error(why) {}
};

// Thrown when a backend's own checkers saw the op misbehave (the kernel simulator: an access
// outside the op's footprint, a race, ...): the op ran, its result is not to be trusted, and
// the message lists each finding. Callers report it as a disagreement, not a usage error.
class KernelCheckFailure : public Error {
 public:
  explicit KernelCheckFailure(const std::string& report) : Error(report) {}
};

// Every op descriptor of the registry (op_registry.h), in its order. Plans hold ops no
// backend runs yet (the registry's `planned` ones, and GemmOp's non-BF16 kinds): execute()
// refuses those with an Error.
using OpDescriptor =
    typename detail::TailOf<std::variant, void BUFFERLAB_OPS(BUFFERLAB_OP_COMMA_TYPE)>::type;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Allocates the arena for `layout` and a weight pool of `weights_bytes`, and zero-fills
  // norm_unit_w (docs/spec/buffers.md §3 #24). Nothing else is initialised: callers poison or
  // upload.
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

  // One method per registry entry, `Return method(const Workspace&, const Type&)`
  // (op_registry.h). The descriptor headers say what each op computes, in which precision and
  // where (docs/spec/numerics.md): fused_add_rmsnorm.h, moe.h (router, top-k, gather, expert GEMM,
  // combine: BF16-in, FP32-accumulate GEMMs), ffn.h, projection.h (gemm: the BF16 kinds,
  // Error for the others), embedding.h (lm_head), mhc.h (pre, head and the low-rank norm
  // stages return the count of tokens with non-finite streams), gdn.h and mamba2.h (one
  // chunk stage per call; states and conv tails live in the weight pool, updated in place).
  // moe_topk returns the per-call diagnostic and throws Error for E' > kMaxScoredExperts,
  // top_k > kMaxTopK or top_k > E'. A `planned` op throws Error here (no kernel yet).
  BUFFERLAB_OPS(BUFFERLAB_OP_VIRTUAL)

  // Kernel mutants of docs/spec/bug-catalogue.md, for the mutation tests and `--mutant`: each
  // registry entry names the ones that change its kernels (B14: the FP32 router paths round
  // their logits to BF16 before storing them; M-TIE: top-k exact ties go to the HIGHER index;
  // B13: hc_post rounds every stream value it writes to BF16; M-SKCOL: mhc_pre's Sinkhorn
  // without the final exact column normalisation; M-GDNCARRY: gdn_chunk's state pass carries
  // the BF16 snapshot instead of the FP32 state; M-SSDSTATE: mamba2_chunk's scan starts every
  // chunk from the zero state; M-SKORDER: mhc_pre's Sinkhorn loop normalises columns before
  // rows). Error for any other mutant (sizing / plan mutants live in
  // Sizing).
  void set_kernel_mutant(Mutant m);
  Mutant kernel_mutant() const { return mutant_; }
  static bool is_backend_mutant(Mutant m);

  // Dispatches any descriptor to its registry method; a variant alternative without a
  // handler does not compile (backend.cpp).
  void execute(const Workspace& ws, const OpDescriptor& op);

 protected:
  // Throws the Error of a planned op: "<backend> backend has no kernel for <Type> ...".
  [[noreturn]] void refuse(std::string_view type, std::string_view method,
                           const std::string& params) const;

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
