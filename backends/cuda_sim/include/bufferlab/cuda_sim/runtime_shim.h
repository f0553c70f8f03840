// The subset of the CUDA runtime API the backend calls (memory, copies and sets, launch
// attributes, errors, device queries), with CUDA's names and documented semantics, served by
// the simulated H200 (runtime_api.cpp). Error codes keep the real runtime's numbers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bufferlab::sim::device {

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};

enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorNoKernelImageForDevice = 209,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute : int {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

struct cudaFuncAttributes {
  size_t sharedSizeBytes = 0;
  size_t constSizeBytes = 0;
  size_t localSizeBytes = 0;
  int maxThreadsPerBlock = 0;
  int numRegs = 0;
  int ptxVersion = 0;
  int binaryVersion = 0;
  int maxDynamicSharedSizeBytes = 0;
};

// The fields of the simulated device the backend and the executor read.
struct cudaDeviceProp {
  char name[256] = {};
  size_t totalGlobalMem = 0;
  size_t sharedMemPerBlock = 0;       // static limit without the opt-in attribute
  size_t sharedMemPerBlockOptin = 0;  // with it
  size_t sharedMemPerMultiprocessor = 0;
  int regsPerBlock = 0;
  int warpSize = 32;
  int maxThreadsPerBlock = 0;
  int maxThreadsDim[3] = {};
  int maxGridSize[3] = {};
  int multiProcessorCount = 0;
  int major = 0, minor = 0;
};

inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }

struct CUstream_st;
using cudaStream_t = CUstream_st*;

cudaError_t cudaMalloc(void** p, size_t bytes);
template <class T>
cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaFree(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaRuntimeGetVersion(int* v);
cudaError_t cudaDriverGetVersion(int* v);
cudaError_t cudaFuncSetAttributeRaw(const void* entry, cudaFuncAttribute attr, int value);
cudaError_t cudaFuncGetAttributesRaw(cudaFuncAttributes* out, const void* entry);
template <class F>
cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttributeRaw(reinterpret_cast<const void*>(kernel), attr, value);
}
template <class F>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* out, F* kernel) {
  return cudaFuncGetAttributesRaw(out, reinterpret_cast<const void*>(kernel));
}

}  // namespace bufferlab::sim::device
