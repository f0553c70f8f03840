// THE field registry: every workspace buffer, in layout order (docs/spec/buffers.md §3), with its
// element type and doc line. BufferId, BufferSizes, total_bytes(), Layout, the JSON output
// and the CLI tables are all generated from this one list, so no consumer can forget a
// field (bug catalogue B8, B12).
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "bufferlab/core/dtype.h"

namespace bufferlab {

// X(name, element type, doc line). Order = layout order = docs/spec/buffers.md §3 order.
#define BUFFERLAB_BUFFERS(X)                                                                   \
  X(hidden_states, bf16, "residual stream (BF16) [m, h]")                                      \
  X(residual, bf16, "residual accumulator, source of the normalised copy [m, h]")              \
  X(norm_output, bf16, "RMSNorm output; mHC block input; Mamba-2 gated-norm output")           \
  X(qkv_output, bf16, "QKV projection output [m_pad, qkv_dim]; MLA q_b output")                \
  X(attn_output, bf16, "attention core output; GDN core output; Mamba-2 SSD output")           \
  X(gate_logits, bf16, "router logits, BF16 path [m, E + zero experts]")                       \
  X(gate_logits_f32, f32, "router logits, FP32 paths [m, E + zero experts]")                   \
  X(moe_router_in_f32, f32, "FP32 normed router input [m, h]")                                 \
  X(moe_output, bf16, "o_proj / out_proj / FFN down / MoE combine output [m_pad, h]")          \
  X(logits, bf16, "LM-head rows [logits_tokens, vocab]")                                       \
  X(ssm_qkvz, bf16, "GDN in_proj_qkvz; Mamba-2 in_proj; attention K+V scratch; shared expert") \
  X(ssm_ba, bf16, "GDN beta/alpha; latent-MoE latent; MLA q_latent then k_rope")               \
  X(ssm_deinterleaved, bf16, "de-interleaved Q|K|V|Z; attention Q copy; Mamba-2 conv out")     \
  X(ssm_gates, f32, "GDN gates beta, alpha (FP32) [m, nv, 2]")                                 \
  X(ssm_conv_out_f32, f32, "GDN conv output (FP32); MLA q_rope (BF16)")                        \
  X(scratch, u8, "top-k ids/weights + per-pass metadata uploads (sub-layouts 4.1-4.4)")        \
  X(expert_gate_out, bf16, "routed-expert or dense FFN gate output [k_max, width]")            \
  X(expert_up_out, bf16, "routed-expert or dense FFN up output [k_max, width]")                \
  X(expert_down_out, bf16, "expert down output [k_max*top_k, moe_input]")                      \
  X(splitk_workspace, f32, "split-K decode partials: per slot o[hd], m, l")                    \
  X(gdn_fla_scratch, u8, "GDN chunked prefill W|U|S|uc|gc (kd = vd = 128)")                    \
  X(ssd_scratch, f32, "Mamba-2 SSD dt|dA_cumsum|CB")                                           \
  X(o_latent, bf16, "grouped O projection latent [m, o_groups*o_lora_rank]")                   \
  X(norm_unit_w, bf16, "zero RMSNorm weight (scale 1 + 0) for unweighted norms")               \
  X(hc_streams, f32, "mHC residual highway (FP32) [m, hc, h]")                                 \
  X(hc_post, f32, "mHC post weights [m, hc]")                                                  \
  X(hc_comb, f32, "mHC Sinkhorn combination matrices [m, hc, hc]")                             \
  X(hc_lowrank_scratch, u8, "low-rank mHC split/GEMM path scratch")                            \
  X(qsa_select_scratch, u8, "sparse-attention indexer selection slabs of 2048 rows")           \
  X(token_ids, u32, "token ids of the pass (hash routing)")                                    \
  X(ffn_act_q8, u8, "q8_1 MMQ activations of dense FFN projections")                           \
  X(ffn_act_a, u8, "dense FFN quantized activations (int8 / NVFP4 / FP8)")                     \
  X(ffn_act_scale, f32, "dense FFN activation scales")                                         \
  X(fp8_act, fp8_e4m3, "FP8 block-scaled projection activations [m_pad, K]")                   \
  X(fp8_act_scale, f32, "FP8 activation scales [m_pad, cdiv(K,128)]")                          \
  X(lora_xa, bf16, "LoRA x·A^T [m, rank]")                                                     \
  X(lora_delta, bf16, "LoRA delta [m, max width]")                                             \
  X(lora_hact, bf16, "LoRA hidden activation [m, intermediate]")                               \
  X(lora_seq_slot, i32, "adapter slot per token (-1 = none)")                                  \
  X(q2_dequant_scratch, bf16, "Q2 weights dequantised to BF16 [N, K]")                         \
  X(q2_act_q8, u8, "Q2 MMQ q8_1 activations")

enum class BufferId : std::size_t {
#define BUFFERLAB_BUFFER_ENUM(name, type, doc) name,
  BUFFERLAB_BUFFERS(BUFFERLAB_BUFFER_ENUM)
#undef BUFFERLAB_BUFFER_ENUM
};

struct BufferInfo {
  BufferId id;
  std::string_view name;
  DType element;
  std::string_view doc;
};

inline constexpr std::array kBufferRegistry = {
#define BUFFERLAB_BUFFER_INFO(name, type, doc) BufferInfo{BufferId::name, #name, DType::type, doc},
    BUFFERLAB_BUFFERS(BUFFERLAB_BUFFER_INFO)
#undef BUFFERLAB_BUFFER_INFO
};

inline constexpr std::size_t kNumBuffers = kBufferRegistry.size();

constexpr const BufferInfo& buffer_info(BufferId id) {
  return kBufferRegistry[static_cast<std::size_t>(id)];
}
constexpr std::string_view buffer_name(BufferId id) { return buffer_info(id).name; }

}  // namespace bufferlab
