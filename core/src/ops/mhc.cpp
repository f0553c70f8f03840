// mHC ops: extents from the config and the pass rows (op semantics); the GEMM-path carve of
// hc_lowrank_scratch from the m the layout was sized for. All products are checked.
#include "bufferlab/core/ops/mhc.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "bind_check.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "params_text.h"

namespace bufferlab {
namespace {

using detail::u;

uint64_t width(uint64_t hc, uint64_t h) { return (Size(hc) * h).value(); }  // hc·h

using detail::bind_one;

TensorRef stream_rows(uint64_t row0, uint64_t rows, uint64_t hc, uint64_t h) {
  return arena_tensor(BufferId::hc_streams, Size(row0) * hc * h * 4, {rows, hc, h}, DType::f32);
}
TensorRef block_in_rows(uint64_t row0, uint64_t rows, uint64_t h) {
  return arena_tensor(BufferId::norm_output, Size(row0) * h * 2, {rows, h}, DType::bf16);
}
TensorRef post_rows(uint64_t row0, uint64_t rows, uint64_t hc) {
  return arena_tensor(BufferId::hc_post, Size(row0) * hc * 4, {rows, hc}, DType::f32);
}

}  // namespace

// --- expand --------------------------------------------------------------------------------

MhcExpandOp MhcExpandOp::make(const ModelConfig& c, uint64_t rows) {
  MhcExpandOp op;
  op.dims = {rows, c.hc_mult, c.hidden_size};
  op.input = arena_tensor(BufferId::hidden_states, 0, {rows, c.hidden_size}, DType::bf16);
  op.streams = stream_rows(0, rows, c.hc_mult, c.hidden_size);
  return op;
}

MhcExpandOp::Bound MhcExpandOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  Bound b;
  b.input = bind_one<const uint16_t>(ws, input, mul(dims.rows, dims.h), DType::bf16, p);
  b.streams = bind_one<float>(ws, streams, mul(mul(dims.rows, dims.hc), dims.h), DType::f32, p);
  return b;
}

std::string MhcExpandOp::params() const {
  return "hc_expand(rows=" + u(dims.rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) + ")";
}

std::vector<Access> MhcExpandOp::accesses() const {
  return {{input, AccessKind::read, "@x"}, {streams, AccessKind::write, "@hc"}};
}

// --- Sinkhorn pre --------------------------------------------------------------------------

MhcPreOp MhcPreOp::make(const ModelConfig& c, uint64_t rows) {
  MhcPreOp op;
  const uint64_t hc = c.hc_mult, h = c.hidden_size;
  const uint64_t mix = ((Size(2) + hc) * hc).value();  // [pre | post | comb]
  op.dims = {rows, hc, h, mix, c.hc_sinkhorn_iters};
  op.rms_eps = c.rms_norm_eps;
  op.hc_eps = c.hc_eps;
  op.streams = stream_rows(0, rows, hc, h);
  op.fn = pool_tensor({mix, width(hc, h)}, DType::f32);
  op.scale = pool_tensor({3}, DType::f32);
  op.bias = pool_tensor({mix}, DType::f32);
  op.post = post_rows(0, rows, hc);
  op.comb = arena_tensor(BufferId::hc_comb, 0, {rows, hc, hc}, DType::f32);
  op.block_in = block_in_rows(0, rows, h);
  return op;
}

MhcPreOp::Bound MhcPreOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  const uint64_t rows = dims.rows, hc = dims.hc, h = dims.h;
  Bound b;
  b.streams = bind_one<const float>(ws, streams, mul(mul(rows, hc), h), DType::f32, p);
  b.fn = bind_one<const float>(ws, fn, mul(dims.mix, width(hc, h)), DType::f32, p);
  b.scale = bind_one<const float>(ws, scale, 3, DType::f32, p);
  b.bias = bind_one<const float>(ws, bias, dims.mix, DType::f32, p);
  b.post = bind_one<float>(ws, post, mul(rows, hc), DType::f32, p);
  b.comb = bind_one<float>(ws, comb, mul(mul(rows, hc), hc), DType::f32, p);
  b.block_in = bind_one<uint16_t>(ws, block_in, mul(rows, h), DType::bf16, p);
  return b;
}

