// Mamba-2 ops: extents from the config and the pass rows (op semantics); the §4.6 array
// offsets and the dt/dA head stride from nc (the sizing under test). All products are checked.
#include "bufferlab/core/ops/mamba2.h"

#include <algorithm>
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

// Group geometry every SSD kernel relies on (H % G = 0, a B/C group to read, P, N bounded).
void require_mamba2_geometry(uint64_t H, uint64_t G, uint64_t ng, uint64_t P, uint64_t N,
                             const detail::LazyParams& p) {
  if (ng == 0) throw Error(p.str() + ": n_groups = 0 leaves no B/C columns");
  if (G == 0 || H % G != 0)
    throw Error(p.str() + ": mamba_num_heads is not a multiple of n_groups");
  if (P > kMaxMamba2Dim || N > kMaxMamba2Dim)
    throw Error(p.str() + ": head dim and state size must be at most " + u(kMaxMamba2Dim));
}

// Head h's chunk c sits at (h·nc + c)·64 elements of its array: the span of all heads ends
// after head H−1's last chunk.
uint64_t span_rows(const Mamba2ChunkOp::Shape& d, uint64_t nc) {
  return d.H == 0 ? 0 : (Size(d.H - 1) * nc + d.chunks).value();
}

}  // namespace

Mamba2Geometry Mamba2Geometry::of(const ModelConfig& c) {
  Mamba2Geometry g;
  g.H = c.mamba_num_heads;
  g.P = c.mamba_head_dim;
  g.N = c.ssm_state_size;
  g.ng = c.n_groups;
  g.kernel = c.conv_kernel;
  g.G = std::max<uint64_t>(c.n_groups, 1);
  g.d_inner = c.mamba2_d_inner().value();
  g.d_xbc = c.mamba2_d_xbc().value();
  g.in_proj = c.mamba2_in_proj_size().value();
  return g;
}

std::string Mamba2Geometry::to_string() const {
  return "H=" + u(H) + ",P=" + u(P) + ",N=" + u(N) + ",groups=" + u(ng) + ",conv=" + u(kernel);
}

// --- conv1d --------------------------------------------------------------------------------

Mamba2ConvOp Mamba2ConvOp::make(const Mamba2Geometry& g, uint64_t rows, uint64_t sequences) {
  Mamba2ConvOp op;
  op.geom = g;
  const uint64_t L = per_sequence(rows, sequences, "mamba2_conv1d");
  op.dims = {rows, g.d_xbc, g.d_inner, g.in_proj, g.kernel, sequences, L};  // xBC follows z
  op.input = arena_tensor(BufferId::ssm_qkvz, 0, {rows, g.in_proj}, DType::bf16);
  op.weight = pool_tensor({g.d_xbc, g.kernel}, DType::bf16);
  op.bias = pool_tensor({g.d_xbc}, DType::bf16);
  op.state = pool_tensor({sequences, g.d_xbc, g.kernel > 0 ? g.kernel - 1 : 0}, DType::bf16);
  op.output = arena_tensor(BufferId::ssm_deinterleaved, 0, {rows, g.d_xbc}, DType::bf16);
  return op;
}

Mamba2ConvOp::Bound Mamba2ConvOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  if (dims.kernel == 0) throw Error(params() + ": conv kernel 0");
  Bound b;
  b.input = bind_one<const uint16_t>(ws, input, mul(dims.rows, dims.in_stride), DType::bf16, p);
  b.weight = bind_one<const uint16_t>(ws, weight, mul(dims.channels, dims.kernel), DType::bf16, p);
  b.bias = bind_one<const uint16_t>(ws, bias, dims.channels, DType::bf16, p);
  b.state = bind_one<uint16_t>(ws, state, mul(mul(dims.sequences, dims.channels), dims.kernel - 1),
                               DType::bf16, p);
  b.output = bind_one<uint16_t>(ws, output, mul(dims.rows, dims.channels), DType::bf16, p);
  return b;
}

std::string Mamba2ConvOp::params() const {
  return "mamba2_conv1d(rows=" + u(dims.rows) + ",sequences=" + u(dims.sequences) +
         ",channels=" + u(dims.channels) + ",in_col=" + u(dims.in_col) +
         ",in_stride=" + u(dims.in_stride) + ",kernel=" + u(dims.kernel) + ")";
}

