// Attention op descriptors: operands from op semantics (config dimensions, the pass rows) —
// never from BufferSizes — so the verifier can compare the two.
#include "bufferlab/core/ops/attention.h"

#include <algorithm>
#include <string>
#include <utility>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab {
namespace {

// Byte offset of row `row` of a row-major [·, width] tensor of `t`.
uint64_t row_offset(uint64_t row, uint64_t width, DType t) {
  return (Size(row) * width * dtype_bytes(t)).value();
}

// "name(k=v,...)": the printable parameter string of an op.
class Params {
 public:
  explicit Params(std::string name) : s_(std::move(name) + "(") {}
  Params& operator()(const char* key, uint64_t v) {
    if (!first_) s_ += ',';
    first_ = false;
    s_ += key;
    s_ += '=';
    s_ += std::to_string(v);
    return *this;
  }
  std::string str() const { return s_ + ")"; }

 private:
  std::string s_;
  bool first_ = true;
};

struct Heads {
  uint64_t nq, nkv, hd;
  uint64_t q_width() const { return (Size(nq) * hd).value(); }
  uint64_t kv_width() const { return (Size(nkv) * hd).value(); }
};
Heads heads(const ModelConfig& c) {
  return {c.num_attention_heads, c.num_key_value_heads, c.head_dim};
}

}  // namespace

// ---- AttnStageOp -------------------------------------------------------------------------

AttnStageOp AttnStageOp::make(const ModelConfig& config, Part part, uint64_t src_row0,
                              uint64_t tokens, bool padded_rows, uint64_t dst_row0,
                              std::vector<Access> meta) {
  const Heads h = heads(config);
  AttnStageOp op;
  op.part = part;
  op.meta = std::move(meta);
  Shape& s = op.dims;
  s.src_row0 = src_row0;
  s.tokens = tokens;
  s.dst_row0 = dst_row0;
  s.qkv_dim = config.qkv_dim().value();
  // [Q (, gate) | K | V] columns: the gate doubles the Q part (docs/spec/buffers.md §1 q_proj_mul).
  const uint64_t q_cols = (Size(h.q_width()) * config.q_proj_mul()).value();
  BufferId dst = BufferId::ssm_qkvz;
  switch (part) {
    case Part::q_copy:
      s.col0 = 0;
      s.width = h.q_width();
      dst = BufferId::ssm_deinterleaved;
      break;
    case Part::k_scratch:
      s.col0 = q_cols;
      s.width = h.kv_width();
      break;
    case Part::v_scratch:
      s.col0 = (Size(q_cols) + h.kv_width()).value();
      s.width = h.kv_width();
      break;
  }
  // Only K and V follow the projection's row padding (docs/spec/buffers.md §5 ssm_qkvz); the Q copy
  // is t rows.
  s.rows = (padded_rows && part != Part::q_copy) ? ceil16(tokens).value() : tokens;
  op.src = arena_tensor(BufferId::qkv_output, row_offset(src_row0, s.qkv_dim, DType::bf16),
                        {tokens, s.qkv_dim}, DType::bf16);
  op.dst =
      arena_tensor(dst, row_offset(dst_row0, s.width, DType::bf16), {tokens, s.width}, DType::bf16);
  op.pad = arena_tensor(dst, row_offset((Size(dst_row0) + tokens).value(), s.width, DType::bf16),
                        {s.rows - tokens, s.width}, DType::bf16);
  return op;
}

std::string AttnStageOp::name() const {
  switch (part) {
    case Part::q_copy:
      return "attn_q_copy";
    case Part::k_scratch:
      return "attn_k_scratch";
    case Part::v_scratch:
      return "attn_v_scratch";
  }
  return "attn_stage";
}

std::string AttnStageOp::params() const {
  return Params(name())("t", dims.tokens)("rows", dims.rows)("src_row0", dims.src_row0)(
             "dst_row0", dims.dst_row0)("qkv_dim", dims.qkv_dim)("col0", dims.col0)("width",
                                                                                    dims.width)
      .str();
}

