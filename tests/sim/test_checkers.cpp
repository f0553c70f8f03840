// The checkers' self-tests (issue 14): for each checker of the simulator a tiny kernel with
// exactly that checker's bug (tests/sim/checker_kernels.cpp) must produce that checker's
// finding, naming the kernel and where it happened, and nothing else; its correct twin must
// produce none. A checker that stays silent on its own bug would let every kernel test pass
// for the wrong reason. Run with the simulator's default options (the nondeterminism re-run
// on), as the kernel tests are.
#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"
#include "bufferlab/cuda_sim/cuda_sim_backend.h"
#include "checker_kernels.h"
#include "findings.h"
#include "sim_state.h"

namespace bufferlab::sim_selftest {
namespace {

using sim::Check;
using sim::Finding;

constexpr int kSuccess = 0;               // cudaSuccess
constexpr int kInvalidValue = 1;          // cudaErrorInvalidValue
constexpr int kInvalidConfiguration = 9;  // cudaErrorInvalidConfiguration

std::string describe(const std::vector<Finding>& findings) {
  std::string text;
  for (const Finding& f : findings) text += "\n  " + f.to_string();
  return text;
}

// Clears what earlier tests left, so a test sees its own launches' findings only.
class SimChecker : public ::testing::Test {
 protected:
  void SetUp() override {
    set_sim_options(SimOptions{});
    sim::take_findings();
  }
};

// Every finding is of `check` and names `kernel`; there is at least one; `where` (when not
// empty) appears in the first finding's location. Returns the findings for further checks.
std::vector<Finding> expect_only(Check check, const std::string& kernel,
                                 const std::string& where = "") {
  const std::vector<Finding> findings = sim::take_findings();
  // In the test report (--gtest_output), so what each checker said can be read without a
  // failure.
  ::testing::Test::RecordProperty("findings", describe(findings));
  EXPECT_FALSE(findings.empty()) << "no " << sim::to_string(check) << " finding for " << kernel;
  for (const Finding& f : findings) {
    EXPECT_EQ(f.check, check) << "unexpected finding:" << describe(findings);
    EXPECT_EQ(f.kernel, kernel) << describe(findings);
  }
  if (!findings.empty() && !where.empty()) {
    EXPECT_NE(findings.front().where.find(where), std::string::npos) << describe(findings);
  }
  return findings;
}

void expect_none() {
  const std::vector<Finding> findings = sim::take_findings();
  EXPECT_TRUE(findings.empty()) << describe(findings);
}

// ---- out_of_bounds ----

TEST_F(SimChecker, OutOfBoundsStorePastEnd) {
  EXPECT_EQ(store_past_end(), kSuccess);
  const auto findings =
      expect_only(Check::out_of_bounds, "store_one_kernel", "block (0,0,0) thread (0,0,0)");
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].address.find("store of 4 B"), std::string::npos) << describe(findings);
}
TEST_F(SimChecker, OutOfBoundsTwinStoresLastElement) {
  EXPECT_EQ(store_last_element(), kSuccess);
  expect_none();
}

// ---- uninitialized_read ----

TEST_F(SimChecker, UninitializedReadOfFreshAllocation) {
  EXPECT_EQ(load_unwritten(), kSuccess);
  const auto findings =
      expect_only(Check::uninitialized_read, "copy_one_kernel", "block (0,0,0) thread (0,0,0)");
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].address.find("load of 4 B"), std::string::npos) << describe(findings);
}
TEST_F(SimChecker, UninitializedReadTwinAfterMemset) {
  EXPECT_EQ(load_memset(), kSuccess);
  expect_none();
}

// ---- block_write_race ----

TEST_F(SimChecker, BlockWriteRaceTwoBlocksOneElement) {
  EXPECT_EQ(two_blocks_store_one_element(), kSuccess);
  // Each finding is in one block and names the other (which stored first depends on the
  // schedule; the re-run may see the other order, a second finding).
  const auto findings =
      expect_only(Check::block_write_race, "block_store_kernel", "thread (0,0,0)");
  for (const Finding& f : findings) {
    const bool in_block_1 = f.where.find("block (1,0,0)") != std::string::npos;
    EXPECT_NE(f.detail.find(in_block_1 ? "linear block index 0" : "linear block index 1"),
              std::string::npos)
        << describe(findings);
  }
}
TEST_F(SimChecker, BlockWriteRaceTwinOwnElements) {
  EXPECT_EQ(two_blocks_store_own_elements(), kSuccess);
  expect_none();
}
TEST_F(SimChecker, BlockWriteRaceTwinAtomicAdd) {
  EXPECT_EQ(two_blocks_atomic_add_one_element(), kSuccess);
  expect_none();
}

// ---- thread_write_race ----

