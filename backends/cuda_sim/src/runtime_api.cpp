// The CUDA runtime calls of runtime_shim.h on the simulated H200: allocation from the
// simulated device memory, copies and sets validated (a device pointer must lie in one live
// allocation, as the runtime's cudaErrorInvalidValue says) and checked like a kernel's
// accesses, launch attributes, the sticky-free last error, device queries. Streams are the
// default stream: every call completes before it returns.
#include <cstring>
#include <string>
#include <unordered_map>

#include "device_memory.h"
#include "executor_state.h"
#include "findings.h"
#include "memory_checks.h"
#include "sim_state.h"

namespace bufferlab::sim {
namespace {

device::cudaError_t g_last_error = device::cudaSuccess;

std::unordered_map<const void*, size_t>& dynamic_shared_attributes() {
  static std::unordered_map<const void*, size_t> m;
  return m;
}

device::cudaError_t fail(device::cudaError_t e) {
  g_last_error = e;
  return e;
}

void library_finding(const char* call, std::string detail) {
  Finding f;
  f.check = Check::library_call;
  f.kernel = call;
  f.detail = std::move(detail);
  f.op = footprint().op;
  f.seed = options().seed;
  record(std::move(f));
}

}  // namespace

const device::cudaDeviceProp& simulated_device() {
  static const device::cudaDeviceProp prop = [] {
    device::cudaDeviceProp p;
    std::strcpy(p.name, "NVIDIA H200 (cuda-sim)");
    p.totalGlobalMem = 150'754'820'096ull;  // 140.4 GiB, as the H200 reports
    p.sharedMemPerBlock = kStaticSharedLimit;
    p.sharedMemPerBlockOptin = kDynamicSharedLimit;
    p.sharedMemPerMultiprocessor = 233472;
    p.regsPerBlock = 65536;
    p.warpSize = 32;
    p.maxThreadsPerBlock = 1024;
    p.maxThreadsDim[0] = 1024;
    p.maxThreadsDim[1] = 1024;
    p.maxThreadsDim[2] = 64;
    p.maxGridSize[0] = 2147483647;
    p.maxGridSize[1] = 65535;
    p.maxGridSize[2] = 65535;
    p.multiProcessorCount = 132;
    p.major = 9;
    p.minor = 0;
    return p;
  }();
  return prop;
}

size_t dynamic_shared_allowed(const void* entry) {
  const auto& m = dynamic_shared_attributes();
  const auto it = m.find(entry);
  return it != m.end() ? it->second : kStaticSharedLimit;
}

void set_last_error(device::cudaError_t e) { g_last_error = e; }

// Fills without counting as a write: the arena poison of Backend::poison.
void poison_device(void* p, size_t bytes) {
  if (!is_device_range(p, bytes)) return;
  std::memset(p, 0xFF, bytes);
  DeviceMemory::get().mark_written(p, bytes, false);
}

namespace device {

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (p == nullptr) return fail(cudaErrorInvalidValue);
  *p = DeviceMemory::get().allocate(bytes);
  if (*p == nullptr) return fail(cudaErrorMemoryAllocation);
  // Fresh device memory holds whatever it held: poison, and nothing counts as written.
  std::memset(*p, 0xFF, bytes);
  DeviceMemory::get().mark_written(*p, bytes, false);
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  return DeviceMemory::get().release(p) ? cudaSuccess : fail(cudaErrorInvalidDevicePointer);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault || kind == cudaMemcpyHostToHost) {
    library_finding("cudaMemcpy", "direction " + std::to_string(kind) +
                                      " is not one the backend uses (the stand-in refuses it)");
    return fail(cudaErrorInvalidMemcpyDirection);
  }
  // A copy to the host is the harness (or the backend) looking: it reads what is there,
  // written or not, and is checked for bounds only; a device-to-device copy is a step.
  if (kind == cudaMemcpyDeviceToHost && !is_device_range(src, bytes)) {
    library_finding("cudaMemcpy", "a device source outside every live allocation");
    return fail(cudaErrorInvalidValue);
  }
  if (kind == cudaMemcpyDeviceToDevice &&
      !library_access("cudaMemcpy source", src, bytes, Touch::read))
    return fail(cudaErrorInvalidValue);
  if (dst_device && !library_access("cudaMemcpy destination", dst, bytes, Touch::write))
    return fail(cudaErrorInvalidValue);
  if (!src_device && is_device_range(src, 1)) {
    library_finding("cudaMemcpy", "a host source that is a device address");
    return fail(cudaErrorInvalidValue);
  }
  if (!dst_device && is_device_range(dst, 1)) {
    library_finding("cudaMemcpy", "a host destination that is a device address");
    return fail(cudaErrorInvalidValue);
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!library_access("cudaMemset", p, bytes, Touch::write)) return fail(cudaErrorInvalidValue);
  std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  return cudaMemset(p, value, bytes);
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return g_last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNoKernelImageForDevice:
      return "cudaErrorNoKernelImageForDevice";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources:
      return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory (the simulated device holds 2 GiB)";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    default:
      return cudaGetErrorName(e);
  }
}

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *prop = simulated_device();
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *total_bytes = kDeviceCapacity;
  *free_bytes = kDeviceCapacity - DeviceMemory::get().allocated_bytes();
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttributeRaw(const void* entry, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<size_t>(value) > kDynamicSharedLimit)
    return fail(cudaErrorInvalidValue);
  dynamic_shared_attributes()[entry] = static_cast<size_t>(value);
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributesRaw(cudaFuncAttributes* out, const void* entry) {
  *out = cudaFuncAttributes{};
  out->maxThreadsPerBlock = 1024;
  out->maxDynamicSharedSizeBytes = static_cast<int>(dynamic_shared_allowed(entry));
  out->ptxVersion = 90;
  out->binaryVersion = 90;
  return cudaSuccess;
}

}  // namespace device
}  // namespace bufferlab::sim
