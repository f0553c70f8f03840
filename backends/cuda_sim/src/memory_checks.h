// The checkers' entry for accesses made outside a kernel thread: the library stand-ins
// (cuBLAS, CUB) and the runtime's copies and sets report each operand range here, and it is
// checked as a kernel's access is (bounds of a live allocation, the running op's declared
// footprint, reads of never-written arena bytes) and recorded (written bytes).
#pragma once

#include <cstddef>

namespace bufferlab::sim {

enum class Touch { read, write };

// `who` names the caller in a finding ("cublasGemmEx C", "cub::DeviceRadixSort keys").
// Returns false when [p, p + bytes) is not inside one live device allocation (the finding is
// recorded; the caller must then not touch the memory and returns its API's error).
bool library_access(const char* who, const void* p, size_t bytes, Touch touch);

// True when [p, p + bytes) lies inside one live simulated device allocation.
bool is_device_range(const void* p, size_t bytes);

}  // namespace bufferlab::sim
