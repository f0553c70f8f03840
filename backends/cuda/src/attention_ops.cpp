// Host side of the CUDA attention ops (docs/spec/attention.md, ops/attention.h): bind (which
// checks the geometry: hd ≤ kMaxAttnHeadDim, nq % nkv = 0, rotary_dim even and ≤ hd), refuse
// what the kernels cannot address, launch on the default stream. Nothing is allocated: the
// kernels work in their bound operands and static shared memory.
//   staging, cache write   attention_stage.cu
//   prefill, decode        attention_core.cu
//   merge, gate            attention_merge.cu
// `mutant` (the attention kernel mutants of docs/spec/bug-catalogue.md) picks the launchers'
// mutant instantiations; the gate has none.
#include <cmath>
#include <string>

#include "attention_kernels.h"
#include "attention_ops.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

// The stage function's constants; `norm` is the bound q_norm / k_norm (null without qk_norm).
AttnStageArgs stage_args(const AttnGeometry& g, const float* rope, const uint16_t* norm,
                         const uint32_t* positions, uint64_t pos_stride) {
  AttnStageArgs s;
  s.rope = rope;
  s.norm = g.qk_norm ? norm : nullptr;
  s.positions = positions;
  s.pos_stride = pos_stride;
  s.hd = static_cast<uint32_t>(g.hd);
  s.rd = static_cast<uint32_t>(g.rotary_dim);
  s.interleaved = g.rope_interleaved;
  s.mrope = g.mrope;
  s.mrope_interleaved = g.mrope_interleaved;
  s.sec0 = static_cast<uint32_t>(g.mrope_section[0]);
  s.sec1 = static_cast<uint32_t>(g.mrope_section[1]);
  s.sec2 = static_cast<uint32_t>(g.mrope_section[2]);
  s.eps = g.eps;
  return s;
}

// fp32(1/sqrt(hd)): the FP64 value rounded once (ops/attention.h).
float score_scale(uint64_t hd) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
}

template <class Op>
void require_cols(const Op& op, uint64_t col0, uint64_t width, uint64_t row_width,
                  const char* what) {
  if ((Size(col0) + width).value() > row_width)
    throw Error(op.params() + ": the " + what + " columns [" + std::to_string(col0) + ", +" +
                std::to_string(width) + ") do not fit rows of " + std::to_string(row_width));
}

template <class Op>
AttnCacheView cache_view(const Op& op, const KvCacheGeometry& c, const uint16_t* k,
                         const uint16_t* v, const int32_t* table) {
  if (c.block_size == 0) throw Error(op.params() + ": KV cache block size 0");
  AttnCacheView view;
  view.k = k;
  view.v = v;
  view.block_table = table;
  view.block_size = c.block_size;
  view.num_blocks = c.num_blocks;
  view.max_blocks = c.max_blocks;
  return view;
}

}  // namespace

void attn_stage(const Workspace& ws, const AttnStageOp& op, Mutant mutant) {
  const auto& d = op.shape();
  const AttnStageOp::Bound b = op.bind(ws);
  if (d.width != mul(d.heads, op.geom.hd))
    throw Error(op.params() + ": width is not heads · head_dim");
  require_cols(op, d.col0, d.width, d.qkv_dim, "part's");
  AttnStageLaunch a;
  a.src = b.src;
  a.dst = b.dst;
  a.tokens = d.tokens;
  a.rows = d.rows;
  a.heads = d.heads;
  a.src_stride = d.qkv_dim;
  a.col0 = d.col0;
  a.staged = op.staged();
  a.stage = stage_args(op.geom, b.rope, b.norm, b.positions, op.meta_refs.pos_stride);
  launch_attn_stage(a, nullptr, mutant);
}

