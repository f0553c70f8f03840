// The simulated CUDA backend ("cuda-sim"): the CUDA backend's own kernel sources, compiled
// by the host compiler and run by the kernel simulator on the CPU, every access checked
// against the running op's declared footprint (docs/architecture.md "Kernel simulator").
// Plain C++: no CUDA header is needed to pick it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "bufferlab/core/backend.h"

namespace bufferlab {

struct SimOptions {
  // Block order and the order of threads between barriers; a finding names it.
  uint64_t seed = 1;
  // The device-math perturbation (which ulp inside CUDA's bound each input gets).
  uint64_t math_seed = 1;
  // Every launch runs twice, the second time with another schedule, and the two results
  // must agree bit for bit (the nondeterminism checker). Off: half the time, no such check.
  bool rerun = true;
  // Device math within CUDA's ulp bounds, perturbed; off: correctly rounded host math.
  bool perturb_math = true;
};

// What the simulator did since the process started (or the last reset): the CLI prints it.
struct SimCounters {
  uint64_t launches = 0, blocks = 0, threads = 0;
  uint64_t loads = 0, stores = 0, atomics = 0;  // global accesses checked
  uint64_t shared_accesses = 0, library_calls = 0;
  std::map<std::string, uint64_t> launches_by_kernel;
};

// Sets the options for the process (the simulator is one simulated device per process).
void set_sim_options(const SimOptions& options);
const SimOptions& sim_options();
const SimCounters& sim_counters();
void reset_sim_counters();

// Never unavailable: needs no GPU, driver or CUDA runtime.
std::unique_ptr<Backend> make_cuda_sim_backend();

}  // namespace bufferlab
