// BufferSizes::from_config — the 41 formulas of docs/spec/buffers.md §3, the intermediate
// quantities of §2, and the catalogued mutants (docs/spec/bug-catalogue.md) that change a sizing.
// Every product is checked: an overflow is an Error naming the field.
#include "bufferlab/core/buffer_sizes.h"

#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab {
namespace {

constexpr uint64_t kRungs[] = {2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128};
constexpr uint64_t kMetaBase = 32768;
constexpr uint64_t kVerifyRowCap = 160;
constexpr uint64_t kOneMiB = uint64_t{1} << 20;
constexpr uint64_t kGdnChunk = 64;
constexpr uint64_t kMamba2Chunk = 64;
constexpr uint64_t kQsaSlabRows = 2048;

Size floor256(Size x) { return max(x, Size(256)); }

// The intermediate quantities of docs/spec/buffers.md §2 for one sizing.
struct Intermediates {
  uint64_t m, m_pad, k_max, R, max_blocks, pos_streams, moe_scratch, prefill_meta, meta_base,
      bt_meta, q12_batched, logits_tokens, max_dim, max_proj_k, kmax, kpad, splits, slots;
};

Intermediates intermediates(const ModelConfig& c, const RunShape& s, const Target& t,
                            const Sizing& sizing) {
  Intermediates q{};
  q.m = s.max_batch_tokens;
  q.m_pad = ceil16(q.m).value();
  q.k_max = ceil16(max(Size(q.m), Size(3))).value();
  const uint64_t rows = std::max<uint64_t>(s.max_batch_size, 32);
  q.R = sizing.is(Mutant::B9) ? rows : padded_batch_rung(rows);
  q.max_blocks = block_table_entries(s);
  q.pos_streams = (c.uses_mrope() && !sizing.is(Mutant::B1)) ? 3 : 1;
  q.moe_scratch = (Size(2) * q.m * c.num_experts_per_tok * 4).value();

  q.prefill_meta = prefill_meta_offsets(q.m, q.pos_streams, q.max_blocks).end;

  const Size verify_meta = Size(24) * kVerifyRowCap + Size(4) * kVerifyRowCap * q.max_blocks;
  const Size decode_meta = Size(24) * q.R + Size(4) * q.R * q.max_blocks;
  // F6 (corrected): the decode/verify top-k region [0, 8·rows·top_k) must end before the
  // metadata; spec's fixed base 32768 is passed by 161+ rows at top_k 26+ (or R·top_k > 4096).
  q.meta_base = kMetaBase;
  if (sizing.kind == SizingKind::corrected)
    q.meta_base =
        max(Size(kMetaBase),
            align_up(Size(8) * c.num_experts_per_tok * std::max<uint64_t>(q.R, kVerifyRowCap), 256))
            .value();
  q.bt_meta = (Size(q.meta_base) + max(verify_meta, decode_meta)).value();
  q.q12_batched =
      q12_bytes(8, std::max<uint64_t>(cdiv(q.m, 8), 1), c.num_experts_per_tok, q.pos_streams);

  q.logits_tokens = sizing.is(Mutant::B10)
                        ? min(Size(q.m), max(Size(96), Size(q.R))).value()
                        : min(Size(q.m), max(Size(kVerifyRowCap), Size(q.R) + 1)).value();
  q.max_dim = max(Size(c.hidden_size), c.mamba2_d_inner()).value();
  q.max_proj_k = max(Size(c.hidden_size), Size(c.num_attention_heads) * c.head_dim,
                     c.mamba2_d_inner(), Size(c.linear_num_value_heads) * c.linear_value_head_dim)
                     .value();
  if (sizing.kind == SizingKind::corrected)  // F4: every FP8 projection's K
    q.max_proj_k = max(Size(q.max_proj_k), Size(c.q_lora_rank),
                       Size(c.num_attention_heads) * c.v_head_dim, Size(c.o_groups) * c.o_lora_rank)
                       .value();
  q.kmax = max(Size(c.hidden_size), Size(c.intermediate_size)).value();
  q.kpad = ceil256(q.kmax).value();
  q.splits = splitk_splits(t, c.num_attention_heads, q.R);
  q.slots = sizing.is(Mutant::B5) ? 48 : splitk_slots(t, c.num_attention_heads, q.R);
  return q;
}

// Number of layers running a dense FFN (for mutant B6, the per-layer scratch bug).
uint64_t dense_ffn_layers(const ModelConfig& c) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < c.num_hidden_layers; ++i)
    if (c.ffn_kind(i) == FfnKind::dense) ++n;
  return n;
}

