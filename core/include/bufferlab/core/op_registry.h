// THE op registry: every op descriptor of core/include/bufferlab/core/ops/, with its Backend
// method, return type, family and the kernel mutants that change it. The OpDescriptor
// variant, the Backend virtuals, the backends' override declarations, Backend::execute(), the
// kernel-mutant list and its error text are all generated from this one list, so adding an op
// is one line here plus the op's own files. This header is light (no descriptor headers):
// tools may include it for the mutant queries alone.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bufferlab/core/sizing.h"

namespace bufferlab {

// X(status, Type, method, Return, family, kernel mutants...)
//   status   kernel: every backend implements `method` (a pure virtual of Backend);
//            planned: no kernel yet, the Backend base refuses it with an Error naming the
//            op, the backend and the op's params() (plans hold these ops already).
//   Type     the descriptor struct, declared in ops/<family>.h.
//   method   the Backend method: `Return method(const Workspace&, const Type&)`.
//   family   the stem of the descriptor's header, ops/<family>.h.
//   mutants  the kernel mutants of docs/spec/bug-catalogue.md that change this op's kernels
//            (Backend::set_kernel_mutant); none for most ops.
// Order = the OpDescriptor alternatives' order (the first is the default-constructed one).
#define BUFFERLAB_OPS(X)                                                                   \
  X(kernel, FusedAddRmsNormOp, fused_add_rmsnorm, void, fused_add_rmsnorm)                 \
  X(kernel, MoeRouterOp, moe_router, void, moe, Mutant::B14)                               \
  X(kernel, MoeTopKOp, moe_topk, TopKDiagnostics, moe, Mutant::M_TIE, Mutant::M_GROUP)     \
  X(kernel, MoeGatherOp, moe_gather, void, moe)                                            \
  X(kernel, MoeExpertGemmOp, moe_expert_gemm, void, moe)                                   \
  X(kernel, SwigluOp, swiglu, void, ffn)                                                   \
  X(kernel, MoeCombineOp, moe_combine, void, moe)                                          \
  X(kernel, GemmOp, gemm, void, projection) /* BF16 kinds only: Error for the others */    \
  X(kernel, LmHeadOp, lm_head, void, embedding)                                            \
  X(kernel, MhcExpandOp, mhc_expand, void, mhc)                                            \
  X(kernel, MhcPreOp, mhc_pre, MhcDiagnostics, mhc, Mutant::M_SKCOL, Mutant::M_SKORDER)    \
  X(kernel, MhcLowRankSplitOp, mhc_lowrank_split, MhcDiagnostics, mhc)                     \
  X(kernel, MhcLowRankSlabOp, mhc_lowrank_slab, MhcDiagnostics, mhc)                       \
  X(kernel, MhcPostOp, mhc_post, void, mhc, Mutant::B13)                                   \
  X(kernel, MhcHeadOp, mhc_head, MhcDiagnostics, mhc)                                      \
  X(kernel, GdnConvOp, gdn_conv, void, gdn)                                                \
  X(kernel, GdnGatesOp, gdn_gates, void, gdn)                                              \
  X(kernel, GdnChunkOp, gdn_chunk, void, gdn, Mutant::M_GDNCARRY)                          \
  X(kernel, GdnRecurrentOp, gdn_recurrent, void, gdn)                                      \
  X(kernel, GdnGatedNormOp, gdn_gated_norm, void, gdn)                                     \
  X(kernel, Mamba2ConvOp, mamba2_conv, void, mamba2)                                       \
  X(kernel, Mamba2ChunkOp, mamba2_chunk, void, mamba2, Mutant::M_SSDSTATE)                 \
  X(kernel, Mamba2RecurrentOp, mamba2_recurrent, void, mamba2)                             \
  X(kernel, Mamba2GatedNormOp, mamba2_gated_norm, void, mamba2)                            \
  X(planned, GdnDeinterleaveOp, gdn_deinterleave, void, gdn)                               \
  X(planned, FfnActQuantOp, ffn_act_quant, void, ffn)                                      \
  X(planned, Fp8QuantOp, fp8_quant, void, projection)                                      \
  X(planned, Q8QuantOp, q8_quant, void, projection)                                        \
  X(planned, Q2DequantOp, q2_dequant, void, projection)                                    \
  X(planned, LoraOp, lora, void, projection)                                               \
  X(planned, EmbeddingOp, embedding, void, embedding)                                      \
  X(planned, UploadOp, upload_regions, void, embedding)                                    \
  X(kernel, AttnStageOp, attn_stage, void, attention, Mutant::M_MROPE)                     \
  X(kernel, AttnCacheWriteOp, attn_cache_write, void, attention, Mutant::M_MROPE)          \
  X(kernel, AttnPrefillOp, attn_prefill, void, attention, Mutant::M_CAUSAL, Mutant::M_GQA, \
    Mutant::M_BLOCK, Mutant::M_SINK)                                                       \
  X(kernel, AttnDecodeOp, attn_decode, void, attention, Mutant::M_CAUSAL, Mutant::M_GQA,   \
    Mutant::M_BLOCK, Mutant::M_MROPE, Mutant::M_SINK)                                      \
  X(kernel, SplitKMergeOp, splitk_merge, void, attention, Mutant::M_MERGE, Mutant::M_SINK) \
  X(kernel, AttnGateOp, attn_gate, void, attention)                                        \
  X(planned, MlaStageOp, mla_stage, void, mla)                                             \
  X(planned, MlaAttnOp, mla_attn, void, mla)                                               \
  X(planned, QsaIndexerOp, qsa_indexer, void, qsa)

// ---- Generators (expanded by backend.h, backend.cpp and the backend classes) ----

// `, Type` for every entry: the variant is built as TailOf<std::variant, void BUFFERLAB_OPS(...)>.
#define BUFFERLAB_OP_COMMA_TYPE(status, Type, method, Return, family, ...) , Type

// Backend's virtual for one entry: pure for a kernel op, a refusing default for a planned one.
#define BUFFERLAB_OP_VIRTUAL(status, Type, method, Return, family, ...) \
  BUFFERLAB_OP_VIRTUAL_##status(Type, method, Return)
#define BUFFERLAB_OP_VIRTUAL_kernel(Type, method, Return) \
  virtual Return method(const Workspace& ws, const Type& op) = 0;
#define BUFFERLAB_OP_VIRTUAL_planned(Type, method, Return) \
  virtual Return method(const Workspace& ws, const Type& op);

// A concrete backend's override of every kernel op: put BUFFERLAB_BACKEND_OVERRIDES in the
// class body and define each `Return Class::method(const Workspace&, const Type&)`. A kernel
// op without an override leaves the class abstract (compile error); one without a definition
// fails to link.
#define BUFFERLAB_OP_OVERRIDE(status, Type, method, Return, family, ...) \
  BUFFERLAB_OP_OVERRIDE_##status(Type, method, Return)
#define BUFFERLAB_OP_OVERRIDE_kernel(Type, method, Return) \
  Return method(const Workspace& ws, const Type& op) override;
#define BUFFERLAB_OP_OVERRIDE_planned(Type, method, Return)
#define BUFFERLAB_BACKEND_OVERRIDES BUFFERLAB_OPS(BUFFERLAB_OP_OVERRIDE)

namespace detail {
// TailOf<Variant, void, A, B>::type = Variant<A, B>: lets an X-macro emit `, Type` per entry.
template <template <class...> class Variant, class First, class... Rest>
struct TailOf {
  using type = Variant<Rest...>;
};
}  // namespace detail

// One handler of an op visitor that holds `backend` (a Backend&) and `ws`: calls the entry's
// method. A struct expanding BUFFERLAB_OPS(BUFFERLAB_OP_HANDLER) has one overload per entry
// and no generic fallback (Backend::execute()'s visitor).
#define BUFFERLAB_OP_HANDLER(status, Type, method, Return, family, ...) \
  void operator()(const Type& op) const { (void)backend.method(ws, op); }

// Whether `Visitor` has a handler for every alternative of `Variant` (what std::visit needs).
template <class Visitor, class Variant>
inline constexpr bool kHandlesEveryAlternative = false;
template <class Visitor, template <class...> class Variant, class... Alternatives>
inline constexpr bool kHandlesEveryAlternative<Visitor, Variant<Alternatives...>> =
    (std::is_invocable_v<const Visitor&, const Alternatives&> && ...);

// The compile-time check of Backend::execute(): every descriptor alternative has a handler.
// tests/compile_fail shows that a missing one stops the build with this message.
#define BUFFERLAB_ASSERT_EVERY_OP_HANDLED(Visitor, Variant)              \
  static_assert(::bufferlab::kHandlesEveryAlternative<Visitor, Variant>, \
                "an op descriptor alternative has no handler (op_registry.h)")

// ---- The registry as data (no descriptor types needed) ----

enum class OpStatus { kernel, planned };

#define BUFFERLAB_MUTANT_ONE(name) +1
static_assert(0 BUFFERLAB_MUTANTS(BUFFERLAB_MUTANT_ONE) <= 64, "mutant_mask holds 64 mutants");
#undef BUFFERLAB_MUTANT_ONE

constexpr uint64_t mutant_mask(std::initializer_list<Mutant> mutants) {
  uint64_t mask = 0;
  for (Mutant m : mutants) mask |= uint64_t{1} << static_cast<unsigned>(m);
  return mask;
}

struct OpInfo {
  OpStatus status;
  std::string_view type;    // "MoeRouterOp"
  std::string_view method;  // "moe_router"
  std::string_view family;  // "moe"
  uint64_t mutants;         // mutant_mask of the kernel mutants that change this op

  constexpr bool changed_by(Mutant m) const {
    return (mutants >> static_cast<unsigned>(m) & 1u) != 0;
  }
};

inline constexpr std::array kOpRegistry = {
#define BUFFERLAB_OP_INFO(status, Type, method, Return, family, ...) \
  OpInfo{OpStatus::status, #Type, #method, #family, mutant_mask({__VA_ARGS__})},
    BUFFERLAB_OPS(BUFFERLAB_OP_INFO)
#undef BUFFERLAB_OP_INFO
};

inline constexpr std::size_t kNumOps = kOpRegistry.size();

// A kernel mutant: one that changes some op's kernels (not `none`).
constexpr bool is_kernel_mutant(Mutant m) {
  for (const OpInfo& op : kOpRegistry)
    if (op.changed_by(m)) return true;
  return false;
}

// The ops whose kernels mutant `m` changes, in registry order (empty for a non-kernel mutant).
std::vector<OpInfo> ops_changed_by(Mutant m);
// Every kernel mutant, in Mutant order: "B13, B14, M-TIE, M-SKCOL, M-GDNCARRY, M-SSDSTATE,
// M-SKORDER".
std::string kernel_mutant_list();

}  // namespace bufferlab
