// mHC ops: extents from the config and the pass rows (op semantics); the GEMM-path carve of
// hc_lowrank_scratch from the m the layout was sized for. All products are checked.
#include "bufferlab/core/ops/mhc.h"

#include <string>

#include "bufferlab/core/checked.h"

namespace bufferlab {
namespace {

std::string u(uint64_t v) { return std::to_string(v); }

uint64_t width(uint64_t hc, uint64_t h) { return (Size(hc) * h).value(); }  // hc·h

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

HcExpandOp HcExpandOp::make(const ModelConfig& c, uint64_t rows) {
  HcExpandOp op;
  op.dims = {rows, c.hc_mult, c.hidden_size};
  op.input = arena_tensor(BufferId::hidden_states, 0, {rows, c.hidden_size}, DType::bf16);
  op.streams = stream_rows(0, rows, c.hc_mult, c.hidden_size);
  return op;
}

std::string HcExpandOp::params() const {
  return "hc_expand(rows=" + u(dims.rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) + ")";
}

std::vector<Access> HcExpandOp::accesses() const {
  return {{input, AccessKind::read, "@x"}, {streams, AccessKind::write, "@hc"}};
}

// --- Sinkhorn pre --------------------------------------------------------------------------

HcPreOp HcPreOp::make(const ModelConfig& c, uint64_t rows) {
  HcPreOp op;
  const uint64_t hc = c.hc_mult, h = c.hidden_size;
  const uint64_t mix = ((Size(2) + hc) * hc).value();  // [pre | post | comb]
  op.dims = {rows, hc, h, mix, c.hc_sinkhorn_iters};
  op.streams = stream_rows(0, rows, hc, h);
  op.fn = pool_tensor({mix, width(hc, h)}, DType::f32);
  op.scale = pool_tensor({3}, DType::f32);
  op.bias = pool_tensor({mix}, DType::f32);
  op.post = post_rows(0, rows, hc);
  op.comb = arena_tensor(BufferId::hc_comb, 0, {rows, hc, hc}, DType::f32);
  op.block_in = block_in_rows(0, rows, h);
  return op;
}

std::string HcPreOp::params() const {
  return "hc_pre_sinkhorn(rows=" + u(dims.rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) +
         ",iters=" + u(dims.iters) + ")";
}

std::vector<Access> HcPreOp::accesses() const {
  std::vector<Access> out = {
      {streams, AccessKind::read, "@hc"},   {fn, AccessKind::read, {}},
      {scale, AccessKind::read, {}},        {bias, AccessKind::read, {}},
      {post, AccessKind::write, "hc_post"}, {comb, AccessKind::write, "hc_comb"},
      {block_in, AccessKind::write, "norm"}};
  return out;
}

// --- low-rank carves (§4.7) ----------------------------------------------------------------

HcSplitCarve HcSplitCarve::make(uint64_t rows, uint64_t hc, uint64_t h, uint64_t r) {
  HcSplitCarve c{rows, hc, h, r};
  c.normed = 0;
  c.low = (Size(rows) * hc * h * 4).value();
  c.end = (Size(c.low) + Size(rows) * r * 4).value();
  return c;
}

HcGemmCarve HcGemmCarve::make(uint64_t m, uint64_t hc, uint64_t h, uint64_t r) {
  HcGemmCarve c;
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

// --- low-rank pre, split path --------------------------------------------------------------

HcLowRankSplitOp HcLowRankSplitOp::make(Stage stage, const ModelConfig& c, uint64_t rows) {
  HcLowRankSplitOp op;
  op.stage = stage;
  op.dims = {rows, c.hc_mult, c.hidden_size, c.hc_lowrank};
  op.carve = HcSplitCarve::make(rows, c.hc_mult, c.hidden_size, c.hc_lowrank);
  return op;
}

std::string HcLowRankSplitOp::name() const {
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

std::string HcLowRankSplitOp::params() const {
  return name() + "(rows=" + u(dims.rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) +
         ",r=" + u(dims.r) + ")";
}

std::vector<Access> HcLowRankSplitOp::accesses() const {
  const uint64_t rows = dims.rows, hc = dims.hc, h = dims.h, r = dims.r, w = width(hc, h);
  const TensorRef normed =
      arena_tensor(BufferId::hc_lowrank_scratch, carve.normed, {rows, w}, DType::f32);
  const TensorRef low =
      arena_tensor(BufferId::hc_lowrank_scratch, carve.low, {rows, r}, DType::f32);
  std::vector<Access> out;
  switch (stage) {
    case Stage::norm:
      out = {{stream_rows(0, rows, hc, h), AccessKind::read, "@hc"},
             {pool_tensor({hc, h}, DType::f32), AccessKind::read, {}},
             {normed, AccessKind::write, "hc_normed"}};
      break;
    case Stage::down:
      out = {{normed, AccessKind::read, "hc_normed"},
             {pool_tensor({(Size(r) + hc).value(), w}, DType::f32),
              AccessKind::read,
              {}},  // W_down | W_inject
             {low, AccessKind::write, "hc_low"},
             {post_rows(0, rows, hc), AccessKind::write, "hc_post"}};
      break;
    case Stage::collapse:
      out = {{low, AccessKind::read, "hc_low"},
             {normed, AccessKind::read, "hc_normed"},
             {pool_tensor({w, r}, DType::f32), AccessKind::read, {}},
             {block_in_rows(0, rows, h), AccessKind::write, "norm"}};
      break;
  }
  return out;
}

// --- low-rank pre, GEMM path ---------------------------------------------------------------

HcLowRankSlabOp HcLowRankSlabOp::make(Stage stage, const ModelConfig& c, uint64_t m, uint64_t row0,
                                      uint64_t rows) {
  HcLowRankSlabOp op;
  op.stage = stage;
  op.dims = {row0, rows, c.hc_mult, c.hidden_size, c.hc_lowrank};
  op.carve = HcGemmCarve::make(m, c.hc_mult, c.hidden_size, c.hc_lowrank);
  return op;
}

std::string HcLowRankSlabOp::name() const {
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

std::string HcLowRankSlabOp::params() const {
  return name() + "(row0=" + u(dims.row0) + ",rows=" + u(dims.rows) +
         ",slab_rows=" + u(carve.slab_rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) +
         ",r=" + u(dims.r) + ")";
}

std::vector<Access> HcLowRankSlabOp::accesses() const {
  const uint64_t row0 = dims.row0, rows = dims.rows, hc = dims.hc, h = dims.h, r = dims.r;
  const uint64_t w = width(hc, h);
  auto scratch = [&](uint64_t offset, uint64_t cols) {
    return arena_tensor(BufferId::hc_lowrank_scratch, offset, {rows, cols}, DType::bf16);
  };
  const TensorRef normed = scratch(carve.normed, w), up_pre = scratch(carve.up_pre, w);
  const TensorRef low = scratch(carve.low, r), inj_pre = scratch(carve.inj_pre, hc);
  std::vector<Access> out;
  switch (stage) {
    case Stage::norm:
      out = {{stream_rows(row0, rows, hc, h), AccessKind::read, "@hc"},
             {pool_tensor({hc, h}, DType::f32), AccessKind::read, {}},
             {normed, AccessKind::write, "hc_normed"}};
      break;
    case Stage::down:
      out = {{normed, AccessKind::read, "hc_normed"},
             {pool_tensor({r, w}, DType::bf16), AccessKind::read, {}},
             {low, AccessKind::write, "hc_low"}};
      break;
    case Stage::inject:
      out = {{normed, AccessKind::read, "hc_normed"},
             {pool_tensor({hc, w}, DType::bf16), AccessKind::read, {}},
             {inj_pre, AccessKind::write, "hc_inj_pre"}};
      break;
    case Stage::up:
      out = {{low, AccessKind::read, "hc_low"},
             {pool_tensor({w, r}, DType::bf16), AccessKind::read, {}},
             {up_pre, AccessKind::write, "hc_up_pre"}};
      break;
    case Stage::collapse:
      out = {{up_pre, AccessKind::read, "hc_up_pre"},
             {normed, AccessKind::read, "hc_normed"},
             {inj_pre, AccessKind::read, "hc_inj_pre"},
             {block_in_rows(row0, rows, h), AccessKind::write, "norm"},
             {post_rows(row0, rows, hc), AccessKind::write, "hc_post"}};
      break;
  }
  return out;
}

// --- post ----------------------------------------------------------------------------------

HcPostOp HcPostOp::make(const ModelConfig& c, uint64_t rows) {
  HcPostOp op;
  const uint64_t hc = c.hc_mult, h = c.hidden_size;
  op.dims = {rows, hc, h, c.hc_lowrank > 0};
  op.post = post_rows(0, rows, hc);
  op.comb = arena_tensor(BufferId::hc_comb, 0, {rows, hc, hc}, DType::f32);
  op.block_out = arena_tensor(BufferId::moe_output, 0, {rows, h}, DType::bf16);
  op.streams = stream_rows(0, rows, hc, h);
  return op;
}

std::string HcPostOp::params() const {
  return std::string("hc_post(rows=") + u(dims.rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) +
         ",form=" + (dims.lowrank ? "lowrank" : "sinkhorn") + ")";
}

std::vector<Access> HcPostOp::accesses() const {
  std::vector<Access> out = {{post, AccessKind::read, "hc_post"}};
  if (!dims.lowrank) out.push_back({comb, AccessKind::read, "hc_comb"});  // unused low-rank
  out.push_back({block_out, AccessKind::read, "@block_out"});
  out.push_back({streams, AccessKind::read, "@hc"});
  out.push_back({streams, AccessKind::write, "@hc"});
  return out;
}

// --- head ----------------------------------------------------------------------------------

HcHeadOp HcHeadOp::make(const ModelConfig& c, uint64_t rows) {
  HcHeadOp op;
  const uint64_t hc = c.hc_mult, h = c.hidden_size;
  op.dims = {rows, hc, h};
  op.streams = stream_rows(0, rows, hc, h);
  op.fn = pool_tensor({hc, width(hc, h)}, DType::f32);
  op.output = arena_tensor(BufferId::hidden_states, 0, {rows, h}, DType::bf16);
  return op;
}

std::string HcHeadOp::params() const {
  return "hc_head(rows=" + u(dims.rows) + ",hc=" + u(dims.hc) + ",h=" + u(dims.h) + ")";
}

std::vector<Access> HcHeadOp::accesses() const {
  return {{streams, AccessKind::read, "@hc"},
          {fn, AccessKind::read, {}},
          {output, AccessKind::write, "@hc_head"}};
}

}  // namespace bufferlab