TEST_F(SimChecker, ThreadWriteRaceTwoThreadsOneElement) {
  EXPECT_EQ(two_threads_store_one_element(), kSuccess);
  const auto findings = expect_only(Check::thread_write_race, "pair_store_kernel", "block (0,0,0)");
  for (const Finding& f : findings)
    EXPECT_NE(f.detail.find("another thread of the block"), std::string::npos) << f.to_string();
}
TEST_F(SimChecker, ThreadWriteRaceTwinOwnElements) {
  EXPECT_EQ(two_threads_store_own_elements(), kSuccess);
  expect_none();
}
TEST_F(SimChecker, ThreadWriteRaceTwinAcrossABarrier) {
  EXPECT_EQ(two_threads_store_across_a_barrier(), kSuccess);
  expect_none();
}

// ---- shared_race ----

TEST_F(SimChecker, SharedRaceNoBarrier) {
  EXPECT_EQ(shared_store_load_no_barrier(), kSuccess);
  expect_only(Check::shared_race, "shared_handoff_kernel", "block (0,0,0) thread (");
}
TEST_F(SimChecker, SharedRaceTwinWithBarrier) {
  EXPECT_EQ(shared_store_load_barrier(), kSuccess);
  expect_none();
}

TEST_F(SimChecker, SharedRaceTwinOrderedBySyncwarp) {
  EXPECT_EQ(shared_warp_handoff(0), kSuccess);
  expect_none();
}
TEST_F(SimChecker, SharedRaceSyncwarpWithoutTheReader) {
  EXPECT_EQ(shared_warp_handoff(1), kSuccess);
  expect_only(Check::shared_race, "shared_warp_handoff_kernel", "block (0,0,0) thread (");
}
TEST_F(SimChecker, SharedRaceSyncwarpOfAnotherWarp) {
  EXPECT_EQ(shared_warp_handoff(2), kSuccess);
  expect_only(Check::shared_race, "shared_warp_handoff_kernel", "block (0,0,0) thread (");
}

// ---- shared_uninit ----

TEST_F(SimChecker, SharedUninitLoad) {
  EXPECT_EQ(shared_load_unwritten(), kSuccess);
  expect_only(Check::shared_uninit, "shared_read_kernel", "block (0,0,0) thread (0,0,0)");
}
TEST_F(SimChecker, SharedUninitTwinStoredFirst) {
  EXPECT_EQ(shared_load_written(), kSuccess);
  expect_none();
}

// ---- barrier_divergence ----

TEST_F(SimChecker, BarrierDivergenceTwoSites) {
  EXPECT_EQ(barrier_two_sites(), kSuccess);
  const auto findings = expect_only(Check::barrier_divergence, "barrier_sites_kernel", "block");
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].detail.find("checker_kernels.cpp:"), std::string::npos)
      << describe(findings);
}
TEST_F(SimChecker, BarrierDivergenceTwinOneSite) {
  EXPECT_EQ(barrier_one_site(), kSuccess);
  expect_none();
}

// ---- collective_mask ----

TEST_F(SimChecker, CollectiveMaskExcludesCaller) {
  EXPECT_EQ(shuffle_mask_excludes_caller(), kSuccess);
  // Lane 0's own call, and lane 1's read of lane 0 (outside the mask): the order of the two
  // depends on the schedule.
  const auto findings = expect_only(Check::collective_mask, "shuffle_kernel");
  bool caller = false;
  for (const Finding& f : findings)
    caller |= f.where.find("thread (0,0,0)") != std::string::npos &&
              f.detail.find("lane 0 calls a warp collective") != std::string::npos;
  EXPECT_TRUE(caller) << describe(findings);
}
TEST_F(SimChecker, CollectiveMaskReadsOutsideMask) {
  EXPECT_EQ(shuffle_reads_outside_mask(), kSuccess);
  const auto findings = expect_only(Check::collective_mask, "shuffle_kernel", "block (0,0,0)");
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].detail.find("outside the mask"), std::string::npos) << describe(findings);
}
TEST_F(SimChecker, CollectiveMaskTwinFullWarp) {
  EXPECT_EQ(shuffle_full_warp(), kSuccess);
  expect_none();
}

// ---- collective_missing ----

TEST_F(SimChecker, CollectiveMissingHalfWarp) {
  EXPECT_EQ(shuffle_half_warp_full_mask(), kSuccess);
  const auto findings = expect_only(Check::collective_missing, "shuffle_kernel", "block (0,0,0)");
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].detail.find("lane 16 exited"), std::string::npos) << describe(findings);
}
TEST_F(SimChecker, CollectiveMissingTwinWholeWarp) {
  EXPECT_EQ(shuffle_whole_warp_full_mask(), kSuccess);
  expect_none();
}

// ---- nondeterminism ----

TEST_F(SimChecker, NondeterminismFloatAtomicSum) {
  EXPECT_EQ(float_atomic_sum(), kSuccess);
  expect_only(Check::nondeterminism, "float_sum_kernel");
}
TEST_F(SimChecker, NondeterminismTwinIntegerAtomicSum) {
  EXPECT_EQ(int_atomic_sum(), kSuccess);
  expect_none();
}
// Without the re-run the checker cannot see it (the documented cost of turning it off).
TEST_F(SimChecker, NondeterminismNeedsTheRerun) {
  SimOptions options;
  options.rerun = false;
  set_sim_options(options);
  EXPECT_EQ(float_atomic_sum(), kSuccess);
  expect_none();
  set_sim_options(SimOptions{});
}

