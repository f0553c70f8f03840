// The backend factory: the one place that knows which backends this build has.
#include "bufferlab/backends/backend_factory.h"

#include "bufferlab/cpu/cpu_backend.h"
#if defined(BUFFERLAB_HAVE_CUDA)
#include "bufferlab/cuda/cuda_backend.h"
#endif
#if defined(BUFFERLAB_HAVE_CUDA_SIM)
#include "bufferlab/cuda_sim/cuda_sim_backend.h"
#endif

namespace bufferlab {

bool cuda_backend_built() {
#if defined(BUFFERLAB_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

bool cuda_sim_backend_built() {
#if defined(BUFFERLAB_HAVE_CUDA_SIM)
  return true;
#else
  return false;
#endif
}

std::vector<std::string> backend_names() { return {"cpu", "cuda", "cuda-sim"}; }

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") {
#if defined(BUFFERLAB_HAVE_CUDA)
    return make_cuda_backend();
#else
    throw BackendUnavailable("this build has no CUDA backend (configured without nvcc)");
#endif
  }
  if (name == "cuda-sim") {
#if defined(BUFFERLAB_HAVE_CUDA_SIM)
    return make_cuda_sim_backend();
#else
    throw BackendUnavailable(
        "this build has no CUDA simulator (configured without Boost.Context or without GCC)");
#endif
  }
  throw Error("unknown backend '" + name + "' (known: cpu, cuda, cuda-sim)");
}

}  // namespace bufferlab
