// One Mamba-2 call on a backend through the core interface only (mamba2_harness.h).
#include "bufferlab/oracle/mamba2_harness.h"

#include <fmt/format.h>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/oracle/pool_placement.h"
#include "harness_io.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

using detail::read_back;
using detail::upload_exact;

template <class T>
std::vector<T> host_part(const std::vector<T>& v, uint64_t index, uint64_t size) {
  if (v.size() < (index + 1) * size)
    throw Error(fmt::format("run_ssd: a host copy of {} elements has no part {} of {}", v.size(),
                            index, size));
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(index * size),
                        v.begin() + static_cast<std::ptrdiff_t>((index + 1) * size));
}

// A head-strided span (head h's chunks at rows h·nc ..) compacted to [H, chunks, 64].
std::vector<float> compact_heads(const std::vector<float>& span, const Mamba2ChunkOp& op) {
  const uint64_t H = op.dims.H, nc = op.carve.nc, chunks = op.dims.chunks,
                 C = Mamba2ChunkCarve::kChunk;
  std::vector<float> out;
  out.reserve(mul(mul(H, chunks), C));
  for (uint64_t h = 0; h < H; ++h) {
    const auto from = span.begin() + static_cast<std::ptrdiff_t>(h * nc * C);
    out.insert(out.end(), from, from + static_cast<std::ptrdiff_t>(chunks * C));
  }
  return out;
}

void run_sequence(Backend& backend, const Workspace& ws, const Mamba2ChunkOp* ops, Mamba2Run& run) {
  const Mamba2ChunkOp &cumsum = ops[0], &bmm = ops[1], &scan = ops[2];
  Mamba2Run::Sequence s;
  backend.mamba2_chunk(ws, cumsum);
  backend.synchronize();
  s.dt = compact_heads(read_back<float>(backend, ws, cumsum.dt_span()), cumsum);
  s.da = compact_heads(read_back<float>(backend, ws, cumsum.da_span()), cumsum);
  backend.mamba2_chunk(ws, bmm);
  backend.synchronize();
  s.cb = read_back<float>(backend, ws, bmm.cb());
  // What the scan reads, right before it runs.
  s.dt_before_scan = compact_heads(read_back<float>(backend, ws, scan.dt_span()), scan);
  s.da_before_scan = compact_heads(read_back<float>(backend, ws, scan.da_span()), scan);
  s.cb_before_scan = read_back<float>(backend, ws, scan.cb());
  s.state_in = read_back<float>(backend, ws, scan.state);
  backend.mamba2_chunk(ws, scan);
  backend.synchronize();
  s.state = read_back<float>(backend, ws, scan.state);
  append(run.state_in, s.state_in);
  append(run.state, s.state);
  run.sequences.push_back(std::move(s));
}

}  // namespace

std::vector<Access> Mamba2Plan::accesses() const {
  std::vector<Access> all = conv.accesses();
  if (path == Mamba2Path::chunked)
    for (const Mamba2ChunkOp& op : chunk) append(all, op.accesses());
  else
    append(all, recurrent.accesses());
  append(all, norm.accesses());
  return all;
}

Mamba2Plan plan_mamba2(const Mamba2Dims& dims, Mamba2Path path, uint64_t nc) {
  const Mamba2Geometry& g = dims.geom;
  const uint64_t rows = dims.rows();
  Mamba2Plan p;
  p.dims = dims;
  p.path = path;
  p.conv = Mamba2ConvOp::make(g, rows, dims.sequences);
  p.norm = Mamba2GatedNormOp::make(g, rows, dims.eps);
  uint64_t end = place_in_pool({&p.conv.weight, &p.conv.bias, &p.conv.state, &p.norm.weight});
  if (path == Mamba2Path::recurrent) {
    p.recurrent = Mamba2RecurrentOp::make(g, 0, rows, dims.sequences);
    Mamba2RecurrentOp& r = p.recurrent;
    p.pool_bytes = place_in_pool({&r.a_log, &r.dt_bias, &r.D, &r.state}, end);
    return p;
  }
  if (nc == 0) nc = cdiv(dims.L, Mamba2ChunkCarve::kChunk);
  using S = Mamba2ChunkOp::Stage;
  Mamba2ChunkOp weights = Mamba2ChunkOp::make(S::cumsum, g, 0, dims.L, nc);
  end = place_in_pool({&weights.a_log, &weights.dt_bias, &weights.D}, end);
  for (uint64_t b = 0; b < dims.sequences; ++b) {
    TensorRef state = weights.state;  // one pool range per sequence
    end = place_in_pool({&state}, end);
    for (S stage : {S::cumsum, S::bmm, S::scan}) {
      Mamba2ChunkOp op = Mamba2ChunkOp::make(stage, g, b * dims.L, dims.L, nc, b, dims.sequences);
      op.a_log = weights.a_log;
      op.dt_bias = weights.dt_bias;
      op.D = weights.D;
      op.state = state;
      p.chunk.push_back(std::move(op));
    }
  }
  p.pool_bytes = end;
  return p;
}