std::string MhcPreOp::params() const {
  char eps[64];
  std::snprintf(eps, sizeof eps, ",rms_eps=%g,hc_eps=%g", rms_eps, hc_eps);
  return "hc_pre_sinkhorn(rows=" + u(dims.rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) +
         ",iters=" + u(dims.iters) + eps + ")";
}

std::vector<Access> MhcPreOp::accesses() const {
  std::vector<Access> out = {
      {streams, AccessKind::read, "@hc"},   {fn, AccessKind::read, {}},
      {scale, AccessKind::read, {}},        {bias, AccessKind::read, {}},
      {post, AccessKind::write, "hc_post"}, {comb, AccessKind::write, "hc_comb"},
      {block_in, AccessKind::write, "norm"}};
  return out;
}

// --- low-rank carves (§4.7) ----------------------------------------------------------------

MhcSplitCarve MhcSplitCarve::make(uint64_t rows, uint64_t hc, uint64_t h, uint64_t r) {
  MhcSplitCarve c{rows, hc, h, r};
  c.normed = 0;
  c.low = (Size(rows) * hc * h * 4).value();
  c.end = (Size(c.low) + Size(rows) * r * 4).value();
  return c;
}

MhcGemmCarve MhcGemmCarve::make(uint64_t m, uint64_t hc, uint64_t h, uint64_t r) {
  MhcGemmCarve c;
  c.slab_rows = min(Size(m), Size(kSlabRows)).value();
  c.hc = hc;
  c.h = h;
  c.r = r;
  const Size normed_bytes = Size(c.slab_rows) * hc * h * 2;
  c.normed = 0;
  c.up_pre = normed_bytes.value();
  c.low = (normed_bytes * 2).value();
  c.inj_pre = (Size(c.low) + Size(c.slab_rows) * r * 2).value();
  c.end = (Size(c.inj_pre) + Size(c.slab_rows) * hc * 2).value();
  return c;
}

std::vector<MhcSlab> mhc_gemm_slabs(uint64_t tokens) {
  std::vector<MhcSlab> out;
  for (uint64_t row0 = 0; row0 < tokens; row0 += MhcGemmCarve::kSlabRows)
    out.push_back({row0, std::min(MhcGemmCarve::kSlabRows, tokens - row0)});
  return out;
}

// --- low-rank pre, split path --------------------------------------------------------------

MhcLowRankSplitOp MhcLowRankSplitOp::make(Stage stage, const ModelConfig& c, uint64_t rows) {
  MhcLowRankSplitOp op;
  op.stage = stage;
  op.dims = {rows, c.hc_mult, c.hidden_size, c.hc_lowrank};
  op.carve = MhcSplitCarve::make(rows, c.hc_mult, c.hidden_size, c.hc_lowrank);
  op.rms_eps = c.rms_norm_eps;
  const uint64_t hc = c.hc_mult, h = c.hidden_size, r = c.hc_lowrank, w = width(hc, h);
  op.streams = stream_rows(0, rows, hc, h);
  op.norm_w = pool_tensor({hc, h}, DType::f32);
  op.normed = arena_tensor(BufferId::hc_lowrank_scratch, op.carve.normed, {rows, w}, DType::f32);
  op.w_down_inject = pool_tensor({(Size(r) + hc).value(), w}, DType::f32);
  op.low = arena_tensor(BufferId::hc_lowrank_scratch, op.carve.low, {rows, r}, DType::f32);
  op.post = post_rows(0, rows, hc);
  op.w_up = pool_tensor({w, r}, DType::f32);
  op.block_in = block_in_rows(0, rows, h);
  return op;
}

