// Metadata uploads of each pass kind (docs/spec/buffers.md §4.1–§4.4). Offsets: the sizing's
// sub-layout parameters. Extents: op semantics — the model's position streams (3 with
// multimodal RoPE), the pass's rows, the block table of the run shape.
#include "metadata.h"

#include <algorithm>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/ops/embedding.h"

namespace bufferlab::plan::detail {
namespace {

uint64_t model_pos_streams(const ModelConfig& c) { return c.uses_mrope() ? 3 : 1; }

MetaRegion region(std::string name, uint64_t offset, std::vector<uint64_t> shape, DType t) {
  return MetaRegion{std::move(name), arena(BufferId::scratch, offset, std::move(shape), t)};
}

// §4.1: one prefill sequence of t tokens, from base moe_scratch.
std::vector<MetaRegion> prefill_regions(const Ctx& c, uint64_t t) {
  const SubLayoutParams& lp = c.lp;
  const uint64_t base = lp.moe_scratch;
  // Offsets of the sizing (its pos_streams): slots placed by the t rows uploaded, the block
  // table and seq_len where §2's prefill_meta puts them (laid out for m rows). Extents: what
  // the upload writes (every position stream of the model; the run shape's block table).
  const PrefillMetaOffsets by_t = prefill_meta_offsets(t, lp.pos_streams, lp.max_blocks);
  const PrefillMetaOffsets by_m = prefill_meta_offsets(lp.m, lp.pos_streams, lp.max_blocks);
  const Size slot_off = by_t.slots, bt_off = by_m.block_table, sl_off = by_m.seq_len;
  return {
      region("positions", base, {model_pos_streams(c.config), t}, DType::u32),
      region("slots", (Size(base) + slot_off).value(), {t}, DType::i64),
      region("block_table", (Size(base) + bt_off).value(), {block_table_entries(c.shape)},
             DType::i32),
      region("seq_lens", (Size(base) + sl_off).value(), {1}, DType::i32),
  };
}

// §4.2 / §4.3: r rows at base meta_base laid out for `layout_rows` rows.
std::vector<MetaRegion> decode_regions(const Ctx& c, uint64_t r, uint64_t layout_rows) {
  const Size base = c.lp.meta_base;
  const Size R = layout_rows;
  return {
      region("positions", base.value(), {r}, DType::u32),
      region("seq_slot", (base + Size(4) * R).value(), {r}, DType::i32),
      region("slots", (base + Size(8) * R).value(), {r}, DType::i64),
      region("seq_lens", (base + Size(16) * R).value(), {r}, DType::i32),
      region("block_table", (base + Size(24) * R).value(), {r, block_table_entries(c.shape)},
             DType::i32),
  };
}

// §4.4: n streams of L tokens, T = n·L, after the moe region at offset 0.
std::vector<MetaRegion> codispatch_regions(const Ctx& c) {
  const uint64_t n = c.pass.n, L = c.pass.L, top_k = c.config.num_experts_per_tok;
  const Size T = Size(n) * L;
  // Offsets: the staging layout of the sizing under test (its pos_streams; B3's layout
  // without the cu_seqlens region). Extents: what the upload writes.
  const StagingLayout st = staging_layout(n, L, top_k, c.lp.pos_streams, c.lp.staging_cu_seqlens);
  std::vector<MetaRegion> out;
  for (uint64_t b = 0; b < n; ++b)
    out.push_back(region("stream_meta." + std::to_string(b),
                         (Size(st.stream_meta) + Size(st.stream_meta_stride) * b).value(),
                         {(Size(L) * 16 + 64).value()}, DType::u8));
  // The upload writes every position stream of the model, each at its 8-aligned stride.
  const uint64_t streams = model_pos_streams(c.config);
  const Size pos_bytes = Size(st.positions_stride) * (streams - 1) + Size(4) * T;
  out.push_back(region("positions", st.positions, {pos_bytes.value()}, DType::u8));
  out.push_back(region("slots", st.slots, {T.value()}, DType::i64));
  out.push_back(
      region("ptr_tables", st.ptr_tables, {2, align_up(Size(8) * n, 8).value() / 8}, DType::i64));
  out.push_back(region("cu_seqlens", st.cu_seqlens, {n + 1}, DType::i32));
  out.push_back(region("kv_lens", st.kv_lens, {n}, DType::i32));
  out.push_back(region("h_state", st.h_state, {n}, DType::i64));
  return out;
}

}  // namespace

std::vector<MetaRegion> metadata_regions(const Ctx& c) {
  switch (c.pass.kind) {
    case PassKind::prefill:
      return prefill_regions(c, c.pass.t);
    case PassKind::decode:
      return decode_regions(c, c.pass.decode_rows(), c.lp.R);
    case PassKind::verify:
      return decode_regions(c, c.pass.decode_rows(), c.lp.verify_rows);
    case PassKind::mixed:
      return {};  // out of scope (docs/spec/buffers.md §4.3b)
    case PassKind::codispatch:
      return codispatch_regions(c);
  }
  return {};
}

std::vector<Access> metadata_reads(const Ctx& c, const std::vector<std::string>& names) {
  std::vector<Access> out;
  for (MetaRegion& r : metadata_regions(c)) {
    const bool wanted =
        names.empty() || std::find(names.begin(), names.end(), r.name) != names.end();
    if (wanted) out.push_back(rd(std::move(r.ref), "@meta." + r.name));
  }
  return out;
}

std::vector<Access> state_metadata(const Ctx& c, const std::vector<std::string>& extra) {
  std::vector<std::string> names = {"seq_slot", "cu_seqlens", "h_state"};
  names.insert(names.end(), extra.begin(), extra.end());
  return metadata_reads(c, names);
}

void emit_uploads(Builder& b, const Ctx& c) {
  const std::string pass = c.pass.to_string();
  b.add(UploadOp{"upload_token_ids",
                 pass,
                 {{"token_ids", arena(BufferId::token_ids, 0, {c.T}, DType::u32), "@token_ids"}}});
  UploadOp meta{"upload_metadata", pass, {}};
  for (MetaRegion& r : metadata_regions(c))
    meta.regions.push_back({r.name, std::move(r.ref), "@meta." + r.name});
  if (!meta.regions.empty()) b.add(meta);
  if (c.paths.lora)
    b.add(UploadOp{
        "upload_lora_slots",
        pass,
        {{"lora_seq_slot", arena(BufferId::lora_seq_slot, 0, {c.T}, DType::i32), "@lora_slot"}}});
}

}  // namespace bufferlab::plan::detail
