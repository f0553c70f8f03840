// CudaBackend's mHC ops allocate nothing inside execute() (docs/architecture.md): after a warm-up
// pass over every mHC op (expand, pre, both forms of post, head, the split and slab low-rank
// stages), device free memory is identical after a second pass. A device-only test (it calls
// cudaMemGetInfo); the ops' numerics are judged per backend in
// tests/kernels/mhc_*_kernel_tests.cpp. Without a usable GPU it is SKIPPED with the reason.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../kernels/mhc_kernel_support.h"
#include "backend_under_test.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/pool_placement.h"
#include "device_memory.h"
#include "workspace_rig.h"

namespace bufferlab {
namespace {

using testing::mhc_config;
using testing::Rig;

// The backend under test of this executable is the CUDA backend (skipped with the reason when
// it cannot run here).
class CudaMhcSetup : public testing::KernelTest {};

// docs/architecture.md: backends allocate nothing inside execute(). After a warm-up pass over every
// mHC op (module loading, cuBLAS's first-call setup of the slab GEMMs), a second pass leaves device
// free memory exactly where it was.
TEST_F(CudaMhcSetup, ExecuteAllocatesNothing) {
  const uint64_t hc = 4, h = 64, r = 8, split_rows = 16, slab_rows = 80;
  const ModelConfig sc = mhc_config(hc, h);
  const ModelConfig lc = mhc_config(hc, h, r);
  MhcExpandOp expand = MhcExpandOp::make(sc, slab_rows);
  MhcPreOp pre = MhcPreOp::make(sc, slab_rows);
  MhcPostOp post = MhcPostOp::make(sc, slab_rows);
  MhcPostOp post_lr = MhcPostOp::make(lc, slab_rows);
  MhcHeadOp head = MhcHeadOp::make(sc, slab_rows);
  std::vector<MhcLowRankSplitOp> split;
  for (auto s : {MhcLowRankSplitOp::Stage::norm, MhcLowRankSplitOp::Stage::down,
                 MhcLowRankSplitOp::Stage::collapse})
    split.push_back(MhcLowRankSplitOp::make(s, lc, split_rows));
  std::vector<MhcLowRankSlabOp> slab;
  for (auto s : {MhcLowRankSlabOp::Stage::norm, MhcLowRankSlabOp::Stage::down,
                 MhcLowRankSlabOp::Stage::inject, MhcLowRankSlabOp::Stage::up,
                 MhcLowRankSlabOp::Stage::collapse})
    slab.push_back(MhcLowRankSlabOp::make(s, lc, slab_rows, 0, slab_rows));
  // Every pool operand its own range (weights hold poison: the ops only need to run).
  uint64_t pool =
      oracle::place_in_pool({&pre.fn, &pre.scale, &pre.bias, &head.fn, &head.scale, &head.bias,
                             &split[0].norm_w, &split[1].w_down_inject, &split[2].w_up});
  pool = oracle::place_in_pool({&slab[0].norm_w, &slab[1].w_down, &slab[2].w_inject, &slab[3].w_up},
                               pool);
  std::vector<std::vector<Access>> all = {expand.accesses(), pre.accesses(), post.accesses(),
                                          post_lr.accesses(), head.accesses()};
  for (const auto& op : split) all.push_back(op.accesses());
  for (const auto& op : slab) all.push_back(op.accesses());
  Rig rig(backend(), all, pool);
  const auto run_all = [&] {
    backend().execute(rig.ws, expand);
    backend().execute(rig.ws, pre);
    backend().execute(rig.ws, post);
    backend().execute(rig.ws, post_lr);
    backend().execute(rig.ws, head);
    for (const auto& op : split) backend().execute(rig.ws, op);
    for (const auto& op : slab) backend().execute(rig.ws, op);
    backend().synchronize();
  };
  testing::expect_no_device_allocation(run_all);
}

}  // namespace
}  // namespace bufferlab
