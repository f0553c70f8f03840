// The CPU backend, created once per process: the backend of the properties and slow tests, and
// a second backend for kernel tests that need one (e.g. "CUDA agrees with the CPU").
#pragma once

#include <memory>

#include "bufferlab/core/backend.h"
#include "bufferlab/cpu/cpu_backend.h"

namespace bufferlab::testing {

inline Backend& cpu_backend() {
  static const std::unique_ptr<Backend> cpu = make_cpu_backend();
  return *cpu;
}

}  // namespace bufferlab::testing