std::vector<Access> Mamba2ConvOp::accesses() const {
  return {{input, AccessKind::read, "zxbcdt"}, {weight, AccessKind::read, {}},
          {bias, AccessKind::read, {}},        {state, AccessKind::read, {}},
          {state, AccessKind::write, {}},      {output, AccessKind::write, "xbc"}};
}

// --- SSD carve (§4.6) ----------------------------------------------------------------------

Mamba2ChunkCarve Mamba2ChunkCarve::make(uint64_t nc, uint64_t H, uint64_t G) {
  Mamba2ChunkCarve c;
  c.nc = nc;
  c.H = H;
  c.G = G;
  const Size per_array = Size(H) * nc * kChunk * 4;
  c.dt = 0;
  c.da = per_array.value();
  c.cb = (per_array * 2).value();
  c.end = (Size(c.cb) + Size(nc) * G * kChunk * kChunk * 4).value();
  return c;
}

// --- chunked SSD ---------------------------------------------------------------------------

Mamba2ChunkOp Mamba2ChunkOp::make(Stage stage, const Mamba2Geometry& g, uint64_t row0,
                                  uint64_t rows, uint64_t nc, uint64_t stream, uint64_t streams) {
  Mamba2ChunkOp op;
  op.stage = stage;
  op.carve = Mamba2ChunkCarve::make(nc, g.H, g.G);
  op.dims = {row0,      rows,    cdiv(rows, Mamba2ChunkCarve::kChunk),
             stream,    streams, g.H,
             g.P,       g.N,     g.G,
             g.d_inner, g.d_xbc, g.in_proj};
  op.a_log = pool_tensor({g.H}, DType::f32);
  op.dt_bias = pool_tensor({g.H}, DType::f32);
  op.D = pool_tensor({g.H}, DType::f32);
  op.state = pool_tensor({g.H, g.P, g.N}, DType::f32);
  op.operands = {op.zxbcdt_rows(), op.xbc_rows(), op.dt_span(),
                 op.da_span(),     op.cb(),       op.output_rows()};
  return op;
}

Mamba2ChunkOp::Bound Mamba2ChunkOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  require_mamba2_geometry(dims.H, dims.G, dims.G, dims.P, dims.N, p);
  if (dims.d_xbc < dims.d_inner + 2 * dims.G * dims.N)
    throw Error(params() + ": xBC is narrower than x | B | C");
  const uint64_t C = Mamba2ChunkCarve::kChunk, span = mul(span_rows(dims, carve.nc), C);
  Bound b;
  b.zxbcdt =
      bind_one<const uint16_t>(ws, operands.zxbcdt, mul(dims.rows, dims.in_proj), DType::bf16, p);
  b.xbc = bind_one<const uint16_t>(ws, operands.xbc, mul(dims.rows, dims.d_xbc), DType::bf16, p);
  b.dt = bind_one<float>(ws, operands.dt, span, DType::f32, p);
  b.da = bind_one<float>(ws, operands.da, span, DType::f32, p);
  b.cb = bind_one<float>(ws, operands.cb, mul(mul(dims.chunks, dims.G), C * C), DType::f32, p);
  b.a_log = bind_one<const float>(ws, a_log, dims.H, DType::f32, p);
  b.dt_bias = bind_one<const float>(ws, dt_bias, dims.H, DType::f32, p);
  b.D = bind_one<const float>(ws, D, dims.H, DType::f32, p);
  b.state = bind_one<float>(ws, state, mul(mul(dims.H, dims.P), dims.N), DType::f32, p);
  b.output = bind_one<uint16_t>(ws, operands.output, mul(dims.rows, dims.d_inner), DType::bf16, p);
  b.nc = carve.nc;
  return b;
}

std::string Mamba2ChunkOp::name() const {
  switch (stage) {
    case Stage::cumsum:
      return "ssd_chunk_cumsum";
    case Stage::bmm:
      return "ssd_chunk_bmm";
    case Stage::scan:
      return "ssd_chunk_scan";
  }
  return "ssd_chunk";
}

std::string Mamba2ChunkOp::params() const {
  return name() + "(row0=" + u(dims.row0) + ",rows=" + u(dims.rows) + ",chunks=" + u(dims.chunks) +
         ",stream=" + u(dims.stream) + "/" + u(dims.streams) + ",H=" + u(dims.H) +
         ",P=" + u(dims.P) + ",N=" + u(dims.N) + ",G=" + u(dims.G) + ",nc=" + u(carve.nc) + ")";
}

