// Negative-compile test of the op registry (ctest compile_fail.*): Backend::execute()'s
// visitor, generated from BUFFERLAB_OPS, meets an OpDescriptor with one alternative more —
// a descriptor added to the variant by hand, with no registry entry. Before the registry
// such an alternative compiled and execute() silently did nothing; now the build stops with
// BUFFERLAB_ASSERT_EVERY_OP_HANDLED's message. Built with BUFFERLAB_COMPILE_FAIL_CONTROL the
// extra alternative is left out and the file compiles (the failure is the missing handler).
#include <string>
#include <variant>

#include "bufferlab/core/backend.h"

namespace bufferlab {
namespace {

struct UnregisteredOp {
  std::string params() const { return "unregistered"; }
};

#if defined(BUFFERLAB_COMPILE_FAIL_CONTROL)
#define EXTRA_ALTERNATIVE
#else
#define EXTRA_ALTERNATIVE , UnregisteredOp
#endif
using ExtendedDescriptor =
    typename detail::TailOf<std::variant,
                            void BUFFERLAB_OPS(BUFFERLAB_OP_COMMA_TYPE) EXTRA_ALTERNATIVE>::type;

// The same visitor as Backend::execute()'s (core/src/backend.cpp).
struct Dispatch {
  Backend& backend;
  const Workspace& ws;
  BUFFERLAB_OPS(BUFFERLAB_OP_HANDLER)
};
BUFFERLAB_ASSERT_EVERY_OP_HANDLED(Dispatch, ExtendedDescriptor);

[[maybe_unused]] void execute(Backend& b, const Workspace& ws, const ExtendedDescriptor& op) {
  std::visit(Dispatch{b, ws}, op);
}

}  // namespace
}  // namespace bufferlab
