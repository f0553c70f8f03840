// GDN ops: extents from the config and the pass rows (op semantics); the §4.5 region offsets
// from nt (the sizing under test). All products are checked.
#include "bufferlab/core/ops/gdn.h"

#include <cstdio>
#include <string>

#include "bind_check.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "params_text.h"

namespace bufferlab {
namespace {

using detail::bind_one;
using detail::fmt_double;
using detail::per_sequence;
using detail::u;

// Per-stream value names keep one stream's region from standing in for another's.
std::string per_stream(const char* value, uint64_t streams, uint64_t b) {
  return streams > 1 ? std::string(value) + ".s" + u(b) : std::string(value);
}

}  // namespace

GdnGeometry GdnGeometry::of(const ModelConfig& c) {
  GdnGeometry g;
  g.nk = c.linear_num_key_heads;
  g.kd = c.linear_key_head_dim;
  g.nv = c.linear_num_value_heads;
  g.vd = c.linear_value_head_dim;
  g.kernel = c.linear_conv_kernel_dim;
  g.qkvz = c.ssm_qkvz_size().value();
  g.conv_dim = (Size(2) * g.nk * g.kd + Size(g.nv) * g.vd).value();
  g.value_dim = (Size(g.nv) * g.vd).value();
  return g;
}

std::string GdnGeometry::to_string() const {
  return "nk=" + u(nk) + ",kd=" + u(kd) + ",nv=" + u(nv) + ",vd=" + u(vd) + ",conv=" + u(kernel);
}

// --- de-interleave -------------------------------------------------------------------------

GdnDeinterleaveOp GdnDeinterleaveOp::make(const GdnGeometry& g, uint64_t rows) {
  GdnDeinterleaveOp op;
  op.geom = g;
  op.dims = {rows, g.qkvz};
  op.input = arena_tensor(BufferId::ssm_qkvz, 0, {rows, g.qkvz}, DType::bf16);
  op.output = arena_tensor(BufferId::ssm_deinterleaved, 0, {rows, g.qkvz}, DType::bf16);
  return op;
}

std::string GdnDeinterleaveOp::params() const {
  return "gdn_deinterleave(rows=" + u(dims.rows) + "," + geom.to_string() + ")";
}

std::vector<Access> GdnDeinterleaveOp::accesses() const {
  return {{input, AccessKind::read, "qkvz"}, {output, AccessKind::write, "qkvz_deint"}};
}

// --- conv1d --------------------------------------------------------------------------------

GdnConvOp GdnConvOp::make(const GdnGeometry& g, uint64_t rows, uint64_t sequences) {
  GdnConvOp op;
  op.geom = g;
  const uint64_t L = per_sequence(rows, sequences, "gdn_conv1d");
  op.dims = {rows, g.conv_dim, g.qkvz, g.kernel, sequences, L};
  op.input = arena_tensor(BufferId::ssm_deinterleaved, 0, {rows, g.qkvz}, DType::bf16);
  op.weight = pool_tensor({g.conv_dim, g.kernel}, DType::bf16);
  op.state = pool_tensor({sequences, g.conv_dim, g.kernel > 0 ? g.kernel - 1 : 0}, DType::bf16);
  op.output = arena_tensor(BufferId::ssm_conv_out_f32, 0, {rows, g.conv_dim}, DType::f32);
  return op;
}

GdnConvOp::Bound GdnConvOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  if (dims.kernel == 0) throw Error(params() + ": conv kernel 0");
  Bound b;
  b.input = bind_one<const uint16_t>(ws, input, mul(dims.rows, dims.row_stride), DType::bf16, p);
  b.weight = bind_one<const uint16_t>(ws, weight, mul(dims.channels, dims.kernel), DType::bf16, p);
  b.state = bind_one<uint16_t>(ws, state, mul(mul(dims.sequences, dims.channels), dims.kernel - 1),
                               DType::bf16, p);
  b.output = bind_one<float>(ws, output, mul(dims.rows, dims.channels), DType::f32, p);
  return b;
}

