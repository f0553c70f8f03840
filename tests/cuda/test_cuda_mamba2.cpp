// Device-only test of CudaBackend's Mamba-2 ops (docs/architecture.md: backends allocate nothing
// inside execute()), measured with cudaMemGetInfo, and their repeatability (fixed-order
// reductions). The numerical tests of the same ops are the kernel bodies of
// tests/kernels/mamba2_kernel_tests.cpp, run on every backend. Without a usable GPU the test is
// SKIPPED with the reason.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend_under_test.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/oracle/pool_placement.h"
#include "gdn_mamba2_geometry.h"
#include "seeded_values.h"
#include "workspace_rig.h"

namespace bufferlab {
namespace {

using testing::mamba2_geometry;

using Bits = std::vector<uint16_t>;
using Floats = std::vector<float>;
using Stage = Mamba2ChunkOp::Stage;

// Values in [lo, hi) (seeded_values' grid).
Floats uniform(uint64_t n, uint64_t seed, float lo, float hi) {
  return testing::seeded_values(n, seed, (hi - lo) / 2, (hi + lo) / 2);
}
Bits bf16_uniform(uint64_t n, uint64_t seed, float lo, float hi) {
  return testing::seeded_bf16_values(n, seed, (hi - lo) / 2, (hi + lo) / 2);
}

using CudaSsd = testing::KernelTest;

// After a warm-up pass over every Mamba-2 op (module loading), a second pass over the same
// inputs leaves device free memory where it was and every output bit-identical (the state
// operands are re-uploaded: the ops update them in place).
TEST_F(CudaSsd, SecondPassAllocatesNothingAndRepeatsBitForBit) {
  const uint64_t rows = 127,
                 nc = (rows + Mamba2ChunkCarve::kChunk - 1) / Mamba2ChunkCarve::kChunk + 1;
  const Mamba2Geometry g = mamba2_geometry(2, 24, 200, 2);
  Mamba2ConvOp conv = Mamba2ConvOp::make(g, rows);
  Mamba2ChunkOp cumsum = Mamba2ChunkOp::make(Stage::cumsum, g, 0, rows, nc);
  uint64_t pool = oracle::place_in_pool({&cumsum.a_log, &cumsum.dt_bias, &cumsum.D, &cumsum.state});
  Mamba2ChunkOp bmm = cumsum, scan = cumsum;
  bmm.stage = Stage::bmm;
  scan.stage = Stage::scan;
  Mamba2RecurrentOp rec = Mamba2RecurrentOp::make(g, 0, rows, 1);
  Mamba2GatedNormOp norm = Mamba2GatedNormOp::make(g, rows, 1e-6);
  pool = oracle::place_in_pool({&conv.weight, &conv.bias, &conv.state, &norm.weight}, pool);
  pool = oracle::place_in_pool({&rec.state, &rec.a_log, &rec.dt_bias, &rec.D}, pool);
  testing::Rig rig(backend(),
                   {cumsum.accesses(), bmm.accesses(), scan.accesses(), conv.accesses(),
                    rec.accesses(), norm.accesses()},
                   pool);
  const auto& d = scan.shape();
  const Bits zx = bf16_uniform(rows * d.in_proj, 5, -3.0f, 1.0f);
  const Bits conv_state = bf16_uniform(conv.state.elements(), 6, -1.0f, 1.0f);
  const Floats state = uniform(scan.state.elements(), 7, -1.0f, 1.0f);
  rig.put(conv.input, zx);
  rig.put(conv.weight, bf16_uniform(conv.weight.elements(), 8, -1.0f, 1.0f));
  rig.put(conv.bias, bf16_uniform(conv.bias.elements(), 9, -0.5f, 0.5f));
  rig.put(norm.weight, bf16_uniform(norm.weight.elements(), 10, 0.5f, 1.5f));
  for (const TensorRef* t : {&scan.a_log, &rec.a_log}) rig.put(*t, uniform(g.H, 11, 0.0f, 1.5f));
  for (const TensorRef* t : {&scan.dt_bias, &rec.dt_bias})
    rig.put(*t, uniform(g.H, 12, -1.0f, 1.0f));
  for (const TensorRef* t : {&scan.D, &rec.D}) rig.put(*t, uniform(g.H, 13, -1.0f, 1.0f));

  struct Outputs {
    Bits xbc, y_chunked, y_recurrent, normed;
    Floats dt, da, cb, state_chunked, state_recurrent;
    Bits conv_state;
  };
  const auto pass = [&] {
    rig.put(conv.state, conv_state);
    rig.put(scan.state, state);
    rig.put(rec.state, state);
    backend().execute(rig.ws, conv);
    for (const Mamba2ChunkOp* op : {&cumsum, &bmm, &scan}) backend().execute(rig.ws, *op);
    Outputs o;
    o.y_chunked = rig.get<uint16_t>(scan.output_rows());
    backend().execute(rig.ws, norm);  // reads the chunked y in attn_output
    o.normed = rig.get<uint16_t>(norm.output);
    backend().execute(rig.ws, rec);  // overwrites attn_output with the recurrent y
    backend().synchronize();
    o.y_recurrent = rig.get<uint16_t>(rec.output);
    o.xbc = rig.get<uint16_t>(conv.output);
    o.conv_state = rig.get<uint16_t>(conv.state);
    o.dt = rig.get<float>(scan.dt_span());
    o.da = rig.get<float>(scan.da_span());
    o.cb = rig.get<float>(scan.cb());
    o.state_chunked = rig.get<float>(scan.state);
    o.state_recurrent = rig.get<float>(rec.state);
    return o;
  };
  const Outputs first = pass();
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  const Outputs second = pass();
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before, free_after);
  // Bitwise (NaN-safe) comparison of every output.
  const auto same = [](const auto& a, const auto& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
  };
  EXPECT_TRUE(same(first.xbc, second.xbc));
  EXPECT_TRUE(same(first.conv_state, second.conv_state));
  EXPECT_TRUE(same(first.dt, second.dt));
  EXPECT_TRUE(same(first.da, second.da));
  EXPECT_TRUE(same(first.cb, second.cb));
  EXPECT_TRUE(same(first.y_chunked, second.y_chunked));
  EXPECT_TRUE(same(first.state_chunked, second.state_chunked));
  EXPECT_TRUE(same(first.normed, second.normed));
  EXPECT_TRUE(same(first.y_recurrent, second.y_recurrent));
  EXPECT_TRUE(same(first.state_recurrent, second.state_recurrent));
}

}  // namespace
}  // namespace bufferlab