// Computes one field, turning an overflow into an Error that names the field.
template <class F>
uint64_t field(const char* name, F&& formula) {
  try {
    return Size(formula()).value();
  } catch (const OverflowError& e) {
    throw Error(std::string("buffer ") + name + " overflows 64 bits: " + e.what());
  }
}

}  // namespace

uint64_t padded_batch_rung(uint64_t n) {
  for (uint64_t r : kRungs)
    if (r >= n) return r;
  return n;
}

uint64_t block_table_entries(const RunShape& s) {
  return s.kv_block_size == 0 ? 256 : (Size(s.max_seq_len / s.kv_block_size) + 1).value();
}

PrefillMetaOffsets prefill_meta_offsets(uint64_t rows, uint64_t pos_streams, uint64_t max_blocks) {
  PrefillMetaOffsets o;
  const Size slots = align_up(Size(4) * rows * pos_streams, 8);
  const Size block_table = align_up(slots + Size(8) * rows, 4);
  const Size seq_len = align_up(block_table + Size(4) * max_blocks, 4);
  o.slots = slots.value();
  o.block_table = block_table.value();
  o.seq_len = seq_len.value();
  o.end = (seq_len + 4).value();
  return o;
}

StagingLayout staging_layout(uint64_t n, uint64_t L, uint64_t top_k, uint64_t pos_streams,
                             bool cu_seqlens_region) {
  StagingLayout s;
  const Size T = Size(n) * L;
  Size off = align_up(T * top_k * 8, 64);  // moe: top-k ids and weights
  s.stream_meta = off.value();
  s.stream_meta_stride = max(Size(L) * 16 + 64, Size(4096)).value();
  off += Size(n) * s.stream_meta_stride;
  s.positions = off.value();
  s.positions_stride = align_up(Size(4) * T, 8).value();
  off += Size(pos_streams) * s.positions_stride;
  s.slots = off.value();
  off += align_up(Size(8) * T, 8);
  s.ptr_tables = off.value();
  off += Size(2) * align_up(Size(8) * n, 8);
  s.cu_seqlens = off.value();
  const Size cu_bytes = align_up(Size(4) * (Size(n) + 1), 8);
  if (cu_seqlens_region) off += cu_bytes;
  s.kv_lens = off.value();
  off += align_up(Size(4) * n, 8);
  s.h_state = off.value();
  off += Size(8) * n;
  s.end = (cu_seqlens_region ? off : off + cu_bytes).value();
  return s;
}

uint64_t q12_bytes(uint64_t n, uint64_t L, uint64_t top_k, uint64_t pos_streams) {
  return staging_layout(n, L, top_k, pos_streams).end;
}

BufferSizes BufferSizes::from_config(const ModelConfig& config, uint64_t max_batch_tokens,
                                     uint64_t max_seq_len, uint64_t kv_block_size,
                                     uint64_t max_batch_size, const Target& target, Sizing sizing) {
  return from_config(config, RunShape{max_batch_tokens, max_seq_len, kv_block_size, max_batch_size},
                     target, sizing);
}

