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

std::string cuda_sim_activity() {
#if defined(BUFFERLAB_HAVE_CUDA_SIM)
  const SimCounters& c = sim_counters();
  if (c.launches == 0 && c.library_calls == 0) return "";
  std::string kernels;
  for (const auto& [name, count] : c.launches_by_kernel)
    kernels += (kernels.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  auto count = [](uint64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  return count(c.launches, "launch", "launches") + " of " +
         count(c.launches_by_kernel.size(), "kernel", "kernels") + " (" + kernels + "), " +
         std::to_string(c.blocks) + " blocks, " + std::to_string(c.threads) + " threads; checked " +
         std::to_string(c.loads) + " loads, " + std::to_string(c.stores) + " stores, " +
         std::to_string(c.atomics) + " atomics, " + std::to_string(c.shared_accesses) +
         " shared accesses, " + std::to_string(c.library_calls) + " library accesses" +
         (sim_options().rerun ? " (every launch ran twice: the nondeterminism re-run)" : "");
#else
  return "";
#endif
}

void set_cuda_sim_seed(uint64_t seed) {
#if defined(BUFFERLAB_HAVE_CUDA_SIM)
  SimOptions o = sim_options();
  o.seed = seed;
  set_sim_options(o);
#else
  (void)seed;
  throw Error("this build has no CUDA simulator (configured without Boost.Context or GCC)");
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