std::vector<Access> AttnStageOp::accesses() const {
  const char* value = part == Part::q_copy      ? attn_value::q_copy
                      : part == Part::k_scratch ? attn_value::k_scratch
                                                : attn_value::v_scratch;
  std::vector<Access> out{{src, AccessKind::read, attn_value::qkv}};
  out.insert(out.end(), meta.begin(), meta.end());
  out.push_back({dst, AccessKind::write, value});
  if (dims.rows > dims.tokens) out.push_back({pad, AccessKind::phantom_write});
  return out;
}

// ---- AttnPrefillOp -----------------------------------------------------------------------

AttnPrefillOp AttnPrefillOp::make(const ModelConfig& config, bool sliding,
                                  const PrefillLaunch& launch, uint64_t v_row0,
                                  std::optional<TensorRef> lists, std::vector<Access> meta) {
  const Heads h = heads(config);
  if (launch.streams == 0 || launch.rows == 0 || launch.tokens % launch.streams != 0 ||
      (Size(launch.row0) + launch.rows).value() > launch.tokens)
    throw Error("attn_prefill: launch rows [" + std::to_string(launch.row0) + ", +" +
                std::to_string(launch.rows) + ") outside " + std::to_string(launch.streams) +
                " equal streams of " + std::to_string(launch.tokens) + " tokens");
  AttnPrefillOp op;
  op.dims = Shape{launch, h.nq, h.nkv, h.hd, v_row0, lists ? lists->shape.at(1) : 0, sliding};
  op.lists = std::move(lists);
  op.meta = std::move(meta);
  const uint64_t qw = h.q_width(), kvw = h.kv_width();
  op.q = arena_tensor(BufferId::ssm_deinterleaved, row_offset(launch.row0, qw, DType::bf16),
                      {launch.rows, qw}, DType::bf16);
  // Causal: stream b's queries up to row `end` read its K/V rows [b·L, min((b+1)·L, end)).
  const uint64_t L = launch.tokens / launch.streams;
  const uint64_t end = launch.row0 + launch.rows;
  for (uint64_t b = launch.row0 / L; b * L < end; ++b) {
    const uint64_t first = b * L, last = std::min(first + L, end);
    op.k.push_back(arena_tensor(BufferId::ssm_qkvz, row_offset(first, kvw, DType::bf16),
                                {last - first, kvw}, DType::bf16));
    op.v.push_back(arena_tensor(BufferId::ssm_qkvz,
                                row_offset((Size(v_row0) + first).value(), kvw, DType::bf16),
                                {last - first, kvw}, DType::bf16));
  }
  op.kv_cache = pool_tensor({launch.tokens, 2, kvw}, DType::bf16);
  op.out =
      arena_tensor(BufferId::attn_output,
                   row_offset((Size(launch.decode_rows) + launch.row0).value(), qw, DType::bf16),
                   {launch.rows, qw}, DType::bf16);
  return op;
}

std::string AttnPrefillOp::params() const {
  const PrefillLaunch& l = dims.launch;
  return Params(name())("decode_rows", l.decode_rows)("t", l.tokens)("streams", l.streams)(
             "row0", l.row0)("rows", l.rows)("nq", dims.nq)("nkv", dims.nkv)("hd", dims.hd)(
             "v_row0", dims.v_row0)("list_width", dims.list_width)("sliding", dims.sliding)
      .str();
}

std::vector<Access> AttnPrefillOp::accesses() const {
  std::vector<Access> out{{q, AccessKind::read, attn_value::q_copy}};
  for (const TensorRef& t : k) out.push_back({t, AccessKind::read, attn_value::k_scratch});
  for (const TensorRef& t : v) out.push_back({t, AccessKind::read, attn_value::v_scratch});
  out.push_back({kv_cache, AccessKind::read});
  if (lists) out.push_back({*lists, AccessKind::read, attn_value::qsa_lists});
  out.insert(out.end(), meta.begin(), meta.end());
  out.push_back({this->out, AccessKind::write, attn_value::attn});
  return out;
}