TensorRef Mamba2ChunkOp::dt_span() const {
  return arena_tensor(BufferId::ssd_scratch, carve.dt,
                      {span_rows(dims, carve.nc), Mamba2ChunkCarve::kChunk}, DType::f32);
}

TensorRef Mamba2ChunkOp::da_span() const {
  return arena_tensor(BufferId::ssd_scratch, carve.da,
                      {span_rows(dims, carve.nc), Mamba2ChunkCarve::kChunk}, DType::f32);
}

TensorRef Mamba2ChunkOp::cb() const {
  return arena_tensor(BufferId::ssd_scratch, carve.cb,
                      {dims.chunks, dims.G, Mamba2ChunkCarve::kChunk, Mamba2ChunkCarve::kChunk},
                      DType::f32);
}

TensorRef Mamba2ChunkOp::zxbcdt_rows() const {
  return arena_tensor(BufferId::ssm_qkvz, Size(dims.row0) * dims.in_proj * 2,
                      {dims.rows, dims.in_proj}, DType::bf16);
}

TensorRef Mamba2ChunkOp::xbc_rows() const {
  return arena_tensor(BufferId::ssm_deinterleaved, Size(dims.row0) * dims.d_xbc * 2,
                      {dims.rows, dims.d_xbc}, DType::bf16);
}

TensorRef Mamba2ChunkOp::output_rows() const {
  return arena_tensor(BufferId::attn_output, Size(dims.row0) * dims.d_inner * 2,
                      {dims.rows, dims.d_inner}, DType::bf16);
}

std::vector<Access> Mamba2ChunkOp::accesses() const {
  const std::string sfx = dims.streams > 1 ? ".s" + u(dims.stream) : "";
  const std::string dt = "ssd_dt" + sfx, da = "ssd_dA" + sfx, cbv = "ssd_CB" + sfx;
  std::vector<Access> out;
  auto heads = [&](AccessKind k) {
    out.push_back({dt_span(), k, dt});
    out.push_back({da_span(), k, da});
  };
  switch (stage) {
    case Stage::cumsum:
      out.push_back({zxbcdt_rows(), AccessKind::read, "zxbcdt"});  // dt_raw columns
      out.push_back({a_log, AccessKind::read, {}});
      out.push_back({dt_bias, AccessKind::read, {}});
      heads(AccessKind::write);
      break;
    case Stage::bmm:
      out.push_back({xbc_rows(), AccessKind::read, "xbc"});  // B, C columns
      out.push_back({cb(), AccessKind::write, cbv});
      break;
    case Stage::scan: {
      out.push_back({xbc_rows(), AccessKind::read, "xbc"});
      heads(AccessKind::read);
      out.push_back({cb(), AccessKind::read, cbv});
      out.push_back({D, AccessKind::read, {}});
      out.push_back({state, AccessKind::read, {}});
      out.push_back({state, AccessKind::write, {}});
      out.push_back({output_rows(), AccessKind::write, "ssd_out"});
      break;
    }
  }
  return out;
}

// --- recurrence ----------------------------------------------------------------------------

Mamba2RecurrentOp Mamba2RecurrentOp::make(const Mamba2Geometry& g, uint64_t row0, uint64_t rows,
                                          uint64_t sequences) {
  Mamba2RecurrentOp op;
  if (sequences == 0) sequences = rows;
  const uint64_t L = rows == 0 ? 0 : per_sequence(rows, sequences, "mamba2_recurrent");
  op.dims = {row0, rows, g.H, g.P, g.N, g.ng, g.G, g.d_inner, g.d_xbc, g.in_proj, sequences, L};
  op.zxbcdt =
      arena_tensor(BufferId::ssm_qkvz, Size(row0) * g.in_proj * 2, {rows, g.in_proj}, DType::bf16);
  op.xbc = arena_tensor(BufferId::ssm_deinterleaved, Size(row0) * g.d_xbc * 2, {rows, g.d_xbc},
                        DType::bf16);
  op.state = pool_tensor({sequences, g.H, g.P, g.N}, DType::f32);
  op.output = arena_tensor(BufferId::attn_output, Size(row0) * g.d_inner * 2, {rows, g.d_inner},
                           DType::bf16);
  op.a_log = pool_tensor({g.H}, DType::f32);
  op.dt_bias = pool_tensor({g.H}, DType::f32);
  op.D = pool_tensor({g.H}, DType::f32);
  return op;
}

