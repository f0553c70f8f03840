// Attention op descriptors: operands from op semantics (config dimensions, the pass rows) —
// never from BufferSizes — so the verifier can compare the two.
#include "bufferlab/core/ops/attention.h"

#include <algorithm>
#include <string>
#include <utility>

#include "bind_check.h"
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

using detail::bind_one;
using detail::LazyParams;

bool present(const TensorRef& t) { return !t.shape.empty(); }

// A metadata or weight operand the kernel needs: present, of the exact size, resolved.
template <class T>
T* bind_needed(const Workspace& ws, const TensorRef& t, const char* what, uint64_t elements,
               DType type, const LazyParams& p) {
  if (!present(t)) throw Error(p.str() + ": no " + what + " operand (a plan's op has no kernel)");
  return bind_one<T>(ws, t, elements, type, p);
}

void add_read(std::vector<Access>& out, const TensorRef& t, const char* value = "") {
  if (present(t)) out.push_back({t, AccessKind::read, value});
}

uint64_t cache_elements(const KvCacheGeometry& c, uint64_t kv_width) {
  return mul(c.slots(), kv_width);
}

}  // namespace

// ---- AttnGeometry, KvCacheGeometry, AttnWeights ------------------------------------------

AttnGeometry AttnGeometry::of(const ModelConfig& c) {
  AttnGeometry g;
  g.nq = c.num_attention_heads;
  g.nkv = c.num_key_value_heads;
  g.hd = c.head_dim;
  g.rotary_dim = c.rotary_dim();
  g.qkv_dim = c.qkv_dim().value();
  g.gated = c.attn_gated;
  const uint64_t q_width = (Size(g.nq) * g.hd).value();
  g.gate_col0 = g.gated ? q_width : 0;
  g.k_col0 = (Size(q_width) * c.q_proj_mul()).value();
  g.v_col0 = (Size(g.k_col0) + Size(g.nkv) * g.hd).value();
  g.window = c.sliding_window;
  g.qk_norm = c.qk_norm;
  g.rope_interleaved = c.rope_interleaved;
  g.sinks = c.attn_sinks;
  g.mrope = c.uses_mrope();
  g.mrope_interleaved = c.mrope_interleaved;
  g.mrope_section = c.mrope_section;
  g.eps = static_cast<float>(c.rms_norm_eps);
  return g;
}

void AttnGeometry::check(const std::string& op) const {
  const auto fail = [&](const std::string& what) { throw Error(op + ": " + what); };
  if (nkv == 0 || nq % nkv != 0)
    fail("num_attention_heads = " + std::to_string(nq) +
         " is not a multiple of num_key_value_heads = " + std::to_string(nkv));
  if (hd == 0 || hd > kMaxAttnHeadDim)
    fail("head_dim = " + std::to_string(hd) + " is outside the kernels' [1, " +
         std::to_string(kMaxAttnHeadDim) + "]");
  if (rotary_dim % 2 != 0 || rotary_dim > hd)
    fail("rotary_dim = " + std::to_string(rotary_dim) +
         " is odd or above head_dim = " + std::to_string(hd));
  if (mrope && mrope_section[0] + mrope_section[1] + mrope_section[2] != rotary_dim / 2)
    fail("mrope_section sums to " +
         std::to_string(mrope_section[0] + mrope_section[1] + mrope_section[2]) +
         ", not rotary_dim / 2 = " + std::to_string(rotary_dim / 2));
}

std::string AttnGeometry::to_string() const {
  std::string s = "nq=" + std::to_string(nq) + ",nkv=" + std::to_string(nkv) +
                  ",hd=" + std::to_string(hd) + ",rd=" + std::to_string(rotary_dim);
  if (gated) s += ",gated";
  if (qk_norm) s += ",qk_norm";
  if (rope_interleaved) s += ",rope_interleaved";
  if (mrope)
    s += std::string(",mrope") + (mrope_interleaved ? "_interleaved" : "") + "=" +
         std::to_string(mrope_section[0]) + "/" + std::to_string(mrope_section[1]) + "/" +
         std::to_string(mrope_section[2]);
  if (sinks) s += ",sinks";
  return s + ",W=" + std::to_string(window);
}

