// Backend: allocation contract and descriptor dispatch shared by every backend.
#include "bufferlab/core/backend.h"

#include <string>
#include <string_view>
#include <variant>

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

// norm_unit_w is zero-filled at allocation (docs/spec/buffers.md §3 #24): RMSNorm scale 1 + 0.
void Backend::zero_unit_weight(const Workspace& ws) {
  const LayoutEntry unit = ws.layout().entry(BufferId::norm_unit_w);
  if (unit.is_null()) return;
  fill(ws, TensorRef{Space::arena, BufferId::norm_unit_w, 0, {unit.bytes}, DType::u8}, 0);
}

// One handler per registry entry, no generic fallback: std::visit (and the assertion, with a
// readable message) refuse to compile an OpDescriptor alternative without one.
namespace {
struct Dispatch {
  Backend& backend;
  const Workspace& ws;
  BUFFERLAB_OPS(BUFFERLAB_OP_HANDLER)
};
}  // namespace
BUFFERLAB_ASSERT_EVERY_OP_HANDLED(Dispatch, OpDescriptor);
static_assert(std::variant_size_v<OpDescriptor> == kNumOps);

void Backend::execute(const Workspace& ws, const OpDescriptor& op) {
  std::visit(Dispatch{*this, ws}, op);
}

// The refusals of the registry's planned ops (no kernel in any backend yet).
[[noreturn]] void Backend::refuse(std::string_view type, std::string_view method,
                                  const std::string& params) const {
  throw Error(name() + " backend has no kernel for " + std::string(type) +
              " (Backend::" + std::string(method) + "): " + params);
}
#define BUFFERLAB_OP_REFUSAL(status, Type, method, Return, family, ...) \
  BUFFERLAB_OP_REFUSAL_##status(Type, method, Return)
#define BUFFERLAB_OP_REFUSAL_kernel(Type, method, Return)
#define BUFFERLAB_OP_REFUSAL_planned(Type, method, Return)          \
  Return Backend::method(const Workspace& /*ws*/, const Type& op) { \
    refuse(#Type, #method, op.params());                            \
  }
BUFFERLAB_OPS(BUFFERLAB_OP_REFUSAL)
#undef BUFFERLAB_OP_REFUSAL_planned
#undef BUFFERLAB_OP_REFUSAL_kernel
#undef BUFFERLAB_OP_REFUSAL

bool Backend::is_backend_mutant(Mutant m) { return m == Mutant::none || is_kernel_mutant(m); }

void Backend::set_kernel_mutant(Mutant m) {
  if (!is_backend_mutant(m))
    throw Error(std::string("mutant ") + to_string(m) +
                " is not a kernel mutant of this backend (kernel mutants: " + kernel_mutant_list() +
                ")");
  mutant_ = m;
}

}  // namespace bufferlab