std::string GdnConvOp::params() const {
  return "gdn_conv1d(rows=" + u(dims.rows) + ",sequences=" + u(dims.sequences) +
         ",channels=" + u(dims.channels) + ",stride=" + u(dims.row_stride) +
         ",kernel=" + u(dims.kernel) + ")";
}

std::vector<Access> GdnConvOp::accesses() const {
  return {{input, AccessKind::read, "qkvz_deint"},
          {weight, AccessKind::read, {}},
          {state, AccessKind::read, {}},
          {state, AccessKind::write, {}},
          {output, AccessKind::write, "conv_out"}};
}

// --- gates ---------------------------------------------------------------------------------

GdnGatesOp GdnGatesOp::make(const GdnGeometry& g, uint64_t rows) {
  GdnGatesOp op;
  op.dims = {rows, g.nv};
  op.ba = arena_tensor(BufferId::ssm_ba, 0, {rows, (Size(2) * g.nv).value()}, DType::bf16);
  op.a_log = pool_tensor({g.nv}, DType::f32);
  op.dt_bias = pool_tensor({g.nv}, DType::f32);
  op.gates = arena_tensor(BufferId::ssm_gates, 0, {rows, g.nv, 2}, DType::f32);
  return op;
}

GdnGatesOp::Bound GdnGatesOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  Bound b;
  b.ba = bind_one<const uint16_t>(ws, ba, mul(dims.rows, 2 * dims.nv), DType::bf16, p);
  b.a_log = bind_one<const float>(ws, a_log, dims.nv, DType::f32, p);
  b.dt_bias = bind_one<const float>(ws, dt_bias, dims.nv, DType::f32, p);
  b.gates = bind_one<float>(ws, gates, mul(dims.rows, 2 * dims.nv), DType::f32, p);
  return b;
}

std::string GdnGatesOp::params() const {
  return "gdn_gates(rows=" + u(dims.rows) + ",nv=" + u(dims.nv) + ")";
}

std::vector<Access> GdnGatesOp::accesses() const {
  return {{ba, AccessKind::read, "ba"},
          {a_log, AccessKind::read, {}},
          {dt_bias, AccessKind::read, {}},
          {gates, AccessKind::write, "gates"}};
}

// --- chunk carve (§4.5) --------------------------------------------------------------------

GdnChunkCarve GdnChunkCarve::make(uint64_t nt, uint64_t nv, uint64_t kd, uint64_t vd) {
  GdnChunkCarve c;
  c.nt = nt;
  c.nv = nv;
  c.kd = kd;
  c.vd = vd;
  c.w_region = (Size(kChunk) * kd * 2).value();
  c.u_region = (Size(kChunk) * vd * 2).value();
  c.s_region = (Size(kd) * vd * 2).value();
  c.uc_region = (Size(kChunk) * vd * 2).value();
  c.gc_region = (Size(kChunk) * 4).value();
  const Size regions = Size(nt) * nv;
  c.w = 0;
  c.u = (Size(c.w) + regions * c.w_region).value();
  c.s = (Size(c.u) + regions * c.u_region).value();
  c.uc = (Size(c.s) + regions * c.s_region).value();
  c.gc = (Size(c.uc) + regions * c.uc_region).value();
  c.end = (Size(c.gc) + regions * c.gc_region).value();
  return c;
}

// --- chunked core --------------------------------------------------------------------------