uint64_t KvCacheGeometry::slots() const { return mul(num_blocks, block_size); }

AttnWeights AttnWeights::make(const AttnGeometry& g, const KvCacheGeometry& cache) {
  AttnWeights w;
  w.rope = pool_tensor({g.rope_entries()}, DType::f32);
  if (g.qk_norm) {
    w.q_norm = pool_tensor({g.hd}, DType::bf16);
    w.k_norm = pool_tensor({g.hd}, DType::bf16);
  }
  if (g.sinks) w.sinks = pool_tensor({g.nq}, DType::f32);
  w.k_cache = pool_tensor({cache.num_blocks, cache.block_size, g.nkv, g.hd}, DType::bf16);
  w.v_cache = w.k_cache;
  return w;
}

// ---- AttnStageOp -------------------------------------------------------------------------

AttnStageOp AttnStageOp::make(const ModelConfig& config, Part part, uint64_t src_row0,
                              uint64_t tokens, bool padded_rows, uint64_t dst_row0,
                              std::vector<Access> meta, AttnMetaRefs meta_refs) {
  const Heads h = heads(config);
  AttnStageOp op;
  op.part = part;
  op.geom = AttnGeometry::of(config);
  op.meta = std::move(meta);
  op.meta_refs = std::move(meta_refs);
  Shape& s = op.dims;
  s.src_row0 = src_row0;
  s.tokens = tokens;
  s.dst_row0 = dst_row0;
  s.qkv_dim = config.qkv_dim().value();
  BufferId dst = BufferId::ssm_qkvz;
  switch (part) {
    case Part::q_copy:
      s.col0 = 0;
      s.width = h.q_width();
      s.heads = h.nq;
      dst = BufferId::ssm_deinterleaved;
      break;
    case Part::k_scratch:
      s.col0 = op.geom.k_col0;
      s.width = h.kv_width();
      s.heads = h.nkv;
      break;
    case Part::v_scratch:
      s.col0 = op.geom.v_col0;
      s.width = h.kv_width();
      s.heads = h.nkv;
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
  // The stage function's weights: the table (and the head norm) of the part it stages.
  const AttnWeights all = AttnWeights::make(op.geom, KvCacheGeometry{1, 0, 0});
  if (op.staged()) {
    op.weights.rope = all.rope;
    op.weights.q_norm = part == Part::q_copy ? all.q_norm : TensorRef{};
    op.weights.k_norm = part == Part::k_scratch ? all.k_norm : TensorRef{};
  }
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
             .str() +
         "[" + geom.to_string() + "]";
}

std::vector<Access> AttnStageOp::accesses() const {
  const char* value = part == Part::q_copy      ? attn_value::q_copy
                      : part == Part::k_scratch ? attn_value::k_scratch
                                                : attn_value::v_scratch;
  std::vector<Access> out{{src, AccessKind::read, attn_value::qkv}};
  out.insert(out.end(), meta.begin(), meta.end());
  if (staged()) {
    add_read(out, meta_refs.positions, "@meta.positions");
    add_read(out, weights.rope);
    add_read(out, part == Part::q_copy ? weights.q_norm : weights.k_norm);
  }
  out.push_back({dst, AccessKind::write, value});
  if (dims.rows > dims.tokens) out.push_back({pad, AccessKind::phantom_write});
  return out;
}

AttnStageOp::Bound AttnStageOp::bind(const Workspace& ws) const {
  const LazyParams p(*this);
  geom.check(params());
  Bound b;
  b.src = bind_one<const uint16_t>(ws, src, mul(dims.tokens, dims.qkv_dim), DType::bf16, p);
  // dst and pad are adjacent rows of one buffer: the kernel writes [rows, width] from dst.
  b.dst = bind_one<uint16_t>(ws, dst, mul(dims.tokens, dims.width), DType::bf16, p);
  if (dims.rows > dims.tokens)
    bind_one<uint16_t>(ws, pad, mul(dims.rows - dims.tokens, dims.width), DType::bf16, p);
  if (staged()) {
    if (meta_refs.pos_stride < dims.tokens)
      throw Error(p.str() + ": position stride " + std::to_string(meta_refs.pos_stride) +
                  " is below the " + std::to_string(dims.tokens) + " tokens");
    b.positions =
        bind_needed<const uint32_t>(ws, meta_refs.positions, "positions",
                                    mul(geom.pos_streams(), meta_refs.pos_stride), DType::u32, p);
    b.rope = bind_needed<const float>(ws, weights.rope, "RoPE table", geom.rope_entries(),
                                      DType::f32, p);
    if (geom.qk_norm)
      b.norm =
          bind_needed<const uint16_t>(ws, part == Part::q_copy ? weights.q_norm : weights.k_norm,
                                      "qk_norm weight", geom.hd, DType::bf16, p);
  }
  return b;
}

// ---- AttnCacheWriteOp --------------------------------------------------------------------

AttnCacheWriteOp AttnCacheWriteOp::make(const ModelConfig& config, Source source, uint64_t src_row0,
                                        uint64_t rows, uint64_t v_row0,
                                        const KvCacheGeometry& cache, std::vector<Access> meta,
                                        AttnMetaRefs meta_refs) {
  AttnCacheWriteOp op;
  op.source = source;
  op.geom = AttnGeometry::of(config);
  op.dims = Shape{rows, src_row0, v_row0, op.geom.qkv_dim, cache};
  op.meta = std::move(meta);
  op.meta_refs = std::move(meta_refs);
  const uint64_t kvw = op.geom.kv_width();
  if (source == Source::scratch) {
    op.k_src = arena_tensor(BufferId::ssm_qkvz, 0, {rows, kvw}, DType::bf16);
    op.v_src = arena_tensor(BufferId::ssm_qkvz, row_offset(v_row0, kvw, DType::bf16), {rows, kvw},
                            DType::bf16);
  } else {
    op.k_src =
        arena_tensor(BufferId::qkv_output, row_offset(src_row0, op.geom.qkv_dim, DType::bf16),
                     {rows, op.geom.qkv_dim}, DType::bf16);
    op.v_src = op.k_src;
  }
  const AttnWeights all = AttnWeights::make(op.geom, cache);
  op.weights.k_cache = all.k_cache;
  op.weights.v_cache = all.v_cache;
  if (source == Source::qkv) {
    op.weights.rope = all.rope;
    op.weights.k_norm = all.k_norm;
  }
  return op;
}

std::string AttnCacheWriteOp::params() const {
  return Params(name())("rows", dims.rows)("src_row0", dims.src_row0)("v_row0", dims.v_row0)(
             "qkv", source == Source::qkv)("block_size", dims.cache.block_size)(
             "blocks", dims.cache.num_blocks)
             .str() +
         "[" + geom.to_string() + "]";
}

std::vector<Access> AttnCacheWriteOp::accesses() const {
  std::vector<Access> out;
  if (source == Source::scratch) {
    out.push_back({k_src, AccessKind::read, attn_value::k_scratch});
    out.push_back({v_src, AccessKind::read, attn_value::v_scratch});
  } else {
    out.push_back({k_src, AccessKind::read, attn_value::qkv});
    add_read(out, meta_refs.positions, "@meta.positions");
    add_read(out, weights.rope);
    add_read(out, weights.k_norm);
  }
  out.insert(out.end(), meta.begin(), meta.end());
  add_read(out, meta_refs.slots, "@meta.slots");
  // The slots are data: the footprint is the whole cache the op may write.
  out.push_back({weights.k_cache, AccessKind::write});
  out.push_back({weights.v_cache, AccessKind::write});
  return out;
}

AttnCacheWriteOp::Bound AttnCacheWriteOp::bind(const Workspace& ws) const {
  const LazyParams p(*this);
  geom.check(params());
  Bound b;
  const uint64_t kvw = geom.kv_width();
  const bool qkv = source == Source::qkv;
  b.src_stride = qkv ? dims.qkv_dim : kvw;
  b.k_src = bind_one<const uint16_t>(ws, k_src, mul(dims.rows, b.src_stride), DType::bf16, p);
  b.v_src = bind_one<const uint16_t>(ws, v_src, mul(dims.rows, b.src_stride), DType::bf16, p);
  if (qkv) {
    // The source rows start at the row; the kernel adds the K / V column offsets.
    if (meta_refs.pos_stride < dims.rows)
      throw Error(p.str() + ": position stride " + std::to_string(meta_refs.pos_stride) +
                  " is below the " + std::to_string(dims.rows) + " rows");
    b.positions =
        bind_needed<const uint32_t>(ws, meta_refs.positions, "positions",
                                    mul(geom.pos_streams(), meta_refs.pos_stride), DType::u32, p);
    b.rope = bind_needed<const float>(ws, weights.rope, "RoPE table", geom.rope_entries(),
                                      DType::f32, p);
    if (geom.qk_norm)
      b.k_norm =
          bind_needed<const uint16_t>(ws, weights.k_norm, "k_norm weight", geom.hd, DType::bf16, p);
  }
  b.slots = bind_needed<const int64_t>(ws, meta_refs.slots, "slots", dims.rows, DType::i64, p);
  const uint64_t cache_n = cache_elements(dims.cache, kvw);
  b.k_cache = bind_needed<uint16_t>(ws, weights.k_cache, "K cache", cache_n, DType::bf16, p);
  b.v_cache = bind_needed<uint16_t>(ws, weights.v_cache, "V cache", cache_n, DType::bf16, p);
  return b;
}

// ---- AttnPrefillOp -----------------------------------------------------------------------

AttnPrefillOp AttnPrefillOp::make(const ModelConfig& config, bool sliding,
                                  const PrefillLaunch& launch, uint64_t v_row0,
                                  const KvCacheGeometry& cache, std::optional<TensorRef> lists,
                                  std::vector<Access> meta, AttnMetaRefs meta_refs) {
  const Heads h = heads(config);
  if (launch.streams == 0 || launch.rows == 0 || launch.tokens % launch.streams != 0 ||
      (Size(launch.row0) + launch.rows).value() > launch.tokens)
    throw Error("attn_prefill: launch rows [" + std::to_string(launch.row0) + ", +" +
                std::to_string(launch.rows) + ") outside " + std::to_string(launch.streams) +
                " equal streams of " + std::to_string(launch.tokens) + " tokens");
  AttnPrefillOp op;
  op.geom = AttnGeometry::of(config);
  op.dims = Shape{launch,        h.nq,
                  h.nkv,         h.hd,
                  v_row0,        lists ? lists->shape.at(1) : 0,
                  sliding,       sliding ? op.geom.window : 0,
                  op.geom.sinks, cache};
  op.lists = std::move(lists);
  op.meta = std::move(meta);
  op.meta_refs = std::move(meta_refs);
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
  const AttnWeights all = AttnWeights::make(op.geom, cache);
  op.weights.k_cache = all.k_cache;
  op.weights.v_cache = all.v_cache;
  op.weights.sinks = all.sinks;
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
             "v_row0", dims.v_row0)("list_width", dims.list_width)("sliding", dims.sliding)(
             "window", dims.window)("sinks", dims.sinks)("block_size", dims.cache.block_size)(
             "blocks", dims.cache.num_blocks)("max_blocks", dims.cache.max_blocks)
             .str() +
         "[" + geom.to_string() + "]";
}

