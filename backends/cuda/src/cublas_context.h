// LibraryContext: the CUDA backend's fixed library workspace (docs/architecture.md, "Backends
// allocate nothing inside execute()"): one cuBLAS handle bound to the legacy default stream, and
// ONE device block from a single cudaMalloc made when the backend is constructed, carved into
//
//   cublas workspace   32 MiB  cublasSetWorkspace (Hopper's recommended size), so cuBLAS never
//                              allocates its own per-stream workspace
//   staging            24 MiB  GEMM staging (expert rows by window, FP32 GEMM results by row
//                              chunk, the router's widened FP32 weight by expert chunk)
//   grouping            8 MiB  the expert grouping of ≤ kMaxSlots slots: sort keys and values,
//                              double-buffered (4 × 4 B × kMaxSlots)
//   sort temp        (queried) cub::DeviceRadixSort temporary storage for kMaxSlots items
//   offsets            ~4 KiB  per-expert row offsets, u32 [kMaxGroupExperts + 1]
//   counters             16 B  the top-k NaN-key counter (u64) and the op error flag (u32)
//
// about 64 MiB in all (total_bytes()). Ops beyond the fixed capacities (more than kMaxSlots
// routed slots in one pass, more than kMaxGroupExperts routed experts) are refused with an
// Error; GEMMs larger than the staging area are chunked. Private to the CUDA backend.
#pragma once

#include "cuda_libraries.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bufferlab::BUFFERLAB_CUDA_NS {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}

class LibraryContext {
 public:
  static constexpr uint64_t kCublasWorkspaceBytes = uint64_t{32} << 20;
  static constexpr uint64_t kStagingBytes = uint64_t{24} << 20;
  // Slots (rows · top_k) one grouped op can hold: 2^19 = e.g. 65536 tokens at top_k 8.
  static constexpr uint64_t kMaxSlots = uint64_t{1} << 19;
  static constexpr uint64_t kMaxGroupExperts = 1024;

  LibraryContext();  // cublasCreate + the one cudaMalloc; throws Error on failure
  ~LibraryContext();
  LibraryContext(const LibraryContext&) = delete;
  LibraryContext& operator=(const LibraryContext&) = delete;

  cublasHandle_t handle() const { return handle_; }
  uint64_t total_bytes() const { return total_bytes_; }

  void* staging() const { return staging_; }
  uint32_t* sort_keys(int i) const { return sort_keys_[i]; }
  uint32_t* sort_values(int i) const { return sort_values_[i]; }
  void* sort_temp() const { return sort_temp_; }
  size_t sort_temp_bytes() const { return sort_temp_bytes_; }
  uint32_t* offsets() const { return offsets_; }
  unsigned long long* nan_counter() const { return nan_counter_; }
  uint32_t* error_flag() const { return error_flag_; }
  // Host copy of the offsets (kMaxGroupExperts + 1 entries), allocated once here.
  uint32_t* host_offsets() { return host_offsets_.data(); }

 private:
  cublasHandle_t handle_ = nullptr;
  std::byte* block_ = nullptr;
  uint64_t total_bytes_ = 0;
  void* staging_ = nullptr;
  uint32_t* sort_keys_[2] = {nullptr, nullptr};
  uint32_t* sort_values_[2] = {nullptr, nullptr};
  void* sort_temp_ = nullptr;
  size_t sort_temp_bytes_ = 0;
  uint32_t* offsets_ = nullptr;
  unsigned long long* nan_counter_ = nullptr;
  uint32_t* error_flag_ = nullptr;
  std::vector<uint32_t> host_offsets_;
};

}  // namespace bufferlab::BUFFERLAB_CUDA_NS

#define BUFFERLAB_CUBLAS_CHECK(call) \
  ::bufferlab::cuda::check_cublas((call), #call, __FILE__, __LINE__)
