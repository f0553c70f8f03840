// One attention pass on a backend through the core interface only (attention_harness.h).
#include "bufferlab/oracle/attention_harness.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/oracle/pool_placement.h"
#include "harness_io.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

using detail::read_back;
using detail::upload_exact;

constexpr uint64_t kAttnMetaAlignment = 256;  // each metadata tensor of `scratch` on its own line

bool attn_present(const TensorRef& t) { return !t.shape.empty(); }

// The op's pool operand replaced by the placed one (an absent operand stays absent).
void attn_use_placed(TensorRef& t, const TensorRef& placed) {
  if (attn_present(t)) t = placed;
}
void attn_use_placed(AttnWeights& w, const AttnWeights& placed) {
  attn_use_placed(w.rope, placed.rope);
  attn_use_placed(w.q_norm, placed.q_norm);
  attn_use_placed(w.k_norm, placed.k_norm);
  attn_use_placed(w.sinks, placed.sinks);
  attn_use_placed(w.k_cache, placed.k_cache);
  attn_use_placed(w.v_cache, placed.v_cache);
}

// Consecutive metadata tensors of the `scratch` arena buffer.
class AttnMetaArena {
 public:
  TensorRef take(std::vector<uint64_t> shape, DType t) {
    TensorRef r = arena_tensor(BufferId::scratch, at_, std::move(shape), t);
    at_ = align_up(Size(at_) + r.bytes(), kAttnMetaAlignment).value();
    return r;
  }

 private:
  uint64_t at_ = 0;
};

// ---- validation ------------------------------------------------------------------------

[[noreturn]] void attn_bad(const std::string& what) { throw Error("attention input: " + what); }

void attn_require(const char* what, uint64_t got, uint64_t want) {
  if (got != want)
    attn_bad(fmt::format("{} holds {} elements, the pass needs {}", what, got, want));
}

// One sequence's metadata against the cache: `len` keys through table row `row`.
void attn_check_sequence(const AttnCase& c, const char* part, uint64_t seq, int64_t len,
                         const int32_t* row) {
  const KvCacheGeometry& k = c.cache;
  if (len < 0) attn_bad(fmt::format("{} sequence {}: length {} is negative", part, seq, len));
  const uint64_t n = static_cast<uint64_t>(len);
  if (n > k.max_blocks * k.block_size)
    attn_bad(
        fmt::format("{} sequence {}: length {} needs {} blocks of {}, the block table holds {}",
                    part, seq, n, cdiv(n, k.block_size), k.block_size, k.max_blocks));
  if (c.max_seq_len != 0 && n > c.max_seq_len)
    attn_bad(
        fmt::format("{} sequence {}: length {} above max_seq_len {}", part, seq, n, c.max_seq_len));
  for (uint64_t e = 0; e < cdiv(n, k.block_size); ++e)
    if (row[e] < 0 || static_cast<uint64_t>(row[e]) >= k.num_blocks)
      attn_bad(fmt::format("{} block_table[{}][{}] = {} is outside the cache's {} blocks", part,
                           seq, e, row[e], k.num_blocks));
}

// The slot a written key must go to: key j of the sequence of table row `row`.
void attn_check_slot(const AttnCase& c, const char* part, uint64_t i, int64_t slot,
                     const int32_t* row, uint64_t j) {
  const KvCacheGeometry& k = c.cache;
  if (slot < 0 || static_cast<uint64_t>(slot) >= k.slots())
    attn_bad(
        fmt::format("{} slots[{}] = {} is outside the cache's {} slots", part, i, slot, k.slots()));
  const int64_t want =
      static_cast<int64_t>(row[j / k.block_size]) * static_cast<int64_t>(k.block_size) +
      static_cast<int64_t>(j % k.block_size);
  if (slot != want)
    attn_bad(fmt::format("{} slots[{}] = {} is not key {}'s slot {} by the block table", part, i,
                         slot, j, want));
}

void attn_check_positions(const AttnCase& c, const char* part, const std::vector<uint32_t>& pos,
                          uint64_t n) {
  if (c.max_seq_len == 0) return;
  for (uint64_t e = 0; e < pos.size(); ++e)
    if (pos[e] >= c.max_seq_len)
      attn_bad(fmt::format("{} position {} of token {} (stream {}) is not below max_seq_len {}",
                           part, pos[e], e % n, e / n, c.max_seq_len));
}

}  // namespace

uint64_t AttnCase::cache_elements() const { return mul(cache.slots(), geom.kv_width()); }