std::vector<Access> AttnPrefillOp::accesses() const {
  std::vector<Access> out{{q, AccessKind::read, attn_value::q_copy}};
  for (const TensorRef& t : k) out.push_back({t, AccessKind::read, attn_value::k_scratch});
  for (const TensorRef& t : v) out.push_back({t, AccessKind::read, attn_value::v_scratch});
  // The prefix keys are data (ctx_lens, block table): the footprint is the whole cache.
  out.push_back({weights.k_cache, AccessKind::read});
  out.push_back({weights.v_cache, AccessKind::read});
  add_read(out, weights.sinks);
  if (lists) out.push_back({*lists, AccessKind::read, attn_value::qsa_lists});
  out.insert(out.end(), meta.begin(), meta.end());
  add_read(out, meta_refs.lens, "@meta.kv_lens");
  add_read(out, meta_refs.block_table, "@meta.block_table");
  out.push_back({this->out, AccessKind::write, attn_value::attn});
  return out;
}

AttnPrefillOp::Bound AttnPrefillOp::bind(const Workspace& ws) const {
  const LazyParams p(*this);
  geom.check(params());
  const PrefillLaunch& l = dims.launch;
  if (lists || l.row0 != 0 || l.rows != l.tokens)
    throw Error(p.str() + ": the QSA indexer's slabs have no attention kernel yet");
  Bound b;
  const uint64_t kvw = geom.kv_width(), streams = l.streams;
  b.q = bind_one<const uint16_t>(ws, q, mul(l.rows, geom.q_width()), DType::bf16, p);
  // The streams' K (V) rows are back to back from stream 0's: one pointer, each part checked.
  for (uint64_t s = 0; s < k.size(); ++s) {
    bind_one<const uint16_t>(ws, k[s], mul(k[s].shape.at(0), kvw), DType::bf16, p);
    bind_one<const uint16_t>(ws, v[s], mul(v[s].shape.at(0), kvw), DType::bf16, p);
  }
  b.k = ws.data<const uint16_t>(k.front());
  b.v = ws.data<const uint16_t>(v.front());
  b.ctx_lens = bind_needed<const int32_t>(ws, meta_refs.lens, "ctx_lens", streams, DType::i32, p);
  b.block_table = bind_needed<const int32_t>(ws, meta_refs.block_table, "block table",
                                             mul(streams, dims.cache.max_blocks), DType::i32, p);
  const uint64_t cache_n = cache_elements(dims.cache, kvw);
  b.k_cache = bind_needed<const uint16_t>(ws, weights.k_cache, "K cache", cache_n, DType::bf16, p);
  b.v_cache = bind_needed<const uint16_t>(ws, weights.v_cache, "V cache", cache_n, DType::bf16, p);
  if (geom.sinks)
    b.sinks = bind_needed<const float>(ws, weights.sinks, "sinks", geom.nq, DType::f32, p);
  b.out = bind_one<uint16_t>(ws, out, mul(l.rows, geom.q_width()), DType::bf16, p);
  return b;
}