MhcLowRankSplitOp::Bound MhcLowRankSplitOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  const uint64_t rows = dims.rows, hc = dims.hc, h = dims.h, r = dims.r, w = width(hc, h);
  Bound b;
  switch (stage) {
    case Stage::norm:
      b.streams = bind_one<const float>(ws, streams, mul(rows, w), DType::f32, p);
      b.norm_w = bind_one<const float>(ws, norm_w, w, DType::f32, p);
      b.normed = bind_one<float>(ws, normed, mul(rows, w), DType::f32, p);
      break;
    case Stage::down:
      b.normed = bind_one<float>(ws, normed, mul(rows, w), DType::f32, p);
      b.w_down_inject =
          bind_one<const float>(ws, w_down_inject, mul((Size(r) + hc).value(), w), DType::f32, p);
      b.low = bind_one<float>(ws, low, mul(rows, r), DType::f32, p);
      b.post = bind_one<float>(ws, post, mul(rows, hc), DType::f32, p);
      break;
    case Stage::collapse:
      b.normed = bind_one<float>(ws, normed, mul(rows, w), DType::f32, p);
      b.low = bind_one<float>(ws, low, mul(rows, r), DType::f32, p);
      b.w_up = bind_one<const float>(ws, w_up, mul(w, r), DType::f32, p);
      b.block_in = bind_one<uint16_t>(ws, block_in, mul(rows, h), DType::bf16, p);
      break;
  }
  return b;
}

std::string MhcLowRankSplitOp::name() const {
  switch (stage) {
    case Stage::norm:
      return "hc_lowrank_split_norm";
    case Stage::down:
      return "hc_lowrank_split_down";
    case Stage::collapse:
      return "hc_lowrank_split_collapse";
  }
  return "hc_lowrank_split";
}

std::string MhcLowRankSplitOp::params() const {
  return name() + "(rows=" + u(dims.rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) +
         ",r=" + u(dims.r) + ")";
}

std::vector<Access> MhcLowRankSplitOp::accesses() const {
  std::vector<Access> out;
  switch (stage) {
    case Stage::norm:
      out = {{streams, AccessKind::read, "@hc"},
             {norm_w, AccessKind::read, {}},
             {normed, AccessKind::write, "hc_normed"}};
      break;
    case Stage::down:
      out = {{normed, AccessKind::read, "hc_normed"},
             {w_down_inject, AccessKind::read, {}},  // W_down | W_inject
             {low, AccessKind::write, "hc_low"},
             {post, AccessKind::write, "hc_post"}};
      break;
    case Stage::collapse:
      out = {{low, AccessKind::read, "hc_low"},
             {normed, AccessKind::read, "hc_normed"},
             {w_up, AccessKind::read, {}},
             {block_in, AccessKind::write, "norm"}};
      break;
  }
  return out;
}

// --- low-rank pre, GEMM path ---------------------------------------------------------------

MhcLowRankSlabOp MhcLowRankSlabOp::make(Stage stage, const ModelConfig& c, uint64_t m,
                                        uint64_t row0, uint64_t rows) {
  MhcLowRankSlabOp op;
  op.stage = stage;
  op.dims = {row0, rows, c.hc_mult, c.hidden_size, c.hc_lowrank};
  op.carve = MhcGemmCarve::make(m, c.hc_mult, c.hidden_size, c.hc_lowrank);
  op.rms_eps = c.rms_norm_eps;
  const uint64_t hc = c.hc_mult, h = c.hidden_size, r = c.hc_lowrank, w = width(hc, h);
  auto scratch = [&](uint64_t offset, uint64_t cols) {
    return arena_tensor(BufferId::hc_lowrank_scratch, offset, {rows, cols}, DType::bf16);
  };
  op.streams = stream_rows(row0, rows, hc, h);
  op.norm_w = pool_tensor({hc, h}, DType::f32);
  op.normed = scratch(op.carve.normed, w);
  op.w_down = pool_tensor({r, w}, DType::bf16);
  op.low = scratch(op.carve.low, r);
  op.w_inject = pool_tensor({hc, w}, DType::bf16);
  op.inj_pre = scratch(op.carve.inj_pre, hc);
  op.w_up = pool_tensor({w, r}, DType::bf16);
  op.up_pre = scratch(op.carve.up_pre, w);
  op.block_in = block_in_rows(row0, rows, h);
  op.post = post_rows(row0, rows, hc);
  return op;
}