void validate_attn_case(const AttnCase& c) {
  const AttnGeometry& g = c.geom;
  g.check("attention input");
  const KvCacheGeometry& k = c.cache;
  if (k.block_size == 0) attn_bad("block_size = 0");
  if (k.max_blocks == 0) attn_bad("max_blocks = 0");
  const uint64_t mb = k.max_blocks, ps = g.pos_streams();
  attn_require("qkv", c.qkv.size(), mul(c.pass_rows(), g.qkv_dim));
  attn_require("k_cache", c.k_cache.size(), c.cache_elements());
  attn_require("v_cache", c.v_cache.size(), c.cache_elements());
  attn_require("rope table", c.rope.size(), g.rope_entries());
  attn_require("q_norm", c.q_norm.size(), g.qk_norm ? g.hd : 0);
  attn_require("k_norm", c.k_norm.size(), g.qk_norm ? g.hd : 0);
  attn_require("sinks", c.sinks.size(), g.sinks ? g.nq : 0);
  if (c.sliding && g.window == 0) attn_bad("a sliding layer with sliding_window = 0");
  std::vector<std::pair<int64_t, std::string>> written;  // slot, writer

  const AttnPrefillPart& pf = c.prefill;
  if (pf.streams > 0 || pf.L > 0) {
    if (pf.streams == 0 || pf.L == 0)
      attn_bad(fmt::format("prefill of {} streams of {} tokens", pf.streams, pf.L));
    const uint64_t t = pf.tokens();
    attn_require("prefill ctx_lens", pf.ctx_lens.size(), pf.streams);
    attn_require("prefill block_table", pf.block_table.size(), mul(pf.streams, mb));
    attn_require("prefill positions", pf.positions.size(), mul(ps, t));
    attn_require("prefill slots", pf.slots.size(), t);
    if (pf.v_row0 < pf.kv_rows())
      attn_bad(
          fmt::format("V scratch row {} overlaps the {} K scratch rows", pf.v_row0, pf.kv_rows()));
    for (uint64_t b = 0; b < pf.streams; ++b) {
      const int32_t* row = &pf.block_table[b * mb];
      const int64_t ctx = pf.ctx_lens[b];
      if (ctx < 0) attn_bad(fmt::format("prefill ctx_lens[{}] = {} is negative", b, ctx));
      attn_check_sequence(c, "prefill", b, ctx + static_cast<int64_t>(pf.L), row);
      for (uint64_t i = 0; i < pf.L; ++i) {
        attn_check_slot(c, "prefill", b * pf.L + i, pf.slots[b * pf.L + i], row,
                        static_cast<uint64_t>(ctx) + i);
        written.emplace_back(pf.slots[b * pf.L + i], fmt::format("prefill token {}", b * pf.L + i));
      }
    }
    attn_check_positions(c, "prefill", pf.positions, t);
  }

  const AttnDecodePart& d = c.decode;
  if (d.rows > 0) {
    if (d.live > d.rows) attn_bad(fmt::format("{} live decode rows of {}", d.live, d.rows));
    if (d.splits == 0) attn_bad("decode splits = 0");
    if (d.verify && d.splits != 1) attn_bad(fmt::format("verify with {} splits", d.splits));
    attn_require("decode seq_lens", d.seq_lens.size(), d.rows);
    attn_require("decode block_table", d.block_table.size(), mul(d.rows, mb));
    attn_require("decode positions", d.positions.size(), mul(ps, d.rows));
    attn_require("decode slots", d.slots.size(), d.rows);
    for (uint64_t r = 0; r < d.rows; ++r) {
      const int32_t* row = &d.block_table[r * mb];
      const int64_t len = d.seq_lens[r];
      // Padding rows are checked too: their metadata is never followed, and must not lead
      // outside the cache if a kernel does.
      attn_check_sequence(c, "decode", r, len, row);
      if (r < d.live) {
        if (len < 1)
          attn_bad(fmt::format("decode seq_lens[{}] = {} below 1 on a live row", r, len));
        attn_check_slot(c, "decode", r, d.slots[r], row, static_cast<uint64_t>(len - 1));
        written.emplace_back(d.slots[r], fmt::format("decode row {}", r));
      } else if (d.slots[r] >= 0) {
        attn_bad(fmt::format("decode padding row {} has slot {} (the cache write would write it)",
                             r, d.slots[r]));
      }
    }
    attn_check_positions(c, "decode", d.positions, d.rows);
  }
  if (c.pass_rows() == 0) attn_bad("a pass of no rows");
  std::sort(written.begin(), written.end());
  for (size_t i = 1; i < written.size(); ++i)
    if (written[i].first == written[i - 1].first)
      attn_bad(fmt::format("slot {} written by {} and {}", written[i].first, written[i - 1].second,
                           written[i].second));
}

std::vector<Access> AttnPlan::accesses() const {
  std::vector<Access> all;
  if (has_decode) {
    append(all, decode_write.accesses());
    append(all, decode.accesses());
    if (decode.split_k()) append(all, merge.accesses());
  }
  if (has_prefill) {
    append(all, q_copy.accesses());
    append(all, k_scratch.accesses());
    append(all, v_scratch.accesses());
    append(all, prefill_write.accesses());
    append(all, prefill.accesses());
  }
  if (gated) append(all, gate.accesses());
  return all;
}