GdnChunkOp GdnChunkOp::make(Stage stage, const GdnGeometry& g, uint64_t row0, uint64_t streams,
                            uint64_t L, uint64_t nt) {
  GdnChunkOp op;
  op.stage = stage;
  op.carve = GdnChunkCarve::make(nt, g.nv, g.kd, g.vd);
  const uint64_t cps = cdiv(L, GdnChunkCarve::kChunk);
  op.dims = {row0,      (Size(streams) * L).value(),
             streams,   L,
             cps,       (Size(streams) * cps).value(),
             g.nk,      g.kd,
             g.nv,      g.vd,
             g.conv_dim};
  op.state = pool_tensor({streams, g.nv, g.kd, g.vd}, DType::f32);
  op.operands = {op.conv_rows(),    op.gate_rows(),     op.span(Array::W),  op.span(Array::U),
                 op.span(Array::S), op.span(Array::uc), op.span(Array::gc), op.output_rows()};
  return op;
}

TensorRef GdnChunkOp::span(Array a) const {
  // Stream 0's region slice, widened to every stream's regions.
  TensorRef t = region(a, 0);
  t.shape[0] = (Size(dims.streams) * t.shape[0]).value();
  return t;
}

GdnChunkOp::Bound GdnChunkOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  if (dims.kd != kGdnChunkedHeadDim || dims.vd != kGdnChunkedHeadDim)
    throw Error(params() +
                ": the chunked path runs kd = vd = 128 only (docs/spec/numerics.md §5); other "
                "head sizes run the recurrence");
  const uint64_t regions = mul(dims.chunks, dims.nv), C = GdnChunkCarve::kChunk;
  Bound b;
  b.conv = bind_one<const float>(ws, operands.conv, mul(dims.rows, dims.conv_dim), DType::f32, p);
  b.gates = bind_one<const float>(ws, operands.gates, mul(dims.rows, 2 * dims.nv), DType::f32, p);
  b.W = bind_one<uint16_t>(ws, operands.W, mul(mul(regions, C), dims.kd), DType::bf16, p);
  b.U = bind_one<uint16_t>(ws, operands.U, mul(mul(regions, C), dims.vd), DType::bf16, p);
  b.S = bind_one<uint16_t>(ws, operands.S, mul(mul(regions, dims.kd), dims.vd), DType::bf16, p);
  b.uc = bind_one<uint16_t>(ws, operands.uc, mul(mul(regions, C), dims.vd), DType::bf16, p);
  b.gc = bind_one<float>(ws, operands.gc, mul(regions, C), DType::f32, p);
  b.state = bind_one<float>(ws, state, mul(mul(mul(dims.streams, dims.nv), dims.kd), dims.vd),
                            DType::f32, p);
  b.output = bind_one<uint16_t>(ws, operands.output, mul(dims.rows, mul(dims.nv, dims.vd)),
                                DType::bf16, p);
  return b;
}

std::string GdnChunkOp::name() const {
  switch (stage) {
    case Stage::wu:
      return "gdn_chunk_wu";
    case Stage::state:
      return "gdn_chunk_state";
    case Stage::output:
      return "gdn_chunk_output";
  }
  return "gdn_chunk";
}

std::string GdnChunkOp::params() const {
  return name() + "(row0=" + u(dims.row0) + ",T=" + u(dims.rows) + ",streams=" + u(dims.streams) +
         ",L=" + u(dims.L) + ",chunks=" + u(dims.chunks) + ",nk=" + u(dims.nk) +
         ",nv=" + u(dims.nv) + ",kd=" + u(dims.kd) + ",vd=" + u(dims.vd) + ",nt=" + u(carve.nt) +
         ")";
}