// ---- launch_config ----

TEST_F(SimChecker, LaunchConfig1025Threads) {
  std::vector<float> out;
  EXPECT_EQ(launch_threads(1025, &out), kInvalidConfiguration);
  const auto findings = expect_only(Check::launch_config, "thread_store_kernel");
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].detail.find("1025 threads"), std::string::npos) << describe(findings);
  EXPECT_TRUE(out.empty());
}
TEST_F(SimChecker, LaunchConfigTwin1024Threads) {
  std::vector<float> out;
  EXPECT_EQ(launch_threads(1024, &out), kSuccess);
  expect_none();
  ASSERT_EQ(out.size(), 1024u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(i));
}
TEST_F(SimChecker, LaunchConfigZeroBlocks) {
  EXPECT_EQ(launch_zero_blocks(), kInvalidConfiguration);
  const auto findings = expect_only(Check::launch_config, "thread_store_kernel");
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].detail.find("grid dimension is 0"), std::string::npos)
      << describe(findings);
}
TEST_F(SimChecker, LaunchConfigDynamicShared64KiBWithoutAttribute) {
  std::vector<float> out;
  EXPECT_EQ(launch_dynamic_shared_64k(false, &out), kInvalidValue);
  const auto findings = expect_only(Check::launch_config, "dynamic_shared_kernel");
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].detail.find("65536 B of dynamic shared memory"), std::string::npos)
      << describe(findings);
  EXPECT_TRUE(out.empty());
}
TEST_F(SimChecker, LaunchConfigTwinDynamicShared64KiBWithAttribute) {
  std::vector<float> out;
  EXPECT_EQ(launch_dynamic_shared_64k(true, &out), kSuccess);
  expect_none();
  ASSERT_EQ(out.size(), 32u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(16383 - i));
}

// ---- footprint_read / footprint_write ----

// A workspace of three 256-B buffers on the simulated backend, all three written before the
// footprint is set (so only the footprint checker has something to say), and a footprint
// declaring hidden_states read and residual written: norm_output is declared nowhere.
class SimCheckerFootprint : public SimChecker {
 protected:
  void SetUp() override {
    SimChecker::SetUp();
    BufferSizes sizes;
    sizes.hidden_states = kBytes;
    sizes.residual = kBytes;
    sizes.norm_output = kBytes;
    ws_ = backend_->allocate(Layout::build(sizes), 0);
    for (BufferId id : {BufferId::hidden_states, BufferId::residual, BufferId::norm_output})
      backend_->fill(ws_, tensor(id), 0);
    sim::take_findings();
    sim::set_footprint(ws_,
                       {Access{tensor(BufferId::hidden_states), AccessKind::read},
                        Access{tensor(BufferId::residual), AccessKind::write}},
                       "selftest");
  }
  void TearDown() override { sim::clear_footprint(); }

  static constexpr uint64_t kBytes = 256;
  static TensorRef tensor(BufferId id) { return arena_tensor(id, 0, {kBytes / 4}, DType::f32); }
  void* at(BufferId id) const { return ws_.resolve(tensor(id)); }

  std::unique_ptr<Backend> backend_ = make_cuda_sim_backend();
  Workspace ws_;
};

TEST_F(SimCheckerFootprint, FootprintReadUndeclared) {
  EXPECT_EQ(copy_floats(at(BufferId::norm_output), at(BufferId::residual), 64), kSuccess);
  const auto findings = expect_only(Check::footprint_read, "copy_floats_kernel", "block (0,0,0)");
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].address.find("norm_output+"), std::string::npos) << describe(findings);
  EXPECT_EQ(findings[0].op, "selftest");
}
TEST_F(SimCheckerFootprint, FootprintWriteToReadOnly) {
  EXPECT_EQ(copy_floats(at(BufferId::residual), at(BufferId::hidden_states), 64), kSuccess);
  const auto findings = expect_only(Check::footprint_write, "copy_floats_kernel", "block (0,0,0)");
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].address.find("hidden_states+"), std::string::npos) << describe(findings);
}
TEST_F(SimCheckerFootprint, FootprintTwinDeclared) {
  EXPECT_EQ(copy_floats(at(BufferId::hidden_states), at(BufferId::residual), 64), kSuccess);
  expect_none();
}

// Guard pages: an overflowing fiber faults on its guard page instead of writing into the next
// stack, and the simulator says which kernel did it before the process dies of the signal.
TEST(SimCheckerDeathTest, AFiberStackOverflowHitsTheGuardPage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(overflow_fiber_stack(), ::testing::KilledBySignal(SIGSEGV),
              "overflowed its 256 KiB fiber stack \\(kernel stack_hog_kernel\\)");
}

}  // namespace
}  // namespace bufferlab::sim_selftest
