// CpuBackend: the Eigen + OpenMP reference implementation of every op on a host workspace.
#pragma once

#include <memory>

#include "bufferlab/core/backend.h"

namespace bufferlab {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace bufferlab
