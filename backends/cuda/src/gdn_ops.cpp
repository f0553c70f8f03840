// Host side of the CUDA Gated DeltaNet ops (docs/spec/numerics.md §5, ops/gdn.h): bind (which
// bounds-checks every operand and refuses the chunked path for kd or vd ≠ 128 and the
// recurrence for kd or vd > 256), refuse the head geometry the kernels cannot map (nk = 0,
// nv not a multiple of nk), launch on the default stream. Nothing is allocated and no cuBLAS
// call is made: the chunked stages are three kernels (gdn_chunk.cu) over shared-memory tiles.
#include "gdn_ops.h"

#include <cmath>
#include <string>

#include "bufferlab/core/error.h"
#include "gdn_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

// Value head v reads key head v / (nv/nk). The message is built only on failure.
template <class Op>
void require_gqa(const Op& op, uint64_t nk, uint64_t nv) {
  if (nk == 0 || nv % nk != 0)
    throw Error(op.params() + ": nv = " + std::to_string(nv) +
                " is not a multiple of nk = " + std::to_string(nk));
}

// The FP32 constant kd^-1/2 q is multiplied by (rounded once from the double value).
float q_scale(uint64_t kd) {
  return kd == 0 ? 0.0f : static_cast<float>(1.0 / std::sqrt(static_cast<double>(kd)));
}

}  // namespace

void gdn_conv(const Workspace& ws, const GdnConvOp& op) {
  const auto& d = op.shape();
  const GdnConvOp::Bound b = op.bind(ws);
  GdnConvLaunch a;
  a.input = b.input;
  a.weight = b.weight;
  a.state = b.state;
  a.output = b.output;
  a.rows = d.rows;
  a.channels = d.channels;
  a.row_stride = d.row_stride;
  a.kernel = d.kernel;
  a.sequences = d.sequences;
  a.L = d.L;
  launch_gdn_conv(a, nullptr);
}

void gdn_gates(const Workspace& ws, const GdnGatesOp& op) {
  const auto& d = op.shape();
  const GdnGatesOp::Bound b = op.bind(ws);
  GdnGatesLaunch a;
  a.ba = b.ba;
  a.a_log = b.a_log;
  a.dt_bias = b.dt_bias;
  a.gates = b.gates;
  a.rows = d.rows;
  a.nv = d.nv;
  launch_gdn_gates(a, nullptr);
}

void gdn_chunk(LibraryContext&, const Workspace& ws, const GdnChunkOp& op, Mutant mutant) {
  const auto& d = op.shape();
  const GdnChunkOp::Bound b = op.bind(ws);
  require_gqa(op, d.nk, d.nv);
  GdnChunkLaunch a;
  a.conv = b.conv;
  a.gates = b.gates;
  a.W = b.W;
  a.U = b.U;
  a.S = b.S;
  a.uc = b.uc;
  a.gc = b.gc;
  a.state = b.state;
  a.output = b.output;
  a.streams = d.streams;
  a.L = d.L;
  a.chunks_per_stream = d.chunks_per_stream;
  a.nk = d.nk;
  a.nv = d.nv;
  a.conv_dim = d.conv_dim;
  a.q_scale = q_scale(d.kd);
  a.carry_bf16 = mutant == Mutant::M_GDNCARRY;
  switch (op.stage) {
    case GdnChunkOp::Stage::wu:
      launch_gdn_chunk_wu(a, nullptr);
      return;
    case GdnChunkOp::Stage::state:
      launch_gdn_chunk_state(a, nullptr);
      return;
    case GdnChunkOp::Stage::output:
      launch_gdn_chunk_output(a, nullptr);
      return;
  }
}

void gdn_recurrent(const Workspace& ws, const GdnRecurrentOp& op) {
  const auto& d = op.shape();
  const GdnRecurrentOp::Bound b = op.bind(ws);
  require_gqa(op, d.nk, d.nv);
  GdnRecurrentLaunch a;
  a.conv = b.conv;
  a.gates = b.gates;
  a.state = b.state;
  a.output = b.output;
  a.sequences = d.sequences;
  a.L = d.L;
  a.nk = d.nk;
  a.kd = d.kd;
  a.nv = d.nv;
  a.vd = d.vd;
  a.conv_dim = d.conv_dim;
  a.q_scale = q_scale(d.kd);
  launch_gdn_recurrent(a, nullptr);
}

void gdn_gated_norm(const Workspace& ws, const GdnGatedNormOp& op) {
  const auto& d = op.shape();
  const GdnGatedNormOp::Bound b = op.bind(ws);
  GdnGatedNormLaunch a;
  a.io = b.io;
  a.z = b.z;
  a.weight = b.weight;
  a.rows = d.rows;
  a.heads = d.heads;
  a.head_dim = d.head_dim;
  a.z_col = d.z_col;
  a.z_row_stride = d.z_row_stride;
  a.eps = static_cast<float>(op.eps);
  launch_gdn_gated_norm(a, nullptr);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
