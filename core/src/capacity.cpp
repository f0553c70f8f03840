// capacity_of: the arena against the target's device memory.
#include "bufferlab/core/capacity.h"

#include <limits>

namespace bufferlab {

double Capacity::percent() const {
  if (memory_bytes == 0)  // no memory at all: any arena is infinitely too large
    return arena_bytes == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return 100.0 * static_cast<double>(arena_bytes) / static_cast<double>(memory_bytes);
}

Capacity capacity_of(uint64_t arena_bytes, const Target& target) {
  return Capacity{arena_bytes, target.memory_bytes};
}

}  // namespace bufferlab