AttnPlan plan_attention(const AttnCase& c) {
  const ModelConfig& cfg = c.config;
  const AttnGeometry& g = c.geom;
  AttnPlan p;
  p.has_decode = c.decode.rows > 0;
  p.has_prefill = c.prefill.tokens() > 0;
  p.gated = g.gated;
  p.weights = AttnWeights::make(g, c.cache);
  AttnWeights& w = p.weights;
  uint64_t end = 0;
  for (TensorRef* t : {&w.rope, &w.q_norm, &w.k_norm, &w.sinks, &w.k_cache, &w.v_cache})
    if (attn_present(*t)) end = place_in_pool({t}, end);
  p.pool_bytes = end;

  AttnMetaArena meta;
  const uint64_t ps = g.pos_streams(), mb = c.cache.max_blocks;
  if (p.has_decode) {
    const AttnDecodePart& d = c.decode;
    AttnMetaRefs& m = p.decode_meta;
    m.positions = meta.take({ps, d.rows}, DType::u32);
    m.pos_stride = d.rows;
    m.slots = meta.take({d.rows}, DType::i64);
    m.lens = meta.take({d.rows}, DType::i32);
    m.block_table = meta.take({d.rows, mb}, DType::i32);
    p.decode_write =
        AttnCacheWriteOp::make(cfg, AttnCacheWriteOp::Source::qkv, 0, d.rows, 0, c.cache, {}, m);
    p.decode =
        AttnDecodeOp::make(cfg, c.sliding, d.rows, d.live, d.splits, d.verify, c.cache, {}, m);
    attn_use_placed(p.decode_write.weights, w);
    attn_use_placed(p.decode.weights, w);
    if (p.decode.split_k()) {
      p.merge = SplitKMergeOp::make(cfg, d.rows, d.live, d.splits);
      attn_use_placed(p.merge.sinks, w.sinks);
    }
  }
  if (p.has_prefill) {
    const AttnPrefillPart& f = c.prefill;
    const uint64_t t = f.tokens(), r0 = c.decode.rows;
    AttnMetaRefs& m = p.prefill_meta;
    m.positions = meta.take({ps, t}, DType::u32);
    m.pos_stride = t;
    m.slots = meta.take({t}, DType::i64);
    m.lens = meta.take({f.streams}, DType::i32);
    m.block_table = meta.take({f.streams, mb}, DType::i32);
    using Part = AttnStageOp::Part;
    p.q_copy = AttnStageOp::make(cfg, Part::q_copy, r0, t, f.padded_rows, 0, {}, m);
    p.k_scratch = AttnStageOp::make(cfg, Part::k_scratch, r0, t, f.padded_rows, 0, {}, m);
    p.v_scratch = AttnStageOp::make(cfg, Part::v_scratch, r0, t, f.padded_rows, f.v_row0, {}, m);
    p.prefill_write = AttnCacheWriteOp::make(cfg, AttnCacheWriteOp::Source::scratch, r0, t,
                                             f.v_row0, c.cache, {}, m);
    const PrefillLaunch launch{
        .decode_rows = r0, .tokens = t, .streams = f.streams, .row0 = 0, .rows = t};
    p.prefill = AttnPrefillOp::make(cfg, c.sliding, launch, f.v_row0, c.cache, std::nullopt, {}, m);
    for (AttnWeights* ow : {&p.q_copy.weights, &p.k_scratch.weights, &p.v_scratch.weights,
                            &p.prefill_write.weights, &p.prefill.weights})
      attn_use_placed(*ow, w);
  }
  if (p.gated) p.gate = AttnGateOp::make(cfg, c.pass_rows());
  return p;
}

Workspace allocate_attention_footprint(Backend& backend, const AttnPlan& plan) {
  return backend.allocate(detail::footprint_of(plan.accesses()), plan.pool_bytes);
}