void attn_cache_write(const Workspace& ws, const AttnCacheWriteOp& op, Mutant mutant) {
  const auto& d = op.shape();
  const AttnCacheWriteOp::Bound b = op.bind(ws);
  const AttnGeometry& g = op.geom;
  const bool qkv = op.source == AttnCacheWriteOp::Source::qkv;
  if (qkv) {
    require_cols(op, g.k_col0, g.kv_width(), b.src_stride, "K");
    require_cols(op, g.v_col0, g.kv_width(), b.src_stride, "V");
  }
  AttnCacheWriteLaunch a;
  a.k_src = b.k_src;
  a.v_src = b.v_src;
  a.src_stride = b.src_stride;
  a.k_col0 = qkv ? g.k_col0 : 0;
  a.v_col0 = qkv ? g.v_col0 : 0;
  a.slots = b.slots;
  a.k_cache = b.k_cache;
  a.v_cache = b.v_cache;
  a.rows = d.rows;
  a.nkv = g.nkv;
  a.cache_slots = d.cache.slots();
  a.staged = qkv;
  a.stage = stage_args(g, b.rope, b.k_norm, b.positions, op.meta_refs.pos_stride);
  launch_attn_cache_write(a, nullptr, mutant);
}

void attn_prefill(const Workspace& ws, const AttnPrefillOp& op, Mutant mutant) {
  const auto& d = op.shape();
  const AttnPrefillOp::Bound b = op.bind(ws);
  AttnPrefillLaunch a;
  a.q = b.q;
  a.k = b.k;
  a.v = b.v;
  a.ctx_lens = b.ctx_lens;
  a.cache = cache_view(op, d.cache, b.k_cache, b.v_cache, b.block_table);
  a.sinks = b.sinks;
  a.out = b.out;
  a.rows = d.launch.rows;
  a.L = op.stream_rows();
  a.nq = d.nq;
  a.nkv = d.nkv;
  a.hd = d.hd;
  a.window = d.sliding ? d.window : 0;
  a.scale = score_scale(d.hd);
  launch_attn_prefill(a, nullptr, mutant);
}

void attn_decode(const Workspace& ws, const AttnDecodeOp& op, Mutant mutant) {
  const auto& d = op.shape();
  const AttnDecodeOp::Bound b = op.bind(ws);
  require_cols(op, 0, op.geom.q_width(), d.qkv_dim, "Q");
  if (d.splits == 0) throw Error(op.params() + ": zero splits");
  AttnDecodeLaunch a;
  a.qkv = b.qkv;
  a.seq_lens = b.seq_lens;
  a.cache = cache_view(op, d.cache, b.k_cache, b.v_cache, b.block_table);
  a.sinks = b.sinks;
  a.out = b.out;
  a.partials = b.partials;
  a.rows = d.rows;
  a.live = d.live;
  a.qkv_dim = d.qkv_dim;
  a.nq = d.nq;
  a.nkv = d.nkv;
  a.hd = d.hd;
  a.window = d.sliding ? d.window : 0;
  a.splits = d.splits;
  a.scale = score_scale(d.hd);
  a.stage = stage_args(op.geom, b.rope, b.q_norm, b.positions, op.meta_refs.pos_stride);
  launch_attn_decode(a, nullptr, mutant);
}

void splitk_merge(const Workspace& ws, const SplitKMergeOp& op, Mutant mutant) {
  const auto& d = op.shape();
  const SplitKMergeOp::Bound b = op.bind(ws);
  SplitKMergeLaunch a;
  a.partials = b.partials;
  a.sinks = b.sinks;
  a.out = b.out;
  a.rows = d.rows;
  a.live = d.live;
  a.nq = d.nq;
  a.hd = d.hd;
  a.splits = d.splits;
  launch_splitk_merge(a, nullptr, mutant);
}

void attn_gate(const Workspace& ws, const AttnGateOp& op, Mutant /*mutant*/) {
  const auto& d = op.shape();
  const AttnGateOp::Bound b = op.bind(ws);
  AttnGateLaunch a;
  a.qkv = b.qkv;
  a.attn = b.attn;
  a.rows = d.rows;
  a.width = mul(d.nq, d.hd);
  a.qkv_dim = d.qkv_dim;
  a.gate_col0 = d.gate_col0;
  launch_attn_gate(a, nullptr);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