MhcLowRankSlabOp::Bound MhcLowRankSlabOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  const uint64_t rows = dims.rows, hc = dims.hc, h = dims.h, r = dims.r, w = width(hc, h);
  Bound b;
  auto bf16 = [&](const TensorRef& t, uint64_t n) {
    return bind_one<uint16_t>(ws, t, n, DType::bf16, p);
  };
  auto weight = [&](const TensorRef& t, uint64_t n) {
    return bind_one<const uint16_t>(ws, t, n, DType::bf16, p);
  };
  switch (stage) {
    case Stage::norm:
      b.streams = bind_one<const float>(ws, streams, mul(rows, w), DType::f32, p);
      b.norm_w = bind_one<const float>(ws, norm_w, w, DType::f32, p);
      b.normed = bf16(normed, mul(rows, w));
      break;
    case Stage::down:
      b.normed = bf16(normed, mul(rows, w));
      b.w_down = weight(w_down, mul(r, w));
      b.low = bf16(low, mul(rows, r));
      break;
    case Stage::inject:
      b.normed = bf16(normed, mul(rows, w));
      b.w_inject = weight(w_inject, mul(hc, w));
      b.inj_pre = bf16(inj_pre, mul(rows, hc));
      break;
    case Stage::up:
      b.low = bf16(low, mul(rows, r));
      b.w_up = weight(w_up, mul(w, r));
      b.up_pre = bf16(up_pre, mul(rows, w));
      break;
    case Stage::collapse:
      b.normed = bf16(normed, mul(rows, w));
      b.up_pre = bf16(up_pre, mul(rows, w));
      b.inj_pre = bf16(inj_pre, mul(rows, hc));
      b.block_in = bf16(block_in, mul(rows, h));
      b.post = bind_one<float>(ws, post, mul(rows, hc), DType::f32, p);
      break;
  }
  return b;
}

std::string MhcLowRankSlabOp::name() const {
  switch (stage) {
    case Stage::norm:
      return "hc_lowrank_slab_norm";
    case Stage::down:
      return "hc_lowrank_slab_down";
    case Stage::inject:
      return "hc_lowrank_slab_inject";
    case Stage::up:
      return "hc_lowrank_slab_up";
    case Stage::collapse:
      return "hc_lowrank_slab_collapse";
  }
  return "hc_lowrank_slab";
}

std::string MhcLowRankSlabOp::params() const {
  return name() + "(row0=" + u(dims.row0) + ",rows=" + u(dims.rows) +
         ",slab_rows=" + u(carve.slab_rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) +
         ",r=" + u(dims.r) + ")";
}

std::vector<Access> MhcLowRankSlabOp::accesses() const {
  std::vector<Access> out;
  switch (stage) {
    case Stage::norm:
      out = {{streams, AccessKind::read, "@hc"},
             {norm_w, AccessKind::read, {}},
             {normed, AccessKind::write, "hc_normed"}};
      break;
    case Stage::down:
      out = {{normed, AccessKind::read, "hc_normed"},
             {w_down, AccessKind::read, {}},
             {low, AccessKind::write, "hc_low"}};
      break;
    case Stage::inject:
      out = {{normed, AccessKind::read, "hc_normed"},
             {w_inject, AccessKind::read, {}},
             {inj_pre, AccessKind::write, "hc_inj_pre"}};
      break;
    case Stage::up:
      out = {{low, AccessKind::read, "hc_low"},
             {w_up, AccessKind::read, {}},
             {up_pre, AccessKind::write, "hc_up_pre"}};
      break;
    case Stage::collapse:
      out = {{up_pre, AccessKind::read, "hc_up_pre"},
             {normed, AccessKind::read, "hc_normed"},
             {inj_pre, AccessKind::read, "hc_inj_pre"},
             {block_in, AccessKind::write, "norm"},
             {post, AccessKind::write, "hc_post"}};
      break;
  }
  return out;
}

// --- post ----------------------------------------------------------------------------------

