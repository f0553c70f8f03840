// The error model of a backend's arithmetic, which the oracle's judges derive their bounds
// from: the CPU's, or the device's (docs/spec/numerics.md §1). Every compare and fuzz runner asks
// here.
#pragma once

#include "bufferlab/core/backend.h"
#include "bufferlab/oracle/bounds.h"

namespace bufferlab::cli {

inline oracle::BoundModel bounds_of(const Backend& backend) {
  return backend.name() == "cpu" ? oracle::cpu_bounds() : oracle::device_bounds();
}

}  // namespace bufferlab::cli
