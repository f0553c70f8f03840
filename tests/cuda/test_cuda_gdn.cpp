// Device-only test of CudaBackend's Gated DeltaNet ops (docs/architecture.md: backends allocate
// nothing inside execute()), measured with cudaMemGetInfo. The numerical tests of the same ops are
// the kernel bodies of tests/kernels/gdn_kernel_tests.cpp, run on every backend. Without a usable
// GPU the test is SKIPPED with the reason.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend_under_test.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/oracle/pool_placement.h"
#include "device_memory.h"
#include "gdn_mamba2_geometry.h"
#include "workspace_rig.h"

namespace bufferlab {
namespace {

using testing::gdn_geometry;

constexpr uint64_t kH = kGdnChunkedHeadDim;

using CudaGdn = testing::KernelTest;

// After a warm-up pass over every GDN op (module loading, the shared-memory attribute), a second
// pass leaves device free memory exactly where it was.
TEST_F(CudaGdn, ExecuteAllocatesNothing) {
  const GdnGeometry g = gdn_geometry(2, kH, 4, kH);
  const uint64_t streams = 2, L = 65, rows = streams * L, nt = streams * 2;
  GdnConvOp conv = GdnConvOp::make(g, rows, streams);
  GdnGatesOp gates = GdnGatesOp::make(g, rows);
  GdnChunkOp wu = GdnChunkOp::make(GdnChunkOp::Stage::wu, g, 0, streams, L, nt);
  GdnChunkOp state = GdnChunkOp::make(GdnChunkOp::Stage::state, g, 0, streams, L, nt);
  GdnChunkOp output = GdnChunkOp::make(GdnChunkOp::Stage::output, g, 0, streams, L, nt);
  GdnRecurrentOp rec = GdnRecurrentOp::make(g, 0, rows, streams);
  GdnGatedNormOp norm = GdnGatedNormOp::make(g, rows, 1e-6);
  // Every pool operand its own range (weights hold whatever the pool holds: the ops only need
  // to run).
  const uint64_t pool =
      oracle::place_in_pool({&conv.weight, &conv.state, &gates.a_log, &gates.dt_bias, &wu.state,
                             &rec.state, &norm.weight});
  state.state = output.state = wu.state;
  testing::Rig rig(backend(),
                   {wu.accesses(), state.accesses(), output.accesses(), conv.accesses(),
                    gates.accesses(), rec.accesses(), norm.accesses()},
                   pool);
  const auto run_all = [&] {
    backend().execute(rig.ws, conv);
    backend().execute(rig.ws, gates);
    backend().execute(rig.ws, wu);
    backend().execute(rig.ws, state);
    backend().execute(rig.ws, output);
    backend().execute(rig.ws, rec);
    backend().execute(rig.ws, norm);
    backend().synchronize();
  };
  testing::expect_no_device_allocation(run_all);
}

}  // namespace
}  // namespace bufferlab