MhcPostOp MhcPostOp::make(const ModelConfig& c, uint64_t rows) {
  MhcPostOp op;
  const uint64_t hc = c.hc_mult, h = c.hidden_size;
  op.dims = {rows, hc, h, c.hc_lowrank > 0};
  op.post = post_rows(0, rows, hc);
  op.comb = arena_tensor(BufferId::hc_comb, 0, {rows, hc, hc}, DType::f32);
  op.block_out = arena_tensor(BufferId::moe_output, 0, {rows, h}, DType::bf16);
  op.streams = stream_rows(0, rows, hc, h);
  op.out = op.streams;  // in place
  return op;
}

MhcPostOp::Bound MhcPostOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  const uint64_t rows = dims.rows, hc = dims.hc, h = dims.h, n = mul(mul(rows, hc), h);
  Bound b;
  b.post = bind_one<const float>(ws, post, mul(rows, hc), DType::f32, p);
  if (!dims.lowrank)
    b.comb = bind_one<const float>(ws, comb, mul(mul(rows, hc), hc), DType::f32, p);
  b.block_out = bind_one<const uint16_t>(ws, block_out, mul(rows, h), DType::bf16, p);
  b.streams = bind_one<const float>(ws, streams, n, DType::f32, p);
  b.out = bind_one<float>(ws, out, n, DType::f32, p);
  const auto* in_begin = reinterpret_cast<const std::byte*>(b.streams);
  const auto* out_begin = reinterpret_cast<const std::byte*>(b.out);
  const uint64_t bytes = n * 4;
  const bool same = in_begin == out_begin;
  const bool overlap = in_begin < out_begin + bytes && out_begin < in_begin + bytes;
  if (overlap && !same)
    throw Error(p.str() + ": out " + out.to_string() + " overlaps streams " + streams.to_string() +
                " without being the same tensor (only exact in-place is defined)");
  return b;
}

std::string MhcPostOp::params() const {
  return std::string("hc_post(rows=") + u(dims.rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) +
         ",form=" + (dims.lowrank ? "lowrank" : "sinkhorn") + ")";
}

std::vector<Access> MhcPostOp::accesses() const {
  std::vector<Access> out = {{post, AccessKind::read, "hc_post"}};
  if (!dims.lowrank) out.push_back({comb, AccessKind::read, "hc_comb"});  // unused low-rank
  out.push_back({block_out, AccessKind::read, "@block_out"});
  out.push_back({streams, AccessKind::read, "@hc"});
  out.push_back({this->out, AccessKind::write, "@hc"});
  return out;
}

// --- head ----------------------------------------------------------------------------------

MhcHeadOp MhcHeadOp::make(const ModelConfig& c, uint64_t rows) {
  MhcHeadOp op;
  const uint64_t hc = c.hc_mult, h = c.hidden_size;
  op.dims = {rows, hc, h};
  op.streams = stream_rows(0, rows, hc, h);
  op.rms_eps = c.rms_norm_eps;
  op.hc_eps = c.hc_eps;
  op.fn = pool_tensor({hc, width(hc, h)}, DType::f32);
  op.scale = pool_tensor({1}, DType::f32);
  op.bias = pool_tensor({hc}, DType::f32);
  op.output = arena_tensor(BufferId::hidden_states, 0, {rows, h}, DType::bf16);
  return op;
}

MhcHeadOp::Bound MhcHeadOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  const uint64_t rows = dims.rows, hc = dims.hc, h = dims.h;
  Bound b;
  b.streams = bind_one<const float>(ws, streams, mul(mul(rows, hc), h), DType::f32, p);
  b.fn = bind_one<const float>(ws, fn, mul(hc, width(hc, h)), DType::f32, p);
  b.scale = bind_one<const float>(ws, scale, 1, DType::f32, p);
  b.bias = bind_one<const float>(ws, bias, hc, DType::f32, p);
  b.output = bind_one<uint16_t>(ws, output, mul(rows, h), DType::bf16, p);
  return b;
}

std::string MhcHeadOp::params() const {
  return "hc_head(rows=" + u(dims.rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) + ")";
}

std::vector<Access> MhcHeadOp::accesses() const {
  return {{streams, AccessKind::read, "@hc"},
          {fn, AccessKind::read, {}},
          {scale, AccessKind::read, {}},
          {bias, AccessKind::read, {}},
          {output, AccessKind::write, "@hc_head"}};
}

}  // namespace bufferlab
