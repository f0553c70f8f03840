// What the simulator's checkers find: one record per finding, naming the checker, the
// kernel, block and thread, the address as buffer + byte offset, the op's parameter string
// and the seed, so a finding is a reproducible report. Findings of one op are collected and
// thrown together (KernelFindings) when the op returns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"

namespace bufferlab::sim {

// One name per checker; the names are what tests and the mutation score match on.
enum class Check {
  footprint_read,      // a global load outside the op's declared reads
  footprint_write,     // a global store outside the op's declared writes / phantom writes
  out_of_bounds,       // an access outside every live device allocation
  uninitialized_read,  // a read of arena bytes no earlier step wrote
  block_write_race,    // two blocks of one launch wrote one byte, not atomically
  thread_write_race,   // two threads of one block wrote one global byte between two barriers
  shared_race,         // shared memory touched by two threads with no barrier between
  shared_uninit,       // a read of shared memory not written in this block
  barrier_divergence,  // a barrier reached at different sites, or never by some threads
  collective_mask,     // a warp collective called by, or reading, a lane outside its mask
  collective_missing,  // a lane of a collective's mask never arrived (exited or elsewhere)
  nondeterminism,      // a launch re-run with a second seed wrote different bits
  launch_config,       // a launch the driver refuses (threads, shared memory, grid)
  library_call,        // a cuBLAS / CUB / runtime argument the real API rejects
};
const char* to_string(Check c);

struct Finding {
  Check check = Check::footprint_read;
  std::string kernel;   // kernel name, or the library call
  std::string where;    // "block (3,0,0) thread (17,0,0)" or the call
  std::string address;  // "moe_logits+4096 (load of 4 B)" or ""
  std::string detail;   // the checker's explanation
  std::string op;       // the op's parameter string, or "" outside an op
  uint64_t seed = 0;
  std::string to_string() const;
};

// Thrown by the simulated backend when an op's launches produced findings.
class KernelFindings : public KernelCheckFailure {
 public:
  explicit KernelFindings(std::vector<Finding> findings);
  const std::vector<Finding>& findings() const { return findings_; }

 private:
  std::vector<Finding> findings_;
};

// Records a finding for the running op (deduplicated: one per checker, kernel and detail
// site; at most kMaxPerCheck of each checker are kept, the rest counted).
void record(Finding f);
// The findings recorded since the last take, and how many were dropped as duplicates.
std::vector<Finding> take_findings();
inline constexpr int kMaxPerCheck = 8;

}  // namespace bufferlab::sim