// ---- AttnDecodeOp ------------------------------------------------------------------------

AttnDecodeOp AttnDecodeOp::make(const ModelConfig& config, bool sliding, uint64_t rows,
                                uint64_t live, uint64_t splits, bool verify,
                                const KvCacheGeometry& cache, std::vector<Access> meta,
                                AttnMetaRefs meta_refs) {
  const Heads h = heads(config);
  if (live > rows)
    throw Error("attn_decode: " + std::to_string(live) + " live rows of " + std::to_string(rows) +
                " launched");
  AttnDecodeOp op;
  op.geom = AttnGeometry::of(config);
  // Split-K serves decode and mixed steps only (docs/spec/buffers.md §2 "split-K slots").
  op.dims = Shape{rows,
                  live,
                  h.nq,
                  h.nkv,
                  h.hd,
                  config.qkv_dim().value(),
                  verify ? 1 : splits,
                  verify,
                  sliding,
                  sliding ? op.geom.window : 0,
                  op.geom.sinks,
                  cache};
  op.meta = std::move(meta);
  op.meta_refs = std::move(meta_refs);
  op.qkv = arena_tensor(BufferId::qkv_output, 0, {rows, op.dims.qkv_dim}, DType::bf16);
  const AttnWeights all = AttnWeights::make(op.geom, cache);
  op.weights.k_cache = all.k_cache;
  op.weights.v_cache = all.v_cache;
  op.weights.rope = all.rope;
  op.weights.q_norm = all.q_norm;
  // With split-K the sink joins in the merge (docs/spec/attention.md §4).
  if (op.dims.splits == 1) op.weights.sinks = all.sinks;
  // Slot ((row·nq)+head)·splits+split, row < rows: slots [0, rows·nq·splits) back to back.
  op.out = op.split_k()
               ? arena_tensor(BufferId::splitk_workspace, 0,
                              {rows, h.nq, op.dims.splits, (Size(h.hd) + 2).value()}, DType::f32)
               : arena_tensor(BufferId::attn_output, 0, {rows, h.q_width()}, DType::bf16);
  return op;
}