BufferSizes BufferSizes::from_config(const ModelConfig& c, const RunShape& shape,
                                     const Target& target, Sizing sizing) {
  c.validate();
  shape.validate();
  sizing.validate();
  Intermediates q{};
  try {
    q = intermediates(c, shape, target, sizing);
  } catch (const OverflowError& e) {
    throw Error(std::string("run-shape quantity overflows 64 bits: ") + e.what());
  }

  const uint64_t m = q.m, h = c.hidden_size, nq = c.num_attention_heads,
                 nkv = c.num_key_value_heads, hd = c.head_dim, E = c.num_experts,
                 top_k = c.num_experts_per_tok, kvl = c.kv_lora_rank, rope = c.qk_rope_head_dim,
                 nv = c.linear_num_value_heads, inter = c.intermediate_size, hc = c.hc_mult;
  const bool moe = E > 0;
  const uint64_t m_pad = q.m_pad, k_max = q.k_max;
  // B4: the FP8 GEMM's padded rows forgotten (m instead of m_pad / k_max) in the buffers the
  // catalogue names: qkv_output, ssm_qkvz, moe_output, expert_*.
  const uint64_t gemm_rows = sizing.is(Mutant::B4) ? m : m_pad;
  const uint64_t expert_rows = sizing.is(Mutant::B4) ? m : k_max;
  const Size E_all = Size(E) + c.zero_expert_num;

  BufferSizes s;
  s.sizing = sizing;
  s.hidden_states = field("hidden_states", [&] { return Size(m) * h * 2; });
  s.residual = field("residual", [&] { return Size(m) * h * 2; });
  s.norm_output = field("norm_output", [&] { return Size(m) * q.max_dim * 2; });
  // `corrected` (corrections.h): the named fixes of the verifier's findings.
  const bool fix = sizing.kind == SizingKind::corrected;
  // F9: MLA's q projection writes nq·(nope + rope) columns whatever head_dim the config gives
  // (GLM-5: head_dim 64, nope + rope = 256). A lambda: its overflow is the calling field's.
  const auto mla_q_width = [&] {
    return fix && kvl > 0 ? Size(nq) * (Size(c.qk_nope_head_dim) + rope) : Size(0);
  };
  s.qkv_output = field("qkv_output", [&] {
    return max(Size(gemm_rows) * c.qkv_dim() * 2, Size(gemm_rows) * mla_q_width() * 2);  // F9
  });
  s.attn_output = field("attn_output", [&] {
    return max(Size(m) * nq * hd * 2, Size(m) * c.mamba2_d_inner() * 2,
               kvl > 0 ? Size(m) * nq * (Size(kvl) + rope) * 2 : Size(0),
               fix ? Size(m) * nv * c.linear_value_head_dim * 2 : Size(0));  // F1
  });
  s.gate_logits = field("gate_logits", [&] { return moe ? Size(m) * E_all * 2 : Size(256); });
  s.gate_logits_f32 =
      field("gate_logits_f32", [&] { return moe ? Size(m) * E_all * 4 : Size(256); });
  s.moe_router_in_f32 =
      field("moe_router_in_f32", [&] { return moe ? Size(m) * h * 4 : Size(256); });
  s.moe_output = field("moe_output", [&] { return Size(gemm_rows) * h * 2; });
  s.logits = field("logits", [&] { return Size(q.logits_tokens) * c.vocab_size * 2; });
  s.ssm_qkvz = field("ssm_qkvz", [&] {
    return floor256(max(Size(gemm_rows) * c.ssm_qkvz_size() * 2,
                        Size(fix ? gemm_rows : m) * c.mamba2_in_proj_size() * 2,  // F5
                        (Size(m) + gemm_rows) * nkv * hd * 2,
                        Size(m) * c.shared_expert_intermediate_size * 2));
  });
  s.ssm_ba = field("ssm_ba", [&] {
    return floor256(max(Size(m) * c.ssm_ba_size() * 2, Size(m) * c.moe_latent_size * 2,
                        kvl > 0 ? max(Size(m) * rope, Size(m) * c.q_lora_rank) * 2 : Size(0)));
  });
  s.ssm_deinterleaved = field("ssm_deinterleaved", [&] {
    return floor256(max(Size(m_pad) * c.ssm_qkvz_size() * 2, Size(m) * c.mamba2_d_xbc() * 2,
                        Size(m) * nq * hd * 2,
                        kvl > 0 ? Size(m) * nq * (Size(kvl) + rope) * 2 : Size(0),
                        fix && kvl > 0 ? Size(m) * nq * c.v_head_dim * 2 : Size(0)));  // F3
  });
  s.ssm_gates = field("ssm_gates", [&] { return floor256(Size(m) * nv * 2 * 4); });
  s.ssm_conv_out_f32 = field("ssm_conv_out_f32", [&] {
    return floor256(
        max(Size(m) * c.ssm_qkvz_size() * 4, kvl > 0 ? Size(m) * nq * rope * 2 : Size(0)));
  });
  s.scratch = field("scratch", [&] {
    const Size prefill = Size(q.moe_scratch) + q.prefill_meta;
    if (sizing.is(Mutant::B2)) return max(Size(65536), prefill, Size(q.bt_meta));
    return max(Size(65536), prefill, Size(q.bt_meta), Size(q.q12_batched));
  });
  const Size expert_width = !moe ? Size(inter)
                            : sizing.is(Mutant::B11)
                                ? Size(top_k) * c.moe_intermediate_size
                                : max(Size(top_k) * c.moe_intermediate_size, Size(inter));
  s.expert_gate_out =
      field("expert_gate_out", [&] { return Size(2) * expert_rows * expert_width; });
  s.expert_up_out = field("expert_up_out", [&] { return Size(2) * expert_rows * expert_width; });
  s.expert_down_out = field("expert_down_out", [&] {
    return moe ? Size(expert_rows) * top_k * c.moe_input_size() * 2 : Size(expert_rows) * h * 2;
  });
  s.splitk_workspace =
      field("splitk_workspace", [&] { return Size(q.slots) * (Size(hd) + 2) * 4; });

  const bool gdn_chunked = nv > 0 && c.linear_key_head_dim == 128 && c.linear_value_head_dim == 128;
  const uint64_t nt = gdn_chunked ? cdiv(m, kGdnChunk) + (sizing.is(Mutant::B15) ? 0 : 16) : 0;
  s.gdn_fla_scratch = field("gdn_fla_scratch", [&] {
    if (!gdn_chunked) return Size(0);
    const uint64_t kd = c.linear_key_head_dim, vd = c.linear_value_head_dim;
    const Size per_region = Size(kGdnChunk) * kd * 2 + Size(kGdnChunk) * vd * 2 +
                            Size(kd) * vd * 2 + Size(kGdnChunk) * vd * 2 + Size(kGdnChunk) * 4;
    return Size(nt) * nv * per_region;
  });
  const bool ssd = c.mamba_num_heads > 0 && c.ssm_state_size > 0;
  const uint64_t nc = ssd ? cdiv(m, kMamba2Chunk) + 1 : 0;
  s.ssd_scratch = field("ssd_scratch", [&] {
    if (!ssd) return Size(0);
    const uint64_t H = c.mamba_num_heads, G = std::max<uint64_t>(c.n_groups, 1);
    return Size(2) * H * nc * kMamba2Chunk * 4 + Size(nc) * G * kMamba2Chunk * kMamba2Chunk * 4;
  });
  s.o_latent = field("o_latent", [&] {  // F2: the FP8 grouped-O GEMM writes m_pad rows
    return floor256(Size(fix ? m_pad : m) * c.o_groups * c.o_lora_rank * 2);
  });
  s.norm_unit_w = field("norm_unit_w", [&] { return Size(q.max_dim) * 2; });
  s.hc_streams = field("hc_streams", [&] { return hc > 0 ? Size(m) * hc * h * 4 : Size(256); });
  s.hc_post =
      field("hc_post", [&] { return hc > 0 ? max(Size(m) * hc * 4, Size(256)) : Size(256); });
  s.hc_comb =
      field("hc_comb", [&] { return hc > 0 ? max(Size(m) * hc * hc * 4, Size(256)) : Size(256); });
  s.hc_lowrank_scratch = field("hc_lowrank_scratch", [&] {
    const uint64_t r = c.hc_lowrank;
    if (hc == 0 || r == 0) return Size(256);
    const Size t = min(Size(m), Size(64)), ts = min(Size(m), Size(2048));
    return max(t * (Size(hc) * h + r) * 4, ts * (Size(2) * hc * h + r + hc) * 2);
  });
  s.qsa_select_scratch = field("qsa_select_scratch", [&] {
    const uint64_t ratio = c.index_compress_ratio;
    if (c.index_topk == 0 || ratio == 0) return Size(256);
    const uint64_t nh = c.index_n_heads, ihd = c.index_head_dim;
    return Size(kQsaSlabRows) * (Size(nh) + 1) * ihd * 2 + Size(kQsaSlabRows) * nh * ihd * 4 +
           Size(kQsaSlabRows) * cdiv(shape.max_seq_len, ratio) * 4 +
           Size(kQsaSlabRows) * (c.index_topk / ratio) * 4;
  });
  s.token_ids = field("token_ids", [&] { return max(Size(4) * m, Size(256)); });

  // B6: the dense-FFN activation scratch as a per-layer field.
  const uint64_t per_layer_copies = sizing.is(Mutant::B6) ? dense_ffn_layers(c) : 1;
  s.ffn_act_q8 = field("ffn_act_q8", [&] {
    return moe ? Size(0) : (Size(m) * q.kpad * 4 + kOneMiB) * per_layer_copies;
  });
  s.ffn_act_a =
      field("ffn_act_a", [&] { return moe ? Size(0) : Size(m_pad) * q.kmax * per_layer_copies; });
  s.ffn_act_scale = field("ffn_act_scale", [&] {
    return moe ? Size(0) : Size(m_pad) * cdiv(q.kmax, 32) * 4 * per_layer_copies;
  });
  s.fp8_act = field("fp8_act", [&] { return Size(m_pad) * q.max_proj_k; });
  s.fp8_act_scale =
      field("fp8_act_scale", [&] { return Size(m_pad) * cdiv(q.max_proj_k, 128) * 4; });

  const uint64_t rank = c.adapter_max_rank;
  s.lora_xa = field("lora_xa", [&] { return rank > 0 ? Size(m) * rank * 2 : Size(0); });
  s.lora_delta = field("lora_delta", [&] {
    if (rank == 0) return Size(0);
    return Size(m) * max(Size(h), Size(inter), Size(c.q_proj_mul()) * nq * hd, mla_q_width()) *
           2;  // F9: MLA's q adapter expands to nq·(nope + rope)
  });
  s.lora_hact = field("lora_hact", [&] { return rank > 0 ? Size(m) * inter * 2 : Size(0); });
  s.lora_seq_slot = field("lora_seq_slot", [&] { return rank > 0 ? Size(4) * m : Size(0); });
  s.q2_dequant_scratch = field("q2_dequant_scratch", [&] {
    if (!target.q2_dequant) return Size(0);
    const Size spec_bytes = max(Size(inter), c.ssm_qkvz_size(), c.mamba2_in_proj_size(),
                                Size(nq) * c.q_proj_mul() * hd, Size(2) * nkv * hd) *
                            h * 2;
    if (!fix) return spec_bytes;
    // F7: the Q2 projections whose weight is not [N, h] or [h, N] with N in the list above:
    // the grouped O (o_a: o_lora_rank × the attention output width nq·hd, MLA nq·v_head_dim, o_b: h
    // × o_groups·o_lora_rank) and MLA's q_b (nq·hd × q_lora_rank) and O (h × nq·v_head_dim).
    // F9: MLA's q weight is nq·(nope + rope) × (q_lora_rank, or h without q compression).
    return max(spec_bytes, Size(c.o_lora_rank) * nq * max(Size(hd), Size(c.v_head_dim)) * 2,
               Size(c.o_groups) * c.o_lora_rank * h * 2, Size(nq) * hd * c.q_lora_rank * 2,
               Size(nq) * c.v_head_dim * h * 2,
               mla_q_width() * (c.q_lora_rank > 0 ? c.q_lora_rank : h) * 2);
  });
  s.q2_act_q8 = field("q2_act_q8", [&] {
    if (!target.q2_mmq) return Size(0);
    Size k = max(Size(h), Size(inter), Size(nq) * hd);
    // F8: the K of every Q2 projection: also the grouped O's second GEMM and MLA's q_b / O.
    if (fix)
      k = max(k, Size(c.o_groups) * c.o_lora_rank, Size(c.q_lora_rank), Size(nq) * c.v_head_dim);
    return Size(m) * ceil256(k) * 4 + kOneMiB;
  });

  s.params = SubLayoutParams{.m = m,
                             .m_pad = m_pad,
                             .k_max = k_max,
                             .R = q.R,
                             .max_blocks = q.max_blocks,
                             .pos_streams = q.pos_streams,
                             .moe_scratch = q.moe_scratch,
                             .meta_base = q.meta_base,
                             .verify_rows = kVerifyRowCap,
                             .logits_tokens = q.logits_tokens,
                             .splitk_splits = q.splits,
                             .splitk_slots = q.slots,
                             .gdn_chunks = nt,
                             .mamba2_chunks = nc,
                             .expert_width = expert_width.value(),
                             .staging_cu_seqlens = !sizing.is(Mutant::B3)};
  return s;
}

uint64_t BufferSizes::bytes(BufferId id) const { return const_cast<BufferSizes*>(this)->bytes(id); }

uint64_t& BufferSizes::bytes(BufferId id) {
  switch (id) {
#define BUFFERLAB_SIZE_CASE(name, type, doc) \
  case BufferId::name:                       \
    return name;
    BUFFERLAB_BUFFERS(BUFFERLAB_SIZE_CASE)
#undef BUFFERLAB_SIZE_CASE
  }
  throw Error("unknown BufferId");
}

uint64_t BufferSizes::total_bytes() const {
  Size total = 0;
  for (const auto& info : kBufferRegistry) {
    // B8: the memory pre-flight that forgot a field.
    if (sizing.is(Mutant::B8) && info.id == BufferId::o_latent) continue;
    try {
      total += bytes(info.id);
    } catch (const OverflowError& e) {
      throw Error(std::string("total_bytes overflows 64 bits at ") + std::string(info.name));
    }
  }
  return total.value();
}

}  // namespace bufferlab
