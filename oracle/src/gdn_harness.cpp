// One GDN call on a backend, through the core interface only (the oracle links no backend).
#include "bufferlab/oracle/gdn_harness.h"

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

}  // namespace

std::vector<Access> GdnPlan::accesses() const {
  std::vector<Access> all = conv.accesses();
  append(all, gates.accesses());
  if (path == GdnPath::chunked)
    for (const GdnChunkOp& op : chunk) append(all, op.accesses());
  else
    append(all, recurrent.accesses());
  append(all, norm.accesses());
  return all;
}

GdnPlan plan_gdn(const GdnDims& dims, GdnPath path, uint64_t nt) {
  const GdnGeometry& g = dims.geom;
  if (path == GdnPath::chunked && !dims.chunkable())
    throw Error(
        fmt::format("plan_gdn: the chunked path runs kd = vd = {} only (docs/spec/numerics.md §5), "
                    "not {}; use the recurrence",
                    kGdnChunkedHeadDim, g.to_string()));
  GdnPlan p;
  p.dims = dims;
  p.path = path;
  const uint64_t rows = dims.rows();
  p.conv = GdnConvOp::make(g, rows, dims.sequences);
  p.gates = GdnGatesOp::make(g, rows);
  p.norm = GdnGatedNormOp::make(g, rows, dims.eps);
  TensorRef* state = nullptr;
  if (path == GdnPath::chunked) {
    if (nt == 0) nt = (Size(dims.sequences) * cdiv(dims.L, GdnChunkCarve::kChunk)).value();
    using S = GdnChunkOp::Stage;
    for (S s : {S::wu, S::state, S::output})
      p.chunk.push_back(GdnChunkOp::make(s, g, 0, dims.sequences, dims.L, nt));
    state = &p.chunk[1].state;
  } else {
    p.recurrent = GdnRecurrentOp::make(g, 0, rows, dims.sequences);
    state = &p.recurrent.state;
  }
  // Each weight and state its own pool range; the three chunk stages share the one state
  // (only the state pass touches it, but every stage binds it).
  p.pool_bytes = place_in_pool(
      {&p.conv.weight, &p.conv.state, &p.gates.a_log, &p.gates.dt_bias, &p.norm.weight, state});
  for (GdnChunkOp& op : p.chunk) op.state = *state;
  return p;
}

Workspace allocate_gdn_footprint(Backend& backend, const GdnPlan& plan) {
  return backend.allocate(detail::footprint_of(plan.accesses()), plan.pool_bytes);
}

GdnRun run_gdn(Backend& backend, const Workspace& ws, const GdnPlan& plan, const GdnInputs& in) {
  if (ws.weights_bytes() < plan.pool_bytes)
    throw Error(
        fmt::format("run_gdn: the workspace's weight pool holds {} bytes, the plan needs {}",
                    ws.weights_bytes(), plan.pool_bytes));
  const bool chunked = plan.path == GdnPath::chunked;
  const TensorRef& state = chunked ? plan.chunk.at(1).state : plan.recurrent.state;
  backend.poison(ws);
  upload_exact(backend, ws, plan.conv.input, in.deint, "deint");
  upload_exact(backend, ws, plan.conv.weight, in.conv_w, "conv_w");
  upload_exact(backend, ws, plan.conv.state, in.conv_state, "conv_state");
  upload_exact(backend, ws, plan.gates.ba, in.ba, "ba");
  upload_exact(backend, ws, plan.gates.a_log, in.a_log, "a_log");
  upload_exact(backend, ws, plan.gates.dt_bias, in.dt_bias, "dt_bias");
  upload_exact(backend, ws, plan.norm.weight, in.norm_w, "norm_w");
  upload_exact(backend, ws, state, in.state, "state");

  GdnRun r;
  r.path = plan.path;
  r.state_in = in.state;
  backend.gdn_conv(ws, plan.conv);
  backend.synchronize();
  r.conv = read_back<float>(backend, ws, plan.conv.output);
  r.conv_state = read_back<uint16_t>(backend, ws, plan.conv.state);
  backend.gdn_gates(ws, plan.gates);
  backend.synchronize();
  r.gates = read_back<float>(backend, ws, plan.gates.gates);

  if (chunked) {
    using A = GdnChunkOp::Array;
    const GdnChunkOp& wu = plan.chunk.at(0);
    const GdnChunkOp& st = plan.chunk.at(1);
    const GdnChunkOp& out = plan.chunk.at(2);
    backend.gdn_chunk(ws, wu);
    backend.synchronize();
    r.gc = read_back<float>(backend, ws, wu.span(A::gc));
    r.W = read_back<uint16_t>(backend, ws, wu.span(A::W));
    r.U = read_back<uint16_t>(backend, ws, wu.span(A::U));

    r.W_before_state = read_back<uint16_t>(backend, ws, st.span(A::W));
    r.U_before_state = read_back<uint16_t>(backend, ws, st.span(A::U));
    r.gc_before_state = read_back<float>(backend, ws, st.span(A::gc));
    backend.gdn_chunk(ws, st);
    backend.synchronize();
    r.S = read_back<uint16_t>(backend, ws, st.span(A::S));
    r.uc = read_back<uint16_t>(backend, ws, st.span(A::uc));
    r.state = read_back<float>(backend, ws, st.state);

    r.S_before_output = read_back<uint16_t>(backend, ws, out.span(A::S));
    r.uc_before_output = read_back<uint16_t>(backend, ws, out.span(A::uc));
    r.gc_before_output = read_back<float>(backend, ws, out.span(A::gc));
    backend.gdn_chunk(ws, out);
    backend.synchronize();
    r.core = read_back<uint16_t>(backend, ws, out.output_rows());
  } else {
    backend.gdn_recurrent(ws, plan.recurrent);
    backend.synchronize();
    r.core = read_back<uint16_t>(backend, ws, plan.recurrent.output);
    r.state = read_back<float>(backend, ws, plan.recurrent.state);
  }
  backend.gdn_gated_norm(ws, plan.norm);
  backend.synchronize();
  r.normed = read_back<uint16_t>(backend, ws, plan.norm.io);
  return r;
}

}  // namespace bufferlab::oracle