// ---- AttnDecodeOp ------------------------------------------------------------------------

AttnDecodeOp AttnDecodeOp::make(const ModelConfig& config, bool sliding, uint64_t rows,
                                uint64_t splits, bool verify, std::vector<Access> meta) {
  const Heads h = heads(config);
  AttnDecodeOp op;
  // Split-K serves decode and mixed steps only (docs/spec/buffers.md §2 "split-K slots").
  op.dims = Shape{rows,   h.nq,   h.nkv, h.hd, config.qkv_dim().value(), verify ? 1 : splits,
                  verify, sliding};
  op.meta = std::move(meta);
  op.qkv = arena_tensor(BufferId::qkv_output, 0, {rows, op.dims.qkv_dim}, DType::bf16);
  op.kv_cache = pool_tensor({rows, 2, h.kv_width()}, DType::bf16);
  // Slot ((seq·nq)+head)·splits+split, seq < rows: slots [0, rows·nq·splits) back to back.
  op.out = op.split_k()
               ? arena_tensor(BufferId::splitk_workspace, 0,
                              {rows, h.nq, op.dims.splits, (Size(h.hd) + 2).value()}, DType::f32)
               : arena_tensor(BufferId::attn_output, 0, {rows, h.q_width()}, DType::bf16);
  return op;
}

std::string AttnDecodeOp::params() const {
  return Params(name())("rows", dims.rows)("nq", dims.nq)("nkv", dims.nkv)("hd", dims.hd)(
             "qkv_dim", dims.qkv_dim)("splits", dims.splits)("sliding", dims.sliding)
      .str();
}

std::vector<Access> AttnDecodeOp::accesses() const {
  std::vector<Access> acc{{qkv, AccessKind::read, attn_value::qkv}, {kv_cache, AccessKind::read}};
  acc.insert(acc.end(), meta.begin(), meta.end());
  acc.push_back({out, AccessKind::write, split_k() ? attn_value::partials : attn_value::attn});
  return acc;
}

// ---- SplitKMergeOp -----------------------------------------------------------------------

SplitKMergeOp SplitKMergeOp::make(const ModelConfig& config, uint64_t rows, uint64_t splits) {
  const Heads h = heads(config);
  SplitKMergeOp op;
  op.dims = Shape{rows, h.nq, h.hd, splits};
  op.partials = arena_tensor(BufferId::splitk_workspace, 0,
                             {rows, h.nq, splits, (Size(h.hd) + 2).value()}, DType::f32);
  op.out = arena_tensor(BufferId::attn_output, 0, {rows, h.q_width()}, DType::bf16);
  return op;
}

std::string SplitKMergeOp::params() const {
  return Params(name())("rows", dims.rows)("nq", dims.nq)("hd", dims.hd)("splits", dims.splits)
      .str();
}

std::vector<Access> SplitKMergeOp::accesses() const {
  return {{partials, AccessKind::read, attn_value::partials},
          {out, AccessKind::write, attn_value::attn}};
}

// ---- AttnGateOp --------------------------------------------------------------------------

AttnGateOp AttnGateOp::make(const ModelConfig& config, uint64_t rows) {
  const Heads h = heads(config);
  AttnGateOp op;
  op.dims = Shape{rows, h.nq, h.hd, config.qkv_dim().value()};
  op.gate = arena_tensor(BufferId::qkv_output, 0, {rows, op.dims.qkv_dim}, DType::bf16);
  op.attn = arena_tensor(BufferId::attn_output, 0, {rows, h.q_width()}, DType::bf16);
  return op;
}

std::string AttnGateOp::params() const {
  return Params(name())("rows", dims.rows)("nq", dims.nq)("hd", dims.hd)("qkv_dim", dims.qkv_dim)
      .str();
}

std::vector<Access> AttnGateOp::accesses() const {
  return {{gate, AccessKind::read, attn_value::qkv},
          {attn, AccessKind::read, attn_value::attn},
          {attn, AccessKind::write, attn_value::attn_gated}};
}

}  // namespace bufferlab
