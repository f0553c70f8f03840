// Backend: allocation contract and descriptor dispatch shared by every backend.
#include "bufferlab/core/backend.h"

#include <string>
#include <type_traits>

namespace bufferlab {

Workspace Backend::allocate(const Layout& layout, uint64_t weights_bytes) {
  Workspace ws = do_allocate(layout, weights_bytes);
  zero_unit_weight(ws);
  return ws;
}

void Backend::poison(const Workspace& ws) {
  fill_arena(ws, kPoisonByte);
  zero_unit_weight(ws);
}

// norm_unit_w is zero-filled at allocation (spec §3 #24): RMSNorm scale 1 + 0.
void Backend::zero_unit_weight(const Workspace& ws) {
  const LayoutEntry unit = ws.layout().entry(BufferId::norm_unit_w);
  if (unit.is_null()) return;
  fill(ws, TensorRef{Space::arena, BufferId::norm_unit_w, 0, {unit.bytes}, DType::u8}, 0);
}

bool has_kernel(const OpDescriptor& op) {
  if (const auto* g = std::get_if<GemmOp>(&op)) return g->is_bf16_kind();
  return true;
}

void Backend::execute(const Workspace& ws, const OpDescriptor& op) {
  std::visit(
      [&](const auto& d) {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, FusedAddRmsNormOp>) fused_add_rmsnorm(ws, d);
        if constexpr (std::is_same_v<T, MoeRouterOp>) moe_router(ws, d);
        if constexpr (std::is_same_v<T, MoeTopKOp>) moe_topk(ws, d);
        if constexpr (std::is_same_v<T, MoeGatherOp>) moe_gather(ws, d);
        if constexpr (std::is_same_v<T, MoeExpertGemmOp>) moe_expert_gemm(ws, d);
        if constexpr (std::is_same_v<T, SwigluOp>) swiglu(ws, d);
        if constexpr (std::is_same_v<T, MoeCombineOp>) moe_combine(ws, d);
        if constexpr (std::is_same_v<T, GemmOp>) gemm(ws, d);
        if constexpr (std::is_same_v<T, LmHeadOp>) lm_head(ws, d);
        if constexpr (std::is_same_v<T, HcExpandOp>) hc_expand(ws, d);
        if constexpr (std::is_same_v<T, HcPreOp>) hc_pre(ws, d);
        if constexpr (std::is_same_v<T, HcLowRankSplitOp>) hc_lowrank_split(ws, d);
        if constexpr (std::is_same_v<T, HcLowRankSlabOp>) hc_lowrank_slab(ws, d);
        if constexpr (std::is_same_v<T, HcPostOp>) hc_post(ws, d);
        if constexpr (std::is_same_v<T, HcHeadOp>) hc_head(ws, d);
        if constexpr (std::is_same_v<T, GdnConvOp>) gdn_conv(ws, d);
        if constexpr (std::is_same_v<T, GdnGatesOp>) gdn_gates(ws, d);
        if constexpr (std::is_same_v<T, GdnChunkOp>) gdn_chunk(ws, d);
        if constexpr (std::is_same_v<T, GdnRecurrentOp>) gdn_recurrent(ws, d);
        if constexpr (std::is_same_v<T, GdnGatedNormOp>) gdn_gated_norm(ws, d);
        if constexpr (std::is_same_v<T, Mamba2ConvOp>) mamba2_conv(ws, d);
        if constexpr (std::is_same_v<T, SsdChunkOp>) ssd_chunk(ws, d);
        if constexpr (std::is_same_v<T, Mamba2RecurrentOp>) mamba2_recurrent(ws, d);
        if constexpr (std::is_same_v<T, Mamba2GatedNormOp>) mamba2_gated_norm(ws, d);
      },
      op);
}

bool Backend::is_backend_mutant(Mutant m) {
  return m == Mutant::none || m == Mutant::B14 || m == Mutant::M_TIE || m == Mutant::B13 ||
         m == Mutant::M_SKCOL || m == Mutant::M_GDNCARRY || m == Mutant::M_SSDSTATE;
}

void Backend::set_kernel_mutant(Mutant m) {
  if (!is_backend_mutant(m))
    throw Error(
        std::string("mutant ") + to_string(m) +
        " is not a kernel mutant of this backend (kernel mutants: B13, B14, M-TIE, M-SKCOL, "
        "M-GDNCARRY, M-SSDSTATE)");
  mutant_ = m;
}

}  // namespace bufferlab
