// The hooks the host compiler's ThreadSanitizer instrumentation calls before every load and
// store of the kernel sources (compiled for the simulator with -fsanitize=thread, without the
// TSan runtime: these definitions stand in for it). Each access of a simulated thread is
// classified by address — device memory, the block's shared arena, or the thread's own stack
// (ignored) — and handed to its checker. Host code of the same files runs with no kernel
// thread and returns at the first test.
#include <cstddef>

#include "device_memory.h"
#include "executor_state.h"
#include "sim_state.h"

namespace bufferlab::sim {
namespace {

inline void on_access(const void* p, size_t bytes, bool write) {
  if (!in_kernel_thread()) return;
  if (DeviceMemory::get().in_region(p))
    check_global(p, bytes, write, false);
  else if (in_shared_arena(p))
    check_shared(p, bytes, write);
}

}  // namespace
}  // namespace bufferlab::sim

using bufferlab::sim::on_access;

// The entry points GCC's -fsanitize=thread emits (sanitizer/tsan_interface.h's names).
extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_read1(void* p) { on_access(p, 1, false); }
void __tsan_read2(void* p) { on_access(p, 2, false); }
void __tsan_read4(void* p) { on_access(p, 4, false); }
void __tsan_read8(void* p) { on_access(p, 8, false); }
void __tsan_read16(void* p) { on_access(p, 16, false); }
void __tsan_write1(void* p) { on_access(p, 1, true); }
void __tsan_write2(void* p) { on_access(p, 2, true); }
void __tsan_write4(void* p) { on_access(p, 4, true); }
void __tsan_write8(void* p) { on_access(p, 8, true); }
void __tsan_write16(void* p) { on_access(p, 16, true); }
void __tsan_unaligned_read2(const void* p) { on_access(p, 2, false); }
void __tsan_unaligned_read4(const void* p) { on_access(p, 4, false); }
void __tsan_unaligned_read8(const void* p) { on_access(p, 8, false); }
void __tsan_unaligned_read16(const void* p) { on_access(p, 16, false); }
void __tsan_unaligned_write2(void* p) { on_access(p, 2, true); }
void __tsan_unaligned_write4(void* p) { on_access(p, 4, true); }
void __tsan_unaligned_write8(void* p) { on_access(p, 8, true); }
void __tsan_unaligned_write16(void* p) { on_access(p, 16, true); }
void __tsan_read_range(void* p, unsigned long n) { on_access(p, n, false); }
void __tsan_write_range(void* p, unsigned long n) { on_access(p, n, true); }
void __tsan_volatile_read4(void* p) { on_access(p, 4, false); }
void __tsan_volatile_write4(void* p) { on_access(p, 4, true); }
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
}