Mamba2RecurrentOp::Bound Mamba2RecurrentOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  require_mamba2_geometry(dims.H, dims.G, dims.ng, dims.P, dims.N, p);
  Bound b;
  b.zxbcdt = bind_one<const uint16_t>(ws, zxbcdt, mul(dims.rows, dims.in_proj), DType::bf16, p);
  b.xbc = bind_one<const uint16_t>(ws, xbc, mul(dims.rows, dims.d_xbc), DType::bf16, p);
  b.a_log = bind_one<const float>(ws, a_log, dims.H, DType::f32, p);
  b.dt_bias = bind_one<const float>(ws, dt_bias, dims.H, DType::f32, p);
  b.D = bind_one<const float>(ws, D, dims.H, DType::f32, p);
  b.state = bind_one<float>(ws, state, mul(mul(mul(dims.sequences, dims.H), dims.P), dims.N),
                            DType::f32, p);
  b.output = bind_one<uint16_t>(ws, output, mul(dims.rows, dims.d_inner), DType::bf16, p);
  return b;
}

std::string Mamba2RecurrentOp::params() const {
  return "mamba2_recurrent(row0=" + u(dims.row0) + ",rows=" + u(dims.rows) +
         ",sequences=" + u(dims.sequences) + ",H=" + u(dims.H) + ",P=" + u(dims.P) +
         ",N=" + u(dims.N) + ",groups=" + u(dims.ng) + ")";
}

std::vector<Access> Mamba2RecurrentOp::accesses() const {
  return {{zxbcdt, AccessKind::read, "zxbcdt"},  // dt_raw columns
          {xbc, AccessKind::read, "xbc"},        {a_log, AccessKind::read, {}},
          {dt_bias, AccessKind::read, {}},       {D, AccessKind::read, {}},
          {state, AccessKind::read, {}},         {state, AccessKind::write, {}},
          {output, AccessKind::write, "ssd_out"}};
}

// --- gated norm ----------------------------------------------------------------------------

Mamba2GatedNormOp Mamba2GatedNormOp::make(const Mamba2Geometry& g, uint64_t rows, double eps) {
  Mamba2GatedNormOp op;
  op.dims = {rows, g.d_inner, g.d_inner / g.G, g.in_proj};
  op.eps = eps;
  op.input = arena_tensor(BufferId::attn_output, 0, {rows, g.d_inner}, DType::bf16);
  op.z = arena_tensor(BufferId::ssm_qkvz, 0, {rows, g.in_proj}, DType::bf16);
  op.weight = pool_tensor({g.d_inner}, DType::bf16);
  op.output = arena_tensor(BufferId::norm_output, 0, {rows, g.d_inner}, DType::bf16);
  return op;
}

Mamba2GatedNormOp::Bound Mamba2GatedNormOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  if (dims.group_size == 0 || dims.d_inner % dims.group_size != 0)
    throw Error(params() + ": d_inner is not a multiple of the norm group");
  Bound b;
  b.input = bind_one<const uint16_t>(ws, input, mul(dims.rows, dims.d_inner), DType::bf16, p);
  b.z = bind_one<const uint16_t>(ws, z, mul(dims.rows, dims.z_row_stride), DType::bf16, p);
  b.weight = bind_one<const uint16_t>(ws, weight, dims.d_inner, DType::bf16, p);
  b.output = bind_one<uint16_t>(ws, output, mul(dims.rows, dims.d_inner), DType::bf16, p);
  return b;
}

std::string Mamba2GatedNormOp::params() const {
  return "mamba2_gated_norm(rows=" + u(dims.rows) + ",d_inner=" + u(dims.d_inner) +
         ",group=" + u(dims.group_size) + ",z_stride=" + u(dims.z_row_stride) +
         ",eps=" + fmt_double(eps) + ")";
}

std::vector<Access> Mamba2GatedNormOp::accesses() const {
  return {{input, AccessKind::read, "ssd_out"},
          {z, AccessKind::read, "zxbcdt"},
          {weight, AccessKind::read, {}},
          {output, AccessKind::write, "mamba_normed"}};
}

}  // namespace bufferlab