AttnRun run_attention(Backend& backend, const Workspace& ws, const AttnPlan& plan,
                      const AttnCase& c) {
  validate_attn_case(c);
  if (ws.weights_bytes() < plan.pool_bytes)
    throw Error(
        fmt::format("run_attention: the weight pool holds {} bytes, the placed operands "
                    "need {}",
                    ws.weights_bytes(), plan.pool_bytes));
  if (plan.has_decode != (c.decode.rows > 0) || plan.has_prefill != (c.prefill.tokens() > 0))
    throw Error("run_attention: the plan is not the case's (its parts differ)");
  const AttnGeometry& g = c.geom;
  const uint64_t rows = c.pass_rows();
  const TensorRef qkv = arena_tensor(BufferId::qkv_output, 0, {rows, g.qkv_dim}, DType::bf16);
  const TensorRef attn = arena_tensor(BufferId::attn_output, 0, {rows, g.q_width()}, DType::bf16);

  backend.poison(ws);
  upload_exact(backend, ws, qkv, c.qkv, "qkv");
  const AttnWeights& w = plan.weights;
  upload_exact(backend, ws, w.rope, c.rope, "rope table");
  if (g.qk_norm) {
    upload_exact(backend, ws, w.q_norm, c.q_norm, "q_norm");
    upload_exact(backend, ws, w.k_norm, c.k_norm, "k_norm");
  }
  if (g.sinks) upload_exact(backend, ws, w.sinks, c.sinks, "sinks");
  upload_exact(backend, ws, w.k_cache, c.k_cache, "k_cache");
  upload_exact(backend, ws, w.v_cache, c.v_cache, "v_cache");
  if (plan.has_decode) {
    const AttnMetaRefs& m = plan.decode_meta;
    upload_exact(backend, ws, m.positions, c.decode.positions, "decode positions");
    upload_exact(backend, ws, m.slots, c.decode.slots, "decode slots");
    upload_exact(backend, ws, m.lens, c.decode.seq_lens, "decode seq_lens");
    upload_exact(backend, ws, m.block_table, c.decode.block_table, "decode block_table");
  }
  if (plan.has_prefill) {
    const AttnMetaRefs& m = plan.prefill_meta;
    upload_exact(backend, ws, m.positions, c.prefill.positions, "prefill positions");
    upload_exact(backend, ws, m.slots, c.prefill.slots, "prefill slots");
    upload_exact(backend, ws, m.lens, c.prefill.ctx_lens, "prefill ctx_lens");
    upload_exact(backend, ws, m.block_table, c.prefill.block_table, "prefill block_table");
  }

  AttnRun run;
  const auto caches = [&](std::vector<uint16_t>& k, std::vector<uint16_t>& v) {
    k = read_back<uint16_t>(backend, ws, w.k_cache);
    v = read_back<uint16_t>(backend, ws, w.v_cache);
  };
  if (plan.has_decode) {
    backend.attn_cache_write(ws, plan.decode_write);
    backend.synchronize();
    caches(run.k_cache_decode_write, run.v_cache_decode_write);
  }
  if (plan.has_prefill) {
    backend.attn_stage(ws, plan.q_copy);
    backend.synchronize();
    run.q_copy = read_back<uint16_t>(backend, ws, plan.q_copy.dst);
    backend.attn_stage(ws, plan.k_scratch);
    backend.synchronize();
    run.k_scratch = read_back<uint16_t>(backend, ws, plan.k_scratch.dst);
    if (attn_present(plan.k_scratch.pad) && plan.k_scratch.pad.elements() > 0)
      run.k_pad = read_back<uint16_t>(backend, ws, plan.k_scratch.pad);
    backend.attn_stage(ws, plan.v_scratch);
    backend.synchronize();
    run.v_scratch = read_back<uint16_t>(backend, ws, plan.v_scratch.dst);
    if (attn_present(plan.v_scratch.pad) && plan.v_scratch.pad.elements() > 0)
      run.v_pad = read_back<uint16_t>(backend, ws, plan.v_scratch.pad);
    backend.attn_cache_write(ws, plan.prefill_write);
    backend.synchronize();
  }
  caches(run.k_cache, run.v_cache);
  if (plan.has_decode) {
    backend.attn_decode(ws, plan.decode);
    backend.synchronize();
    if (plan.decode.split_k()) {
      run.partials = read_back<float>(backend, ws, plan.decode.out);
      backend.splitk_merge(ws, plan.merge);
      backend.synchronize();
      run.decode_out = read_back<uint16_t>(backend, ws, plan.merge.out);
    } else {
      run.decode_out = read_back<uint16_t>(backend, ws, plan.decode.out);
    }
  }
  if (plan.has_prefill) {
    backend.attn_prefill(ws, plan.prefill);
    backend.synchronize();
    run.prefill_out = read_back<uint16_t>(backend, ws, plan.prefill.out);
  }
  run.attn = read_back<uint16_t>(backend, ws, attn);
  if (plan.gated) {
    backend.attn_gate(ws, plan.gate);
    backend.synchronize();
    run.gated = read_back<uint16_t>(backend, ws, plan.gate.attn);
  }
  caches(run.k_cache_end, run.v_cache_end);
  return run;
}

AttnRun run_attention(Backend& backend, const AttnCase& c) {
  validate_attn_case(c);
  const AttnPlan plan = plan_attention(c);
  const Workspace ws = allocate_attention_footprint(backend, plan);
  return run_attention(backend, ws, plan, c);
}

}  // namespace bufferlab::oracle
