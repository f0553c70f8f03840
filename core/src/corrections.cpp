// The corrections of the `corrected` sizing (applied in buffer_sizes.cpp).
#include "bufferlab/core/corrections.h"

namespace bufferlab {

const std::vector<Correction>& corrections() {
  static const std::vector<Correction> list = {
      {"F1-gdn-core-output", BufferId::attn_output, "attn_output also ≥ m·nv·vd·2",
       "the GDN core output [t, nv·vd] lives in attn_output (docs/spec/buffers.md §5), whose "
       "formula covers nq·hd and d_inner but not nv·vd: short whenever nv·vd > max(nq·hd, "
       "d_inner)"},
      {"F2-o-latent-padded-rows", BufferId::o_latent, "o_latent: m_pad rows instead of m",
       "the grouped O projection is an O projection, so it runs on the FP8 block-scaled path "
       "(docs/spec/buffers.md §5 Paths), whose GEMM writes ceil16(t) rows; o_latent is sized for m "
       "rows: short by up to 15 rows when t = m and m % 16 != 0"},
      {"F3-mla-v-up-home", BufferId::ssm_deinterleaved,
       "ssm_deinterleaved also ≥ m·nq·v_head_dim·2 (MLA)",
       "MLA's V up-projection [t, nq·v_head_dim] has no home in docs/spec/buffers.md §5; the "
       "buffer chosen for it (ssm_deinterleaved, free once the absorbed Q is consumed) holds it "
       "only while v_head_dim ≤ max(head_dim, kv_lora_rank + rope), and no other buffer provably "
       "does"},
      {"F4-fp8-act-every-k", BufferId::fp8_act,
       "max_proj_k also covers q_lora_rank, nq·v_head_dim and o_groups·o_lora_rank",
       "fp8_act / fp8_act_scale hold the FP8 activation of every projection on the FP8 path; "
       "MLA's q_b (K = q_lora_rank), MLA's O (K = nq·v_head_dim) and the grouped O's second "
       "GEMM (K = o_groups·o_lora_rank) can exceed max(h, nq·hd, d_inner, nv·vd)"},
      {"F4-fp8-act-every-k", BufferId::fp8_act_scale, "as fp8_act (same max_proj_k)", "as fp8_act"},
      {"F5-mamba-in-proj-padded-rows", BufferId::ssm_qkvz,
       "the Mamba-2 in_proj term of ssm_qkvz uses m_pad rows instead of m",
       "Mamba-2 in_proj runs on the FP8 path (docs/spec/buffers.md §5 Paths) and writes ceil16(t) "
       "rows; ssm_qkvz's Mamba term is m·in_proj·2: short when t = m, m % 16 != 0 and the Mamba "
       "term dominates"},
      {"F6-decode-meta-base", BufferId::scratch,
       "decode/verify metadata base = max(32768, align256(8·top_k·max(R, 160))); bt_meta grows "
       "by the same amount",
       "the decode/verify top-k ids + weights [0, 8·rows·top_k) must end at or before the metadata "
       "base 32768 (docs/spec/buffers.md §4.2); at verify(160) with top_k ≥ 26, or decode "
       "rows·top_k > 4096 (e.g. max_batch_size 1024, top_k 8), the top-k write clobbers the "
       "uploaded positions that later attention layers read"},
      {"F7-q2-dequant-every-weight", BufferId::q2_dequant_scratch,
       "q2_dequant_scratch also ≥ the grouped-O and MLA q_b / O weights (o_lora_rank·nq·hd, "
       "o_groups·o_lora_rank·h, nq·hd·q_lora_rank, nq·v_head_dim·h elements)·2",
       "Q2 applies to the attention o and q projections; spec's formula is (largest N)·h, "
       "which holds only weights with h on one side: the grouped O's two matrices and MLA's "
       "q_b and O can be larger"},
      {"F8-q2-act-every-k", BufferId::q2_act_q8,
       "q2_act_q8's K also covers o_groups·o_lora_rank, q_lora_rank and nq·v_head_dim",
       "the MMQ activation of every Q2 projection lives in q2_act_q8, sized for K = max(h, "
       "intermediate, nq·hd); the grouped O's second GEMM and MLA's q_b and O read wider "
       "activations"},
      {"F9-mla-q-width", BufferId::qkv_output,
       "qkv_output also ≥ m_pad·nq·(qk_nope_head_dim + qk_rope_head_dim)·2 (MLA)",
       "MLA's q projection (q_b, or q_proj without q_lora_rank) writes nq·(nope + rope) "
       "columns into qkv_output, sized (nq·q_proj_mul + 2·nkv)·head_dim; a config may give "
       "head_dim below nope + rope (GLM-5: 64 vs 256, docs/spec/buffers.md §1.1 takes it as "
       "given): short from prefill(t = 6145) at m = 8192"},
      {"F9-mla-q-width", BufferId::lora_delta,
       "lora_delta's width also covers nq·(qk_nope_head_dim + qk_rope_head_dim) (MLA)",
       "as qkv_output: the LoRA adapter of MLA's q projection expands to its N = nq·(nope + "
       "rope) columns, and lora_delta is sized for max(h, intermediate, q_proj_mul·nq·hd)"},
      {"F9-mla-q-width", BufferId::q2_dequant_scratch,
       "q2_dequant_scratch also ≥ nq·(qk_nope_head_dim + qk_rope_head_dim) × (q_lora_rank, or h "
       "without it) elements·2 (MLA)",
       "as qkv_output: the Q2 dequant of MLA's q weight (q_b, or q_proj without q_lora_rank) "
       "has N = nq·(nope + rope); spec's nq·q_proj_mul·hd·h and F7's nq·hd·q_lora_rank assume "
       "head_dim ≥ nope + rope"},
  };
  return list;
}

}  // namespace bufferlab
