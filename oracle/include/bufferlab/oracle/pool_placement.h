// Weight-pool placement for running ops outside a plan. Op descriptors make every weight-pool
// operand at offset 0 of the pool (a plan never executes weights; the verifier ignores the
// pool); a harness that runs one op or a chain of ops gives each pool operand its own range.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "bufferlab/core/tensor_ref.h"

namespace bufferlab::oracle {

inline constexpr uint64_t kPoolAlignment = 256;

// Places the tensors one after another from `start`, each at a kPoolAlignment-aligned
// offset (a null pointer or a non-pool tensor is an Error). Returns the end offset: the
// pool bytes they need. Checked arithmetic.
uint64_t place_in_pool(std::initializer_list<TensorRef*> tensors, uint64_t start = 0);

}  // namespace bufferlab::oracle
