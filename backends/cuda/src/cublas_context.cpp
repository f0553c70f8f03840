// The fixed library workspace: one cuBLAS handle and one device block, carved once.
#include "cublas_context.h"

#include <string>

#include "bufferlab/core/error.h"
#include "cublas_api.h"
#include "cuda_check.h"
#include "moe_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

constexpr uint64_t kAlign = 256;

uint64_t align_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

}  // namespace

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  cudaGetLastError();  // a failed launch inside cuBLAS must not resurface later
  throw Error(std::string("cuBLAS call ") + call + " failed at " + file + ":" +
              std::to_string(line) + ": " + cublas_api().status_name(status) + ": " +
              cublas_api().status_string(status));
}

LibraryContext::LibraryContext() : host_offsets_(kMaxGroupExperts + 1, 0) {
  const CublasApi& api = cublas_api();  // before the cudaMalloc: an Error here leaks nothing
  sort_temp_bytes_ = grouping_sort_temp_bytes(kMaxSlots, kMaxGroupExperts);
  const uint64_t cublas_at = 0;
  const uint64_t staging_at = cublas_at + kCublasWorkspaceBytes;
  const uint64_t sort_at = staging_at + kStagingBytes;
  const uint64_t sort_array = align_up(kMaxSlots * sizeof(uint32_t));
  const uint64_t temp_at = sort_at + 4 * sort_array;
  const uint64_t offsets_at = temp_at + align_up(sort_temp_bytes_);
  const uint64_t counters_at = offsets_at + align_up((kMaxGroupExperts + 1) * sizeof(uint32_t));
  total_bytes_ = counters_at + kAlign;

  void* block = nullptr;
  BUFFERLAB_CUDA_CHECK(cudaMalloc(&block, total_bytes_));
  block_ = static_cast<std::byte*>(block);
  staging_ = block_ + staging_at;
  for (int i = 0; i < 2; ++i) {
    sort_keys_[i] = reinterpret_cast<uint32_t*>(block_ + sort_at + i * sort_array);
    sort_values_[i] = reinterpret_cast<uint32_t*>(block_ + sort_at + (2 + i) * sort_array);
  }
  sort_temp_ = block_ + temp_at;
  offsets_ = reinterpret_cast<uint32_t*>(block_ + offsets_at);
  nan_counter_ = reinterpret_cast<unsigned long long*>(block_ + counters_at);
  error_flag_ = reinterpret_cast<uint32_t*>(block_ + counters_at + 8);

  const cublasStatus_t created = api.create(&handle_);
  if (created != CUBLAS_STATUS_SUCCESS) {
    cudaFree(block_);
    block_ = nullptr;
    handle_ = nullptr;
    check_cublas(created, "cublasCreate(&handle_)", __FILE__, __LINE__);
  }
  try {
    // cublasSetStream resets the workspace to cuBLAS's own pool: bind the stream first, then
    // hand it the fixed workspace.
    BUFFERLAB_CUBLAS_CHECK(api.set_stream(handle_, nullptr));
    BUFFERLAB_CUBLAS_CHECK(api.set_workspace(handle_, block_ + cublas_at, kCublasWorkspaceBytes));
    BUFFERLAB_CUBLAS_CHECK(api.set_pointer_mode(handle_, CUBLAS_POINTER_MODE_HOST));
    BUFFERLAB_CUBLAS_CHECK(api.set_atomics_mode(handle_, CUBLAS_ATOMICS_NOT_ALLOWED));
  } catch (...) {
    api.destroy(handle_);
    cudaFree(block_);
    throw;
  }
}

LibraryContext::~LibraryContext() {
  // Statuses cannot be reported from a destructor; a failure means the context is gone.
  if (handle_ != nullptr) cublas_api().destroy(handle_);
  if (block_ != nullptr) cudaFree(block_);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