std::string AttnDecodeOp::params() const {
  return Params(name())("rows", dims.rows)("live", dims.live)("nq", dims.nq)("nkv", dims.nkv)(
             "hd", dims.hd)("qkv_dim", dims.qkv_dim)("splits", dims.splits)(
             "sliding", dims.sliding)("window", dims.window)("sinks", dims.sinks)(
             "block_size", dims.cache.block_size)("blocks", dims.cache.num_blocks)(
             "max_blocks", dims.cache.max_blocks)
             .str() +
         "[" + geom.to_string() + "]";
}

std::vector<Access> AttnDecodeOp::accesses() const {
  std::vector<Access> acc{{qkv, AccessKind::read, attn_value::qkv}};
  acc.push_back({weights.k_cache, AccessKind::read});
  acc.push_back({weights.v_cache, AccessKind::read});
  add_read(acc, weights.rope);
  add_read(acc, weights.q_norm);
  add_read(acc, weights.sinks);
  acc.insert(acc.end(), meta.begin(), meta.end());
  add_read(acc, meta_refs.positions, "@meta.positions");
  add_read(acc, meta_refs.lens, "@meta.seq_lens");
  add_read(acc, meta_refs.block_table, "@meta.block_table");
  acc.push_back({out, AccessKind::write, split_k() ? attn_value::partials : attn_value::attn});
  return acc;
}

