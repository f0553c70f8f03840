// cuda_unavailable_reason(): why this machine cannot run the CUDA backend, asked in the order
// that gives the clearest answer — driver, devices, then whether our kernels load on device 0.
// Every query returns an error code, so a machine without a driver or GPU gets a sentence,
// never a crash.
#include "cuda_platform.h"

#include <string>

#include "bufferlab/cuda/cuda_backend.h"
#include "rmsnorm_kernel.h"

namespace bufferlab {
namespace {

std::string describe(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

std::string version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

std::string cuda_unavailable_reason() {
  int driver = 0;
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    cudaGetLastError();
    return "no CUDA driver installed (libcuda not found); this build needs a CUDA " +
           version_text(runtime) + " driver and an sm_90 GPU";
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return "no usable CUDA device: cudaGetDeviceCount failed (" + describe(status) + "; driver " +
           version_text(driver) + ", runtime " + version_text(runtime) + ")";
  }
  if (count == 0) return "no CUDA device (driver " + version_text(driver) + ")";
  const cudaError_t probe = cuda::probe_rmsnorm_kernel();
  if (probe != cudaSuccess) {
    cudaGetLastError();
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    return "device 0 (" + std::string(prop.name) + ", sm_" + std::to_string(prop.major) +
           std::to_string(prop.minor) + ") cannot run this build's kernels (" + describe(probe) +
           ")";
  }
  return "";
}

}  // namespace bufferlab
