// Picks a Backend by name ("cpu", "cuda", "cuda-sim"). The only place that knows which backends
// exist.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"

namespace bufferlab {

// Throws BackendUnavailable when the backend is not built or cannot run here (no GPU or
// driver: the message says why), Error for an unknown name.
std::unique_ptr<Backend> make_backend(const std::string& name);
std::vector<std::string> backend_names();  // the names this build knows
bool cuda_backend_built();
bool cuda_sim_backend_built();  // the kernel simulator (backends/cuda_sim)
// What the kernel simulator did in this process: "12 launches of 5 kernels (topk_kernel x2,
// ...), 1,024 blocks; checked 3,000 loads, 1,200 stores, 4 atomics, 800 shared accesses, 6
// library accesses" — or "" when it has not run (or is not built).
std::string cuda_sim_activity();
// The kernel simulator's schedule seed (block order, thread order between barriers; every
// finding names it) for this process; an Error when the simulator is not built.
void set_cuda_sim_seed(uint64_t seed);

}  // namespace bufferlab
