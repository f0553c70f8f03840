// TensorRef sizes and printing.
#include "bufferlab/core/tensor_ref.h"

#include <sstream>
#include <string_view>
#include <utility>

#include "bufferlab/core/checked.h"

namespace bufferlab {

uint64_t TensorRef::elements() const {
  Size n = 1;
  for (uint64_t d : shape) n = n * d;
  return n.value();
}

uint64_t TensorRef::bytes() const {
  if (dtype == DType::fp4_e2m1x2) return cdiv(elements(), 2);
  return (Size(elements()) * dtype_bytes(dtype)).value();
}

std::string TensorRef::to_string() const {
  std::ostringstream s;
  s << (space == Space::weights ? std::string_view("weights") : buffer_name(buffer)) << '+'
    << offset << ' ' << bufferlab::to_string(dtype) << '[';
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? "," : "") << shape[i];
  s << ']';
  return s.str();
}

TensorRef arena_tensor(BufferId buffer, uint64_t offset, std::vector<uint64_t> shape, DType t) {
  return TensorRef{Space::arena, buffer, offset, std::move(shape), t};
}

TensorRef pool_tensor(std::vector<uint64_t> shape, DType t) {
  return TensorRef{Space::weights, BufferId::hidden_states, 0, std::move(shape), t};
}

const char* to_string(AccessKind k) {
  switch (k) {
    case AccessKind::read:
      return "read";
    case AccessKind::write:
      return "write";
    case AccessKind::phantom_write:
      return "phantom-write";
  }
  return "?";
}

bool is_write(AccessKind k) { return k != AccessKind::read; }

}  // namespace bufferlab
