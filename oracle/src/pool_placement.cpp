// Weight-pool placement: consecutive aligned ranges, checked.
#include "bufferlab/oracle/pool_placement.h"

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab::oracle {

uint64_t place_in_pool(std::initializer_list<TensorRef*> tensors, uint64_t start) {
  Size at(start);
  for (TensorRef* t : tensors) {
    if (t == nullptr) throw Error("place_in_pool: null tensor");
    if (t->space != Space::weights)
      throw Error("place_in_pool: " + t->to_string() + " is not a weight-pool tensor");
    at = align_up(at, kPoolAlignment);
    t->offset = at.value();
    at = at + t->bytes();
  }
  return at.value();
}

}  // namespace bufferlab::oracle
