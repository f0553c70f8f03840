// Checks shared by every op's bind(): an operand must hold exactly the elements the op's shape
// says, or a kernel's loop would leave the tensor that Workspace::resolve checked.
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/tensor_ref.h"

namespace bufferlab::detail {

inline void require_elements(const TensorRef& t, uint64_t elements, const std::string& params) {
  if (t.elements() != elements)
    throw Error(params + ": operand " + t.to_string() + " does not hold the " +
                std::to_string(elements) + " elements of the op's shape");
}

inline void require_dtype(const TensorRef& t, DType want, const std::string& params) {
  if (t.dtype != want)
    throw Error(params + ": operand " + t.to_string() + " has the wrong element type");
}

}  // namespace bufferlab::detail
