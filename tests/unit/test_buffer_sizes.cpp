// BufferSizes against values computed BY HAND from docs/spec/buffers.md §2–§3 (the arithmetic is
// in the comments), the §6 reference numbers, intermediate quantities and overflow errors.
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/corrections.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/presets.h"

namespace bufferlab {
namespace {

// docs/spec/buffers.md §6: the qwen3-next-80b reference model (its preset is written out from the
// spec text; the CLI test ReferenceNumbersOfSpecSection6 checks the same numbers through it).
ModelConfig qwen3_next_reference() { return preset("qwen3-next-80b"); }

TEST(BufferSizes, Spec6ReferenceNumbers) {
  const auto s = BufferSizes::from_config(qwen3_next_reference(), 1, 4096, 16, 32);
  EXPECT_EQ(s.hidden_states, 4096u);
  EXPECT_EQ(s.qkv_output, 294912u);
  EXPECT_EQ(s.attn_output, 8192u);
  EXPECT_EQ(s.gate_logits, 1024u);
  EXPECT_EQ(s.logits, 303872u);
  EXPECT_EQ(s.ssm_qkvz, 393216u);
  EXPECT_EQ(s.ssm_ba, 256u);
  EXPECT_EQ(s.ssm_deinterleaved, 393216u);
  EXPECT_EQ(s.ssm_gates, 256u);
}

TEST(BufferSizes, ReferenceModelRemainingFieldsByHand) {
  const auto s = BufferSizes::from_config(qwen3_next_reference(), 1, 4096, 16, 32);
  EXPECT_EQ(s.residual, 4096u);
  EXPECT_EQ(s.norm_output, 4096u);        // 1·max(2048, 0)·2
  EXPECT_EQ(s.gate_logits_f32, 2048u);    // 1·512·4
  EXPECT_EQ(s.moe_router_in_f32, 8192u);  // 1·2048·4
  EXPECT_EQ(s.moe_output, 65536u);        // m_pad 16 · 2048 · 2
  EXPECT_EQ(s.ssm_conv_out_f32, 49152u);  // 1·12288·4
  // moe_scratch 80 + prefill_meta 1048; bt_meta 32768 + max(3840 + 640·257, 768 + 128·257)
  // = 201088; q12(8, 1, 10, 1) = 640+32768+32+64+128+40+32+64 = 33768.
  EXPECT_EQ(s.scratch, 201088u);
  EXPECT_EQ(s.expert_gate_out, 163840u);  // 2·16·max(10·512, 5120)
  EXPECT_EQ(s.expert_up_out, 163840u);
  EXPECT_EQ(s.expert_down_out, 655360u);  // 16·10·2048·2
  // auto split-K: clamp(cdiv(2·132, 16), 1, 16) = 16 splits; slots 32·16·16 = 8192.
  EXPECT_EQ(s.splitk_workspace, 8192u * 258u * 4u);
  // nt = cdiv(1,64) + 16 = 17; per region 16384+16384+32768+16384+256 = 82176.
  EXPECT_EQ(s.gdn_fla_scratch, 17u * 32u * 82176u);
  EXPECT_EQ(s.ssd_scratch, 0u);
  EXPECT_EQ(s.o_latent, 256u);
  EXPECT_EQ(s.norm_unit_w, 4096u);
  EXPECT_EQ(s.hc_streams, 256u);
  EXPECT_EQ(s.hc_post, 256u);
  EXPECT_EQ(s.hc_comb, 256u);
  EXPECT_EQ(s.hc_lowrank_scratch, 256u);
  EXPECT_EQ(s.qsa_select_scratch, 256u);
  EXPECT_EQ(s.token_ids, 256u);
  EXPECT_EQ(s.ffn_act_q8, 0u);
  EXPECT_EQ(s.ffn_act_a, 0u);
  EXPECT_EQ(s.ffn_act_scale, 0u);
  EXPECT_EQ(s.fp8_act, 65536u);       // 16 · max(2048, 4096, 0, 4096)
  EXPECT_EQ(s.fp8_act_scale, 2048u);  // 16 · 32 · 4
  EXPECT_EQ(s.lora_xa, 0u);
  EXPECT_EQ(s.q2_dequant_scratch, 0u);
  EXPECT_EQ(s.q2_act_q8, 0u);
  EXPECT_EQ(s.params.R, 32u);
  EXPECT_EQ(s.params.max_blocks, 257u);
  EXPECT_EQ(s.params.m_pad, 16u);
  EXPECT_EQ(s.params.splitk_splits, 16u);
}

// A small dense model with multimodal RoPE on the legacy gb10 target, m = 17.
ModelConfig dense_mrope() {
  ModelConfig c;
  c.hidden_size = 100;
  c.intermediate_size = 300;
  c.vocab_size = 1000;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 24;
  c.num_hidden_layers = 3;
  c.mrope_section = {8, 2, 2};
  return c;
}

TEST(BufferSizes, DenseMropeLegacyTargetByHand) {
  const auto s = BufferSizes::from_config(dense_mrope(), 17, 100, 0, 1, Target::named("gb10"));
  EXPECT_EQ(s.params.pos_streams, 3u);
  EXPECT_EQ(s.params.max_blocks, 256u);   // kv_block_size 0
  EXPECT_EQ(s.params.R, 32u);             // rung(max(1, 32))
  EXPECT_EQ(s.qkv_output, 12288u);        // 32·(4 + 4)·24·2
  EXPECT_EQ(s.logits, 34000u);            // min(17, 160)·1000·2
  EXPECT_EQ(s.splitk_workspace, 4992u);   // legacy: 48 slots · 26 · 4
  EXPECT_EQ(s.params.splitk_splits, 1u);  // nq·R = 128 ≥ 48
  EXPECT_EQ(s.ffn_act_q8, 1083392u);      // 17·512·4 + 2^20
  EXPECT_EQ(s.ffn_act_a, 9600u);          // 32·300
  EXPECT_EQ(s.ffn_act_scale, 1280u);      // 32·10·4
  EXPECT_EQ(s.expert_gate_out, 19200u);   // 2·32·300
  EXPECT_EQ(s.expert_down_out, 6400u);    // 32·100·2
  // prefill_meta: pos 204 → slot 208 → bt align(344,4) = 344 → sl 1368 → 1372, + 136;
  // bt_meta = 32768 + max(3840 + 640·256, 768 + 128·256) = 200448.
  EXPECT_EQ(s.scratch, 200448u);
  EXPECT_EQ(s.gate_logits, 256u);
  EXPECT_EQ(s.gdn_fla_scratch, 0u);
}

TEST(BufferSizes, PaddedBatchRungs) {
  EXPECT_EQ(padded_batch_rung(1), 2u);
  EXPECT_EQ(padded_batch_rung(32), 32u);
  EXPECT_EQ(padded_batch_rung(33), 48u);
  EXPECT_EQ(padded_batch_rung(36), 48u);
  EXPECT_EQ(padded_batch_rung(128), 128u);
  EXPECT_EQ(padded_batch_rung(129), 129u);
  EXPECT_EQ(padded_batch_rung(192), 192u);
}

TEST(BufferSizes, Q12BytesByHand) {
  // n 4, L 100, top_k 2, pos_streams 3: T = 400; moe align(6400,64) = 6400; meta 4·4096;
  // pos 3·1600; slots 3200; ptrs 2·32; cu align(20,8) = 24; kv 16; h_state 32.
  EXPECT_EQ(q12_bytes(4, 100, 2, 3), 6400u + 16384u + 4800u + 3200u + 64u + 24u + 16u + 32u);
}

TEST(BufferSizes, SplitKPolicies) {
  Target t;  // h200, auto
  EXPECT_EQ(splitk_splits(t, 16, 32), 16u);
  EXPECT_EQ(splitk_splits(t, 64, 32), 5u);    // cdiv(264, 64)
  EXPECT_EQ(splitk_splits(t, 1000, 32), 1u);  // clamped at 1
  t.set_splitk("legacy");
  EXPECT_EQ(splitk_splits(t, 1, 32), 4u);   // floor(132 / 32)
  EXPECT_EQ(splitk_slots(t, 1, 32), 132u);  // legacy: sm_count slots
  t.set_splitk("40");
  EXPECT_EQ(splitk_splits(t, 1, 32), 16u);  // pinned, clamped to 16
  EXPECT_THROW(t.set_splitk("0"), Error);
  EXPECT_THROW(t.set_splitk("fast"), Error);
}

TEST(BufferSizes, NamedTargets) {
  EXPECT_EQ(Target::named("b200").sm_count, 148u);
  EXPECT_EQ(Target::named("gb10").splitk_policy, SplitKPolicy::legacy);
  EXPECT_THROW(Target::named("a100"), Error);
}

TEST(BufferSizes, OverflowIsAnErrorNamingTheField) {
  ModelConfig c = dense_mrope();
  c.vocab_size = uint64_t{1} << 62;
  try {
    BufferSizes::from_config(c, 17, 100, 16, 1);
    FAIL() << "expected an overflow error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("logits"), std::string::npos) << e.what();
  }
}

TEST(BufferSizes, RejectsZeroTokensAndSpecMutants) {
  EXPECT_THROW(BufferSizes::from_config(dense_mrope(), 0, 100, 16, 1), Error);
  EXPECT_THROW(BufferSizes::from_config(dense_mrope(), 1, 100, 16, 0), Error);
  EXPECT_THROW(BufferSizes::from_config(dense_mrope(), RunShape{}, Target{},
                                        Sizing{SizingKind::spec, Mutant::B8}),
               Error);
}

// `corrected` = `spec` + the documented corrections: no other field may move.
TEST(BufferSizes, CorrectedDiffersFromSpecOnlyInDocumentedCorrections) {
  std::set<BufferId> corrected_fields;
  for (const Correction& c : corrections()) corrected_fields.insert(c.field);
  for (const auto& info : list_presets()) {
    const ModelConfig config = preset(info.name);
    const auto a = BufferSizes::from_config(config, RunShape{}, Target{}, Sizing::spec());
    const auto b = BufferSizes::from_config(config, RunShape{}, Target{}, Sizing::corrected());
    for (const auto& f : kBufferRegistry) {
      if (corrected_fields.count(f.id)) {
        EXPECT_GE(b.bytes(f.id), a.bytes(f.id)) << info.name << " " << f.name;
      } else {
        EXPECT_EQ(a.bytes(f.id), b.bytes(f.id)) << info.name << " " << f.name;
      }
    }
  }
}

// F1: tiny-gdn has nv·vd = 4·128 = 512 > nq·hd = 4·72 = 288 (and no Mamba), so the GDN core
// output [m, 512] bf16 needs m·1024 bytes where spec gives m·576.
TEST(BufferSizes, CorrectionF1HoldsTheGdnCoreOutput) {
  const ModelConfig c = preset("tiny-gdn");
  ASSERT_EQ(c.linear_num_value_heads * c.linear_value_head_dim, 512u);
  RunShape s;
  s.max_batch_tokens = 100;
  EXPECT_EQ(BufferSizes::from_config(c, s, Target{}, Sizing::corrected()).attn_output,
            100u * 512 * 2);
  EXPECT_LT(BufferSizes::from_config(c, s, Target{}, Sizing::spec()).attn_output, 100u * 512 * 2);
}

TEST(BufferSizes, TotalBytesSumsEveryField) {
  const auto s = BufferSizes::from_config(qwen3_next_reference(), RunShape{});
  uint64_t sum = 0;
  for (const auto& info : kBufferRegistry) sum += s.bytes(info.id);
  EXPECT_EQ(s.total_bytes(), sum);
}

}  // namespace
}  // namespace bufferlab