Workspace allocate_mamba2_footprint(Backend& backend, const Mamba2Plan& plan) {
  return backend.allocate(detail::footprint_of(plan.accesses()), plan.pool_bytes);
}

Mamba2Run run_mamba2(Backend& backend, const Workspace& ws, const Mamba2Plan& plan,
                     const Mamba2Inputs& in) {
  const Mamba2Dims& d = plan.dims;
  if (ws.weights_bytes() < plan.pool_bytes)
    throw Error(fmt::format("run_ssd: the weight pool holds {} bytes, the placed operands need {}",
                            ws.weights_bytes(), plan.pool_bytes));
  const bool chunked = plan.path == Mamba2Path::chunked;
  if (chunked && plan.chunk.size() != mul(3, d.sequences))
    throw Error(
        fmt::format("run_ssd: {} chunk ops for {} sequences", plan.chunk.size(), d.sequences));
  backend.poison(ws);
  upload_exact(backend, ws, plan.conv.input, in.zxbcdt, "zxbcdt");
  upload_exact(backend, ws, plan.conv.weight, in.conv_w, "conv_w");
  upload_exact(backend, ws, plan.conv.bias, in.conv_b, "conv_b");
  upload_exact(backend, ws, plan.conv.state, in.conv_state, "conv_state");
  upload_exact(backend, ws, plan.norm.weight, in.norm_w, "norm_w");
  if (chunked) {
    const Mamba2ChunkOp& w = plan.chunk.front();
    upload_exact(backend, ws, w.a_log, in.a_log, "a_log");
    upload_exact(backend, ws, w.dt_bias, in.dt_bias, "dt_bias");
    upload_exact(backend, ws, w.D, in.D, "D");
    const uint64_t per = plan.chunk.front().state.elements();
    for (uint64_t b = 0; b < d.sequences; ++b)
      upload_exact(backend, ws, plan.chunk[3 * b].state, host_part(in.state, b, per), "state");
  } else {
    const Mamba2RecurrentOp& r = plan.recurrent;
    upload_exact(backend, ws, r.a_log, in.a_log, "a_log");
    upload_exact(backend, ws, r.dt_bias, in.dt_bias, "dt_bias");
    upload_exact(backend, ws, r.D, in.D, "D");
    upload_exact(backend, ws, r.state, in.state, "state");
  }

  Mamba2Run run;
  run.path = plan.path;
  backend.mamba2_conv(ws, plan.conv);
  backend.synchronize();
  run.xbc = read_back<uint16_t>(backend, ws, plan.conv.output);
  run.conv_state = read_back<uint16_t>(backend, ws, plan.conv.state);
  if (chunked) {
    for (uint64_t b = 0; b < d.sequences; ++b)
      run_sequence(backend, ws, plan.chunk.data() + 3 * b, run);
  } else {
    run.state_in = read_back<float>(backend, ws, plan.recurrent.state);
    backend.mamba2_recurrent(ws, plan.recurrent);
    backend.synchronize();
    run.state = read_back<float>(backend, ws, plan.recurrent.state);
  }
  run.y = read_back<uint16_t>(backend, ws, plan.norm.input);
  backend.mamba2_gated_norm(ws, plan.norm);
  backend.synchronize();
  run.normed = read_back<uint16_t>(backend, ws, plan.norm.output);
  return run;
}

}  // namespace bufferlab::oracle
