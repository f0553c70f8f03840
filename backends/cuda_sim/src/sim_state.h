// State the simulator's parts share: the session options, the counters the CLI prints, the
// running op's footprint (set by the simulated backend around each op), and the running
// launch, block and thread (set by the executor), read by the access checkers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bufferlab/cuda_sim/cuda_sim_backend.h"
#include "bufferlab/cuda_sim/device_api.h"

namespace bufferlab {
class Workspace;
struct Access;
}  // namespace bufferlab

namespace bufferlab::sim {

SimOptions& options();
// The counters, one object read by the hot access paths without a function call.
extern SimCounters g_counters;
inline SimCounters& counters() { return g_counters; }

struct ThreadState;
struct BlockState;
struct LaunchState;
// The running launch, block and simulated thread of this OS thread, set by the executor
// (executor.cpp); constinit, so the access hooks read them without a TLS wrapper call.
extern constinit thread_local ThreadState* t_thread;
extern constinit thread_local BlockState* t_block;
extern constinit thread_local LaunchState* t_launch;

// The running op's declared footprint in device addresses: reads, and writes (write or
// phantom write), each a sorted list of disjoint [begin, end) ranges, and the workspace's
// arena and weight pool they fall in (an access there outside the lists is a finding; an
// access to another live allocation — the library block — is the backend's own).
struct Range {
  uintptr_t begin = 0, end = 0;
};
struct Footprint {
  bool active = false;
  std::string op;  // the op's params() string
  std::vector<Range> reads, writes;
  Range arena, weights;
  const Workspace* ws = nullptr;
};
Footprint& footprint();
void set_footprint(const Workspace& ws, const std::vector<Access>& accesses, std::string op);
void clear_footprint();

// "moe_logits+4096", "weights+128", "allocation #3+64": an address for a finding.
std::string describe_address(const void* p);

// Where a finding happened: the running kernel, block and thread ("" outside a kernel).
std::string current_kernel();
std::string current_where();
inline bool in_kernel_thread() { return t_thread != nullptr; }

// The access checkers (access_checks.cpp), called by the instrumentation hooks for kernel
// code and by library_access for the stand-ins.
void check_global(const void* p, size_t bytes, bool write, bool atomic);
void check_shared(const void* p, size_t bytes, bool write);

// The launch's page saves for the nondeterminism re-run: a store calls this first.
void note_store_pages(const void* p, size_t bytes);

// Identifies the block and launch of a store for the inter-block race checker.
uint64_t current_writer_tag();  // (launch serial << 32) | (block + 1)
uint64_t current_launch_serial();

}  // namespace bufferlab::sim
