// Checks shared by every op's bind(): an operand must hold exactly the elements the op's shape
// says, or a kernel's loop would leave the tensor that Workspace::resolve checked.
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab::detail {

// An op's params() string, built only when a check fails: bind() runs on every launch, and a
// launch allocates nothing (docs/architecture.md), not even the message it would need to fail.
class LazyParams {
 public:
  template <class Op>
  explicit LazyParams(const Op& op)
      : op_(&op), describe_([](const void* o) { return static_cast<const Op*>(o)->params(); }) {}
  std::string str() const { return describe_(op_); }

 private:
  const void* op_;
  std::string (*describe_)(const void*);
};

inline void require_elements(const TensorRef& t, uint64_t elements, const LazyParams& params) {
  if (t.elements() != elements)
    throw Error(params.str() + ": operand " + t.to_string() + " does not hold the " +
                std::to_string(elements) + " elements of the op's shape");
}

inline void require_dtype(const TensorRef& t, DType want, const LazyParams& params) {
  if (t.dtype != want)
    throw Error(params.str() + ": operand " + t.to_string() + " has the wrong element type");
}

// Checks an operand's element count and type, then resolves it (Workspace::data checks the
// bytes lie in their buffer or the pool): the one step of every op's bind().
template <class T>
T* bind_one(const Workspace& ws, const TensorRef& t, uint64_t elements, DType type,
            const LazyParams& params) {
  require_elements(t, elements, params);
  require_dtype(t, type, params);
  return ws.data<T>(t);
}

}  // namespace bufferlab::detail