AttnDecodeOp::Bound AttnDecodeOp::bind(const Workspace& ws) const {
  const LazyParams p(*this);
  geom.check(params());
  Bound b;
  const uint64_t rows = dims.rows;
  b.qkv = bind_one<const uint16_t>(ws, qkv, mul(rows, dims.qkv_dim), DType::bf16, p);
  if (meta_refs.pos_stride < rows)
    throw Error(p.str() + ": position stride " + std::to_string(meta_refs.pos_stride) +
                " is below the " + std::to_string(rows) + " rows");
  b.positions =
      bind_needed<const uint32_t>(ws, meta_refs.positions, "positions",
                                  mul(geom.pos_streams(), meta_refs.pos_stride), DType::u32, p);
  b.seq_lens = bind_needed<const int32_t>(ws, meta_refs.lens, "seq_lens", rows, DType::i32, p);
  b.block_table = bind_needed<const int32_t>(ws, meta_refs.block_table, "block table",
                                             mul(rows, dims.cache.max_blocks), DType::i32, p);
  const uint64_t cache_n = cache_elements(dims.cache, geom.kv_width());
  b.k_cache = bind_needed<const uint16_t>(ws, weights.k_cache, "K cache", cache_n, DType::bf16, p);
  b.v_cache = bind_needed<const uint16_t>(ws, weights.v_cache, "V cache", cache_n, DType::bf16, p);
  b.rope =
      bind_needed<const float>(ws, weights.rope, "RoPE table", geom.rope_entries(), DType::f32, p);
  if (geom.qk_norm)
    b.q_norm =
        bind_needed<const uint16_t>(ws, weights.q_norm, "q_norm weight", geom.hd, DType::bf16, p);
  if (geom.sinks && !split_k())
    b.sinks = bind_needed<const float>(ws, weights.sinks, "sinks", geom.nq, DType::f32, p);
  const uint64_t hd2 = (Size(dims.hd) + 2).value();
  if (split_k())
    b.partials =
        bind_one<float>(ws, out, mul(mul(rows, dims.nq), mul(dims.splits, hd2)), DType::f32, p);
  else
    b.out = bind_one<uint16_t>(ws, out, mul(rows, geom.q_width()), DType::bf16, p);
  return b;
}