namespace bufferlab {
namespace {

// The sizing mutants change exactly what the catalogue says (whether the verifier catches
// them is the verifier's test); here: the right fields move, and in the right direction.
TEST(SizingMutants, ChangeTheCataloguedFieldsOnly) {
  ModelConfig c = dense_mrope();
  const RunShape shape{17, 4096, 16, 36};
  const auto good = BufferSizes::from_config(c, shape, Target{}, Sizing::corrected());
  const auto with = [&](Mutant m) {
    return BufferSizes::from_config(c, shape, Target{}, Sizing::mutant_of_corrected(m));
  };
  const auto b4 = with(Mutant::B4);  // m = 17: 17 rows instead of 32
  EXPECT_LT(b4.qkv_output, good.qkv_output);
  EXPECT_LT(b4.moe_output, good.moe_output);
  EXPECT_LT(b4.expert_gate_out, good.expert_gate_out);
  EXPECT_EQ(b4.fp8_act, good.fp8_act);  // not a catalogued field of B4
  EXPECT_EQ(b4.params.m_pad, 32u);      // the GEMM still writes 32 rows
  EXPECT_EQ(with(Mutant::B1).params.pos_streams, 1u);
  EXPECT_EQ(good.params.pos_streams, 3u);
  EXPECT_EQ(with(Mutant::B5).splitk_workspace, 48u * 26u * 4u);
  EXPECT_EQ(with(Mutant::B9).params.R, 36u);  // max_batch_size 36, no rung (48)
  EXPECT_EQ(good.params.R, 48u);
  EXPECT_EQ(with(Mutant::B10).params.logits_tokens, 17u);  // min(m, ...) still caps at m
  // Mutants of layouts, plans and kernels leave the sizing alone.
  for (Mutant m : {Mutant::B3, Mutant::B7, Mutant::B13, Mutant::B14, Mutant::M_TIE, Mutant::M_SKCOL,
                   Mutant::M_GDNCARRY, Mutant::M_SSDSTATE, Mutant::M_GROUP, Mutant::M_SKORDER,
                   Mutant::M_CAUSAL, Mutant::M_GQA, Mutant::M_MERGE, Mutant::M_BLOCK,
                   Mutant::M_MROPE, Mutant::M_SINK})
    EXPECT_EQ(with(m).total_bytes(), good.total_bytes()) << to_string(m);
}

TEST(SizingMutants, B2B11B15ShrinkTheirBuffersWhereTheyBite) {
  const auto sized = [](const ModelConfig& c, uint64_t m, Mutant mutant) {
    return BufferSizes::from_config(c, RunShape{m, 4096, 16, 32}, Target{},
                                    Sizing::mutant_of_corrected(mutant));
  };
  // B2: at m = 65536 the co-dispatch staging (q12) is the largest scratch term.
  const ModelConfig dense = dense_mrope();
  EXPECT_LT(sized(dense, 65536, Mutant::B2).scratch, sized(dense, 65536, Mutant::none).scratch);
  // B11: dense layers wider than top_k · moe_intermediate.
  ModelConfig mixed = dense_mrope();
  mixed.num_experts = 8;
  mixed.num_experts_per_tok = 2;
  mixed.moe_intermediate_size = 50;
  mixed.first_k_dense = 1;
  EXPECT_EQ(sized(mixed, 17, Mutant::B11).expert_gate_out, 2u * 32u * 100u);
  EXPECT_EQ(sized(mixed, 17, Mutant::none).expert_gate_out, 2u * 32u * 300u);
  // B15: the chunked GDN scratch without its 16-chunk margin.
  const ModelConfig gdn = qwen3_next_reference();
  EXPECT_EQ(sized(gdn, 1, Mutant::B15).params.gdn_chunks, 1u);
  EXPECT_EQ(sized(gdn, 1, Mutant::none).params.gdn_chunks, 17u);
}

TEST(SizingMutants, NamesFollowTheCatalogue) {
  EXPECT_STREQ(to_string(Mutant::M_TIE), "M-TIE");
  EXPECT_EQ(mutant_from_string("M-SKCOL"), Mutant::M_SKCOL);
  EXPECT_EQ(mutant_from_string("M-SKORDER"), Mutant::M_SKORDER);
  EXPECT_EQ(mutant_from_string("B12"), Mutant::B12);
  EXPECT_THROW(mutant_from_string("B99"), Error);
  EXPECT_EQ(mutant_from_string("M-GROUP"), Mutant::M_GROUP);
  EXPECT_STREQ(to_string(Mutant::M_CAUSAL), "M-CAUSAL");
  EXPECT_EQ(mutant_from_string("M-MROPE"), Mutant::M_MROPE);
  EXPECT_EQ(mutant_from_string("M-SINK"), Mutant::M_SINK);
  EXPECT_EQ(all_mutants().size(), 27u);
}

}  // namespace
}  // namespace bufferlab
