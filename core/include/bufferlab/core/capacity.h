// Capacity: does the arena fit the target's device memory? An arena larger than the GPU's
// memory is a finding of its own (`capacity`), whatever the verifier says about the plans:
// no engine can allocate it. `plan` and `verify` report the arena's share of the memory and
// exit 1 when it does not fit (docs/spec/buffers.md §2.2).
#pragma once

#include <cstdint>

#include "bufferlab/core/target.h"

namespace bufferlab {

struct Capacity {
  uint64_t arena_bytes = 0;
  uint64_t memory_bytes = 0;  // Target::memory_bytes

  bool fits() const { return arena_bytes <= memory_bytes; }
  // arena / memory as a percentage (100 = all of it; above 100 it does not fit).
  double percent() const;
};

Capacity capacity_of(uint64_t arena_bytes, const Target& target);

}  // namespace bufferlab