TensorRef GdnChunkOp::region(Array a, uint64_t b) const {
  // Regions of stream b: first (b·cps + 0)·nv + 0, count cps·nv, contiguous in each array.
  const Size first = Size(b) * dims.chunks_per_stream * dims.nv;
  const uint64_t count = (Size(dims.chunks_per_stream) * dims.nv).value();
  const uint64_t C = GdnChunkCarve::kChunk;
  switch (a) {
    case Array::W:
      return arena_tensor(BufferId::gdn_fla_scratch, Size(carve.w) + first * carve.w_region,
                          {count, C, dims.kd}, DType::bf16);
    case Array::U:
      return arena_tensor(BufferId::gdn_fla_scratch, Size(carve.u) + first * carve.u_region,
                          {count, C, dims.vd}, DType::bf16);
    case Array::S:
      return arena_tensor(BufferId::gdn_fla_scratch, Size(carve.s) + first * carve.s_region,
                          {count, dims.kd, dims.vd}, DType::bf16);
    case Array::uc:
      return arena_tensor(BufferId::gdn_fla_scratch, Size(carve.uc) + first * carve.uc_region,
                          {count, C, dims.vd}, DType::bf16);
    case Array::gc:
      return arena_tensor(BufferId::gdn_fla_scratch, Size(carve.gc) + first * carve.gc_region,
                          {count, C}, DType::f32);
  }
  return {};
}

TensorRef GdnChunkOp::conv_rows() const {
  return arena_tensor(BufferId::ssm_conv_out_f32, Size(dims.row0) * dims.conv_dim * 4,
                      {dims.rows, dims.conv_dim}, DType::f32);
}

TensorRef GdnChunkOp::gate_rows() const {
  return arena_tensor(BufferId::ssm_gates, Size(dims.row0) * dims.nv * 2 * 4,
                      {dims.rows, dims.nv, 2}, DType::f32);
}

TensorRef GdnChunkOp::output_rows() const {
  const uint64_t width = (Size(dims.nv) * dims.vd).value();
  return arena_tensor(BufferId::attn_output, Size(dims.row0) * width * 2, {dims.rows, width},
                      DType::bf16);
}

std::vector<Access> GdnChunkOp::accesses() const {
  std::vector<Access> out;
  const uint64_t n = dims.streams;
  auto each_stream = [&](Array a, AccessKind k, const char* value) {
    for (uint64_t b = 0; b < n; ++b) out.push_back({region(a, b), k, per_stream(value, n, b)});
  };
  switch (stage) {
    case Stage::wu:
      out.push_back({conv_rows(), AccessKind::read, "conv_out"});
      out.push_back({gate_rows(), AccessKind::read, "gates"});
      each_stream(Array::gc, AccessKind::write, "gdn_gc");
      each_stream(Array::W, AccessKind::write, "gdn_W");
      each_stream(Array::U, AccessKind::write, "gdn_U");
      break;
    case Stage::state:
      out.push_back({conv_rows(), AccessKind::read, "conv_out"});
      each_stream(Array::W, AccessKind::read, "gdn_W");
      each_stream(Array::U, AccessKind::read, "gdn_U");
      each_stream(Array::gc, AccessKind::read, "gdn_gc");
      out.push_back({state, AccessKind::read, {}});
      out.push_back({state, AccessKind::write, {}});
      each_stream(Array::S, AccessKind::write, "gdn_S");
      each_stream(Array::uc, AccessKind::write, "gdn_uc");
      break;
    case Stage::output:
      out.push_back({conv_rows(), AccessKind::read, "conv_out"});
      each_stream(Array::S, AccessKind::read, "gdn_S");
      each_stream(Array::uc, AccessKind::read, "gdn_uc");
      each_stream(Array::gc, AccessKind::read, "gdn_gc");
      out.push_back({output_rows(), AccessKind::write, "gdn_core"});
      break;
  }
  return out;
}

// --- recurrence ----------------------------------------------------------------------------

GdnRecurrentOp GdnRecurrentOp::make(const GdnGeometry& g, uint64_t row0, uint64_t rows,
                                    uint64_t sequences) {
  GdnRecurrentOp op;
  if (sequences == 0) sequences = rows;
  const uint64_t L = rows == 0 ? 0 : per_sequence(rows, sequences, "gdn_recurrent");
  op.dims = {row0, rows, g.nk, g.kd, g.nv, g.vd, g.conv_dim, sequences, L};
  op.conv = arena_tensor(BufferId::ssm_conv_out_f32, Size(row0) * g.conv_dim * 4,
                         {rows, g.conv_dim}, DType::f32);
  op.gates =
      arena_tensor(BufferId::ssm_gates, Size(row0) * g.nv * 2 * 4, {rows, g.nv, 2}, DType::f32);
  op.state = pool_tensor({sequences, g.nv, g.kd, g.vd}, DType::f32);
  op.output = arena_tensor(BufferId::attn_output, Size(row0) * g.value_dim * 2, {rows, g.value_dim},
                           DType::bf16);
  return op;
}