// ---- SplitKMergeOp -----------------------------------------------------------------------

SplitKMergeOp SplitKMergeOp::make(const ModelConfig& config, uint64_t rows, uint64_t live,
                                  uint64_t splits) {
  const Heads h = heads(config);
  if (live > rows)
    throw Error("splitk_merge: " + std::to_string(live) + " live rows of " + std::to_string(rows) +
                " launched");
  SplitKMergeOp op;
  op.dims = Shape{rows, live, h.nq, h.hd, splits, config.attn_sinks};
  op.partials = arena_tensor(BufferId::splitk_workspace, 0,
                             {rows, h.nq, splits, (Size(h.hd) + 2).value()}, DType::f32);
  op.out = arena_tensor(BufferId::attn_output, 0, {rows, h.q_width()}, DType::bf16);
  if (config.attn_sinks) op.sinks = pool_tensor({h.nq}, DType::f32);
  return op;
}

std::string SplitKMergeOp::params() const {
  return Params(name())("rows", dims.rows)("live", dims.live)("nq", dims.nq)("hd", dims.hd)(
             "splits", dims.splits)("sinks", dims.sinks)
      .str();
}

std::vector<Access> SplitKMergeOp::accesses() const {
  std::vector<Access> acc{{partials, AccessKind::read, attn_value::partials}};
  add_read(acc, sinks);
  acc.push_back({out, AccessKind::write, attn_value::attn});
  return acc;
}

SplitKMergeOp::Bound SplitKMergeOp::bind(const Workspace& ws) const {
  const LazyParams p(*this);
  if (dims.splits == 0) throw Error(p.str() + ": zero splits");
  Bound b;
  const uint64_t hd2 = (Size(dims.hd) + 2).value();
  b.partials = bind_one<const float>(
      ws, partials, mul(mul(dims.rows, dims.nq), mul(dims.splits, hd2)), DType::f32, p);
  if (dims.sinks) b.sinks = bind_needed<const float>(ws, sinks, "sinks", dims.nq, DType::f32, p);
  b.out = bind_one<uint16_t>(ws, out, mul(dims.rows, mul(dims.nq, dims.hd)), DType::bf16, p);
  return b;
}

// ---- AttnGateOp --------------------------------------------------------------------------

AttnGateOp AttnGateOp::make(const ModelConfig& config, uint64_t rows) {
  const Heads h = heads(config);
  AttnGateOp op;
  op.dims = Shape{rows, h.nq, h.hd, config.qkv_dim().value(), h.q_width()};
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

AttnGateOp::Bound AttnGateOp::bind(const Workspace& ws) const {
  const LazyParams p(*this);
  if (dims.qkv_dim < dims.gate_col0 + dims.nq * dims.hd)
    throw Error(p.str() + ": qkv_output rows hold no gate (the model is not gated)");
  Bound b;
  b.qkv = bind_one<const uint16_t>(ws, gate, mul(dims.rows, dims.qkv_dim), DType::bf16, p);
  b.attn = bind_one<uint16_t>(ws, attn, mul(dims.rows, mul(dims.nq, dims.hd)), DType::bf16, p);
  return b;
}

}  // namespace bufferlab
