// Backend: allocation contract and descriptor dispatch shared by every backend.
#include "bufferlab/core/backend.h"

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

void Backend::execute(const Workspace& ws, const OpDescriptor& op) {
  std::visit(
      [&](const auto& d) {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, FusedAddRmsNormOp>) fused_add_rmsnorm(ws, d);
      },
      op);
}

}  // namespace bufferlab