GdnRecurrentOp::Bound GdnRecurrentOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  if (dims.kd > kMaxGdnHeadDim || dims.vd > kMaxGdnHeadDim)
    throw Error(params() + ": kd and vd must be at most " + u(kMaxGdnHeadDim));
  Bound b;
  b.conv = bind_one<const float>(ws, conv, mul(dims.rows, dims.conv_dim), DType::f32, p);
  b.gates = bind_one<const float>(ws, gates, mul(dims.rows, 2 * dims.nv), DType::f32, p);
  b.state = bind_one<float>(ws, state, mul(mul(mul(dims.sequences, dims.nv), dims.kd), dims.vd),
                            DType::f32, p);
  b.output = bind_one<uint16_t>(ws, output, mul(dims.rows, mul(dims.nv, dims.vd)), DType::bf16, p);
  return b;
}

std::string GdnRecurrentOp::params() const {
  return "gdn_recurrent(row0=" + u(dims.row0) + ",rows=" + u(dims.rows) +
         ",sequences=" + u(dims.sequences) + ",nk=" + u(dims.nk) + ",nv=" + u(dims.nv) +
         ",kd=" + u(dims.kd) + ",vd=" + u(dims.vd) + ")";
}

std::vector<Access> GdnRecurrentOp::accesses() const {
  return {{conv, AccessKind::read, "conv_out"},
          {gates, AccessKind::read, "gates"},
          {state, AccessKind::read, {}},
          {state, AccessKind::write, {}},
          {output, AccessKind::write, "gdn_core"}};
}

// --- gated norm ----------------------------------------------------------------------------

GdnGatedNormOp GdnGatedNormOp::make(const GdnGeometry& g, uint64_t rows, double eps) {
  GdnGatedNormOp op;
  op.dims = {rows, g.nv, g.vd, g.conv_dim, g.qkvz};  // Z follows Q|K|V in each row
  op.eps = eps;
  op.io = arena_tensor(BufferId::attn_output, 0, {rows, g.value_dim}, DType::bf16);
  op.z = arena_tensor(BufferId::ssm_deinterleaved, 0, {rows, g.qkvz}, DType::bf16);
  op.weight = pool_tensor({g.vd}, DType::bf16);
  return op;
}

GdnGatedNormOp::Bound GdnGatedNormOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  Bound b;
  b.io = bind_one<uint16_t>(ws, io, mul(dims.rows, mul(dims.heads, dims.head_dim)), DType::bf16, p);
  b.z = bind_one<const uint16_t>(ws, z, mul(dims.rows, dims.z_row_stride), DType::bf16, p);
  b.weight = bind_one<const uint16_t>(ws, weight, dims.head_dim, DType::bf16, p);
  return b;
}

std::string GdnGatedNormOp::params() const {
  return "gdn_gated_norm(rows=" + u(dims.rows) + ",heads=" + u(dims.heads) +
         ",head_dim=" + u(dims.head_dim) + ",z_col=" + u(dims.z_col) +
         ",z_stride=" + u(dims.z_row_stride) + ",eps=" + fmt_double(eps) + ")";
}

std::vector<Access> GdnGatedNormOp::accesses() const {
  return {{io, AccessKind::read, "gdn_core"},
          {z, AccessKind::read, "qkvz_deint"},
          {weight, AccessKind::read, {}},
          {io, AccessKind::write, "gdn_normed"}};
}

}  // namespace bufferlab
