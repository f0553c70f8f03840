// Host side of the CUDA Mamba-2 ops (docs/spec/numerics.md §6, ops/mamba2.h): bind, refuse what
// the kernels cannot address, launch on the default stream.
//   conv1d        one kernel, then the tail update (mamba2_conv.cu)
//   mamba2_chunk     cumsum / bmm / scan, one kernel each (mamba2_chunk.cu); the scan takes the
//                 kernel mutant M-SSDSTATE
//   recurrence    one kernel (mamba2_recurrent.cu)
//   gated norm    one kernel (mamba2_conv.cu)
// Nothing is allocated: every kernel works in its bound operands and static shared memory
// (the LibraryContext is not needed: CB is a tiled kernel, not a cuBLAS GEMM).
#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "cuda_check.h"
#include "mamba2_kernels.h"
#include "mamba2_ops.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

// The column layout every SSD kernel addresses (ops/mamba2.h): x of head h at [h·P, (h+1)·P)
// inside d_inner, B and C after it inside d_xbc, dt_raw after z | xBC inside in_proj. The
// message (op.params()) is built only when a check fails.
template <class Op>
void require_columns(const Op& op, uint64_t H, uint64_t P, uint64_t N, uint64_t G, uint64_t d_inner,
                     uint64_t d_xbc, uint64_t in_proj) {
  if (G == 0 || H % G != 0) throw Error(op.params() + ": heads are not a multiple of the groups");
  if ((Size(H) * P).value() > d_inner || (Size(d_inner) + Size(G) * N * 2).value() > d_xbc ||
      (Size(d_inner) + d_xbc + H).value() > in_proj)
    throw Error(op.params() + ": the x | B | C | dt columns do not fit their rows");
  if (P > kMaxMamba2Dim || N > kMaxMamba2Dim)
    throw Error(op.params() + ": P and N must be at most " + std::to_string(kMaxMamba2Dim));
}

}  // namespace

void mamba2_conv(const Workspace& ws, const Mamba2ConvOp& op) {
  const auto& d = op.shape();
  const Mamba2ConvOp::Bound b = op.bind(ws);
  if ((Size(d.in_col) + d.channels).value() > d.in_stride)
    throw Error(op.params() + ": the xBC columns do not fit the input rows");
  Mamba2ConvLaunch a;
  a.input = b.input;
  a.weight = b.weight;
  a.bias = b.bias;
  a.state = b.state;
  a.output = b.output;
  a.rows = d.rows;
  a.channels = d.channels;
  a.in_col = d.in_col;
  a.in_stride = d.in_stride;
  a.kernel = d.kernel;
  a.sequences = d.sequences;
  a.L = d.L;
  launch_mamba2_conv(a, nullptr);
}

void mamba2_chunk(LibraryContext& /*ctx*/, const Workspace& ws, const Mamba2ChunkOp& op,
                  Mutant mutant) {
  const auto& d = op.shape();
  const Mamba2ChunkOp::Bound b = op.bind(ws);
  require_columns(op, d.H, d.P, d.N, d.G, d.d_inner, d.d_xbc, d.in_proj);
  if (d.rows == 0) return;
  const uint64_t b_col = d.d_inner, c_col = d.d_inner + d.G * d.N;
  switch (op.stage) {
    case Mamba2ChunkOp::Stage::cumsum: {
      Mamba2CumsumLaunch a;
      a.zxbcdt = b.zxbcdt;
      a.a_log = b.a_log;
      a.dt_bias = b.dt_bias;
      a.dt = b.dt;
      a.da = b.da;
      a.rows = d.rows;
      a.chunks = d.chunks;
      a.nc = b.nc;
      a.H = d.H;
      a.in_proj = d.in_proj;
      a.dt_col = d.d_inner + d.d_xbc;
      launch_mamba2_cumsum(a, nullptr);
      return;
    }
    case Mamba2ChunkOp::Stage::bmm: {
      Mamba2BmmLaunch a;
      a.xbc = b.xbc;
      a.cb = b.cb;
      a.rows = d.rows;
      a.chunks = d.chunks;
      a.G = d.G;
      a.N = d.N;
      a.d_xbc = d.d_xbc;
      a.b_col = b_col;
      a.c_col = c_col;
      launch_mamba2_bmm(a, nullptr);
      return;
    }
    case Mamba2ChunkOp::Stage::scan: {
      Mamba2ScanLaunch a;
      a.xbc = b.xbc;
      a.dt = b.dt;
      a.da = b.da;
      a.cb = b.cb;
      a.D = b.D;
      a.state = b.state;
      a.output = b.output;
      a.rows = d.rows;
      a.chunks = d.chunks;
      a.nc = b.nc;
      a.H = d.H;
      a.P = d.P;
      a.N = d.N;
      a.G = d.G;
      a.d_inner = d.d_inner;
      a.d_xbc = d.d_xbc;
      a.b_col = b_col;
      a.c_col = c_col;
      a.reset_state_per_chunk = mutant == Mutant::M_SSDSTATE;
      launch_mamba2_scan(a, nullptr);
      return;
    }
  }
  throw Error(op.params() + ": unknown stage");
}

void mamba2_recurrent(const Workspace& ws, const Mamba2RecurrentOp& op) {
  const auto& d = op.shape();
  const Mamba2RecurrentOp::Bound b = op.bind(ws);
  require_columns(op, d.H, d.P, d.N, d.G, d.d_inner, d.d_xbc, d.in_proj);
  if (d.rows == 0) return;
  Mamba2RecurrentLaunch a;
  a.zxbcdt = b.zxbcdt;
  a.xbc = b.xbc;
  a.a_log = b.a_log;
  a.dt_bias = b.dt_bias;
  a.D = b.D;
  a.state = b.state;
  a.output = b.output;
  a.sequences = d.sequences;
  a.L = d.L;
  a.H = d.H;
  a.P = d.P;
  a.N = d.N;
  a.G = d.G;
  a.d_inner = d.d_inner;
  a.d_xbc = d.d_xbc;
  a.in_proj = d.in_proj;
  a.dt_col = d.d_inner + d.d_xbc;
  a.b_col = d.d_inner;
  a.c_col = d.d_inner + d.G * d.N;
  launch_mamba2_recurrent(a, nullptr);
}

void mamba2_gated_norm(const Workspace& ws, const Mamba2GatedNormOp& op) {
  const auto& d = op.shape();
  const Mamba2GatedNormOp::Bound b = op.bind(ws);
  if (d.d_inner > d.z_row_stride)
    throw Error(op.params() + ": z (d_inner columns) does not fit its rows");
  Mamba2GatedNormLaunch a;
  a.input = b.input;
  a.z = b.z;
  a.weight = b.weight;
  a.output = b.output;
  a.rows = d.rows;
  a.d_inner = d.d_inner;
  a.group_size = d.group_size;
  a.z_stride = d.z_row_stride;
  a.eps = static_cast<float>(op.eps);
  launch_mamba2_gated_norm(a, nullptr);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
