// Attention, MLA and QSA op descriptors on small hand-worked configs: every access (buffer,
// byte offset, byte count, kind, value) is written out by hand in the comments, so a change of
// row, width, padding rule or sub-layout offset fails here before it reaches the verifier.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/ops/mla.h"
#include "bufferlab/core/ops/qsa.h"

namespace bufferlab {
namespace {

// One access, flattened for comparison; weight-pool accesses compare by kind only.
struct Acc {
  bool pool = false;
  BufferId buffer = BufferId::hidden_states;
  uint64_t offset = 0, bytes = 0;
  AccessKind kind = AccessKind::read;
  std::string value;
  friend bool operator==(const Acc&, const Acc&) = default;
};

void PrintTo(const Acc& a, std::ostream* os) {
  *os << (a.pool ? std::string("weights") : std::string(buffer_name(a.buffer))) << "+" << a.offset
      << " " << a.bytes << "B " << to_string(a.kind) << " '" << a.value << "'";
}

Acc arena(BufferId b, uint64_t offset, uint64_t bytes, AccessKind k, std::string value = {}) {
  return {false, b, offset, bytes, k, std::move(value)};
}
Acc pool_read() { return {true, BufferId::hidden_states, 0, 0, AccessKind::read, {}}; }

std::vector<Acc> flatten(const std::vector<Access>& accesses) {
  std::vector<Acc> out;
  for (const Access& a : accesses) {
    if (a.tensor.space == Space::weights)
      out.push_back({true, BufferId::hidden_states, 0, 0, a.kind, a.value});
    else
      out.push_back({false, a.tensor.buffer, a.begin(), a.tensor.bytes(), a.kind, a.value});
  }
  return out;
}

constexpr AccessKind kRead = AccessKind::read;
constexpr AccessKind kWrite = AccessKind::write;
constexpr AccessKind kPhantom = AccessKind::phantom_write;
using B = BufferId;

// h = 64, nq = 4, nkv = 2, hd = 16: qkv_dim = (4 + 2·2)·16 = 128 (192 gated), q width 64,
// kv width 32. Row bytes: qkv 256, Q copy / attn_output 128, K/V scratch 64.
ModelConfig attn_config(bool gated = false) {
  ModelConfig c;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.vocab_size = 100;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.num_hidden_layers = 2;
  c.attn_gated = gated;
  return c;
}

using Part = AttnStageOp::Part;

// 4 sequences of 8 blocks of 16 tokens.
const KvCacheGeometry kCache{16, 32, 8};

TEST(AttnStageOp, KScratchOnFp8PathPadsToCeil16WithPhantomRows) {
  // t = 5 on the FP8 path: K written as ceil16(5) = 16 rows, rows 5..15 phantom.
  const AttnStageOp op = AttnStageOp::make(attn_config(), Part::k_scratch, 0, 5, true, 0);
  EXPECT_EQ(op.shape().rows, 16u);
  EXPECT_EQ(op.shape().col0, 64u);  // [Q 64 | K 32 | V 32]
  EXPECT_EQ(op.shape().width, 32u);
  EXPECT_EQ(op.name(), "attn_k_scratch");
  EXPECT_EQ(flatten(op.accesses()),
            (std::vector<Acc>{
                arena(B::qkv_output, 0, 5 * 256, kRead, "qkv"),      // [5,128] bf16: 1280
                pool_read(),                                         // the RoPE table
                arena(B::ssm_qkvz, 0, 5 * 64, kWrite, "k_scratch"),  // [5,32]: 320
                arena(B::ssm_qkvz, 5 * 64, 11 * 64, kPhantom),       // rows 5..15: 320 + 704
            }));
}

TEST(AttnStageOp, VScratchSitsAtTheSizingsRowM) {
  // m = 20: V at row 20 → byte 20·64 = 1280; phantom rows 25..35 from byte 1600.
  const AttnStageOp op = AttnStageOp::make(attn_config(), Part::v_scratch, 0, 5, true, 20);
  EXPECT_EQ(op.shape().col0, 96u);
  EXPECT_EQ(flatten(op.accesses()), (std::vector<Acc>{
                                        arena(B::qkv_output, 0, 1280, kRead, "qkv"),
                                        arena(B::ssm_qkvz, 1280, 320, kWrite, "v_scratch"),
                                        arena(B::ssm_qkvz, 1600, 704, kPhantom),
                                    }));
}

TEST(AttnStageOp, BF16PathWritesExactlyTRows) {
  const AttnStageOp op = AttnStageOp::make(attn_config(), Part::k_scratch, 0, 5, false, 0);
  EXPECT_EQ(op.shape().rows, 5u);
  EXPECT_EQ(flatten(op.accesses()), (std::vector<Acc>{
                                        arena(B::qkv_output, 0, 1280, kRead, "qkv"),
                                        pool_read(),
                                        arena(B::ssm_qkvz, 0, 320, kWrite, "k_scratch"),
                                    }));
}

TEST(AttnStageOp, QCopyOfAMixedStepReadsTheRowsAfterTheDecodePart) {
  // 4 decode rows first: the prefill part starts at qkv row 4 = byte 1024. The Q copy is
  // never padded (only K and V follow the projection's rows, §5).
  const AttnStageOp op = AttnStageOp::make(attn_config(), Part::q_copy, 4, 5, true, 0);
  EXPECT_EQ(op.shape().rows, 5u);
  EXPECT_EQ(flatten(op.accesses()), (std::vector<Acc>{
                                        arena(B::qkv_output, 1024, 1280, kRead, "qkv"),
                                        pool_read(),
                                        arena(B::ssm_deinterleaved, 0, 5 * 128, kWrite, "q_copy"),
                                    }));
}

TEST(AttnStageOp, GatedModelKeepsTheGateInQkvOutput) {
  // Gated: qkv_dim 192 = [Q 64 | gate 64 | K 32 | V 32]; the Q copy is still nq·hd wide.
  const ModelConfig c = attn_config(true);
  const AttnStageOp q = AttnStageOp::make(c, Part::q_copy, 0, 5, false, 0);
  EXPECT_EQ(q.shape().width, 64u);
  EXPECT_EQ(q.src.bytes(), 5u * 384);
  EXPECT_EQ(AttnStageOp::make(c, Part::k_scratch, 0, 5, false, 0).shape().col0, 128u);
  EXPECT_EQ(AttnStageOp::make(c, Part::v_scratch, 0, 5, false, 0).shape().col0, 160u);
}

TEST(AttnStageOp, MetadataReadsAreCarriedThrough) {
  const Access meta{TensorRef{Space::arena, B::scratch, 64, {5}, DType::u32}, kRead,
                    "@meta.positions"};
  const AttnStageOp op = AttnStageOp::make(attn_config(), Part::q_copy, 0, 5, false, 0, {meta});
  const std::vector<Acc> acc = flatten(op.accesses());
  ASSERT_EQ(acc.size(), 4u);
  EXPECT_EQ(acc[1], arena(B::scratch, 64, 20, kRead, "@meta.positions"));
}

TEST(AttnPrefillOp, CoDispatchedStreamsReadTheirOwnKvRows) {
  // 2 streams of L = 3 (t = 6), V at row m = 20. K rows [0,3) and [3,6): bytes 0 and 192,
  // 192 each; V at 20·64 = 1280 and 23·64 = 1472; the K and V caches (pool) whole.
  const PrefillLaunch launch{0, 6, 2, 0, 6};
  const AttnPrefillOp op = AttnPrefillOp::make(attn_config(), false, launch, 20, kCache);
  EXPECT_EQ(flatten(op.accesses()), (std::vector<Acc>{
                                        arena(B::ssm_deinterleaved, 0, 6 * 128, kRead, "q_copy"),
                                        arena(B::ssm_qkvz, 0, 192, kRead, "k_scratch"),
                                        arena(B::ssm_qkvz, 192, 192, kRead, "k_scratch"),
                                        arena(B::ssm_qkvz, 1280, 192, kRead, "v_scratch"),
                                        arena(B::ssm_qkvz, 1472, 192, kRead, "v_scratch"),
                                        pool_read(),
                                        pool_read(),
                                        arena(B::attn_output, 0, 6 * 128, kWrite, "attn"),
                                    }));
}

TEST(AttnPrefillOp, MixedStepWritesAfterTheDecodeRows) {
  // 4 decode rows, t = 5: output rows 4..8 → byte 512, 640 bytes.
  const AttnPrefillOp op = AttnPrefillOp::make(attn_config(), true, {4, 5, 1, 0, 5}, 20, kCache);
  EXPECT_EQ(op.out.offset, 512u);
  EXPECT_EQ(op.out.bytes(), 640u);
  EXPECT_EQ(op.q.offset, 0u);  // the Q copy holds the prefill part only
  ASSERT_EQ(op.k.size(), 1u);
  EXPECT_EQ(op.k[0].bytes(), 320u);
}

TEST(AttnPrefillOp, SlabReadsKvCausallyUpToItsLastRow) {
  // t = 5000, slab rows [2048, 4096): Q at byte 2048·128 = 262144; K rows [0, 4096) =
  // 262144 bytes; V from row 8192 (m) = byte 524288.
  const TensorRef lists{Space::arena, B::qsa_select_scratch, 1000, {2048, 2}, DType::i32};
  const AttnPrefillOp op =
      AttnPrefillOp::make(attn_config(), false, {0, 5000, 1, 2048, 2048}, 8192, kCache, lists);
  EXPECT_EQ(op.q.offset, 262144u);
  ASSERT_EQ(op.k.size(), 1u);
  EXPECT_EQ(op.k[0].bytes(), 262144u);
  EXPECT_EQ(op.v[0].offset, 524288u);
  EXPECT_EQ(op.shape().list_width, 2u);
  const std::vector<Acc> acc = flatten(op.accesses());
  EXPECT_EQ(acc[5], arena(B::qsa_select_scratch, 1000, 2048 * 2 * 4, kRead, "qsa_lists"));
  EXPECT_EQ(op.out.offset, 262144u);
}

TEST(AttnPrefillOp, SlabAcrossStreamsSplitsItsKvReads) {
  // 2 streams of 2000, slab [0, 2048): stream 0 rows [0,2000), stream 1 rows [2000,2048).
  const AttnPrefillOp op =
      AttnPrefillOp::make(attn_config(), false, {0, 4000, 2, 0, 2048}, 4000, kCache);
  ASSERT_EQ(op.k.size(), 2u);
  EXPECT_EQ(op.k[0].offset, 0u);
  EXPECT_EQ(op.k[0].shape[0], 2000u);
  EXPECT_EQ(op.k[1].offset, 2000u * 64);
  EXPECT_EQ(op.k[1].shape[0], 48u);
  EXPECT_EQ(op.v[1].offset, 6000u * 64);
}

TEST(AttnPrefillOp, RejectsALaunchOutsideThePrefillPart) {
  EXPECT_THROW(AttnPrefillOp::make(attn_config(), false, {0, 5, 1, 4, 2}, 20, kCache), Error);
  EXPECT_THROW(AttnPrefillOp::make(attn_config(), false, {0, 5, 2, 0, 5}, 20, kCache), Error);
}

TEST(AttnDecodeOp, SplitKWritesEverySlotOfTheDecodeRows) {
  // rows 8, splits 4: slot ((seq·4)+head)·4+split, the last (7,3,3) = 127; 128 slots of
  // (16+2) f32 = 72 bytes → 9216 bytes from 0.
  const AttnDecodeOp op = AttnDecodeOp::make(attn_config(), false, 8, 8, 4, false, kCache);
  EXPECT_TRUE(op.split_k());
  EXPECT_EQ(op.name(), "attn_decode");
  EXPECT_EQ(flatten(op.accesses()),
            (std::vector<Acc>{
                arena(B::qkv_output, 0, 8 * 256, kRead, "qkv"),
                pool_read(),  // K cache
                pool_read(),  // V cache
                pool_read(),  // RoPE table
                arena(B::splitk_workspace, 0, 9216, kWrite, "splitk_partials"),
            }));
  const SplitKMergeOp merge = SplitKMergeOp::make(attn_config(), 8, 8, 4);
  EXPECT_EQ(flatten(merge.accesses()),
            (std::vector<Acc>{
                arena(B::splitk_workspace, 0, 9216, kRead, "splitk_partials"),
                arena(B::attn_output, 0, 8 * 128, kWrite, "attn"),
            }));
}

TEST(AttnDecodeOp, OneSplitWritesTheOutputDirectly) {
  const AttnDecodeOp op = AttnDecodeOp::make(attn_config(), true, 8, 8, 1, false, kCache);
  EXPECT_FALSE(op.split_k());
  const std::vector<Acc> acc = flatten(op.accesses());
  ASSERT_EQ(acc.size(), 5u);  // qkv, K cache, V cache, RoPE table, output
  EXPECT_EQ(acc[4], arena(B::attn_output, 0, 1024, kWrite, "attn"));
}

TEST(AttnDecodeOp, VerifyNeverUsesSplitK) {
  // Split-K serves decode and mixed steps only (docs/spec/buffers.md §2): verify ignores the split
  // count.
  const AttnDecodeOp op = AttnDecodeOp::make(attn_config(), false, 17, 17, 4, true, kCache);
  EXPECT_EQ(op.shape().splits, 1u);
  EXPECT_EQ(op.name(), "attn_verify");
  for (const Access& a : op.accesses()) EXPECT_NE(a.tensor.buffer, B::splitk_workspace);
  EXPECT_EQ(op.out.bytes(), 17u * 128);
}

TEST(AttnGateOp, GatesInPlaceReadingTheGateFromQkv) {
  // Gated: qkv rows of 192 bf16 = 384 bytes; attn_output [5,64] = 640 bytes in place.
  const AttnGateOp op = AttnGateOp::make(attn_config(true), 5);
  EXPECT_EQ(flatten(op.accesses()), (std::vector<Acc>{
                                        arena(B::qkv_output, 0, 1920, kRead, "qkv"),
                                        arena(B::attn_output, 0, 640, kRead, "attn"),
                                        arena(B::attn_output, 0, 640, kWrite, "attn_gated"),
                                    }));
}

// index_n_heads 2, index_head_dim 8, index_topk 8, ratio 4, max_seq_len 100:
// qk width (2+1)·8 = 24; score width cdiv(100,4) = 25; list width 8/4 = 2.
// Regions for 2048 rows: qk 2048·24·2 = 98304 → q_post at 98304, 2048·2·8·4 = 131072 →
// scores at 229376, 2048·25·4 = 204800 → lists at 434176, 2048·2·4 = 16384 → end 450560.
ModelConfig qsa_config() {
  ModelConfig c = attn_config();
  c.index_n_heads = 2;
  c.index_head_dim = 8;
  c.index_topk = 8;
  c.index_compress_ratio = 4;
  return c;
}

TEST(QsaScratchLayout, RegionsOfA2048RowSlab) {
  const QsaScratchLayout l = QsaScratchLayout::make(qsa_config(), 100);
  EXPECT_EQ(l.qk_width, 24u);
  EXPECT_EQ(l.score_width, 25u);
  EXPECT_EQ(l.list_width, 2u);
  EXPECT_EQ(l.q_post_offset, 98304u);
  EXPECT_EQ(l.scores_offset, 229376u);
  EXPECT_EQ(l.lists_offset, 434176u);
  EXPECT_EQ(l.bytes, 450560u);
  // The op layout and the §4.8 sizing are computed independently and must agree here.
  RunShape s;
  s.max_batch_tokens = 64;
  s.max_seq_len = 100;
  EXPECT_EQ(BufferSizes::from_config(qsa_config(), s).qsa_select_scratch, l.bytes);
  EXPECT_THROW(QsaScratchLayout::make(attn_config(), 100), Error);
}

TEST(QsaIndexerOp, StagesOfASlabAtTheRegionOffsets) {
  // A mixed step: 4 decode rows, t = 2053; the second slab holds rows 2048..2052 (5 rows).
  using Stage = QsaIndexerOp::Stage;
  const ModelConfig c = qsa_config();
  const PrefillLaunch slab{4, 2053, 1, 2048, 5};
  // qk: norm rows 4 + 2048 = 2052 → byte 2052·128 = 262656, [5,64] = 640 bytes → qk [5,24].
  EXPECT_EQ(flatten(QsaIndexerOp::make(c, Stage::qk, 100, slab).accesses()),
            (std::vector<Acc>{
                arena(B::norm_output, 262656, 640, kRead, "norm"),
                pool_read(),
                arena(B::qsa_select_scratch, 0, 240, kWrite, "qsa_qk"),
            }));
  EXPECT_EQ(flatten(QsaIndexerOp::make(c, Stage::prep, 100, slab).accesses()),
            (std::vector<Acc>{
                arena(B::qsa_select_scratch, 0, 240, kRead, "qsa_qk"),
                arena(B::qsa_select_scratch, 98304, 5 * 16 * 4, kWrite, "qsa_q_post"),
            }));
  EXPECT_EQ(flatten(QsaIndexerOp::make(c, Stage::score, 100, slab).accesses()),
            (std::vector<Acc>{
                arena(B::qsa_select_scratch, 98304, 320, kRead, "qsa_q_post"),
                pool_read(),
                arena(B::qsa_select_scratch, 229376, 5 * 25 * 4, kWrite, "qsa_scores"),
            }));
  const QsaIndexerOp topk = QsaIndexerOp::make(c, Stage::topk, 100, slab);
  EXPECT_EQ(flatten(topk.accesses()),
            (std::vector<Acc>{
                arena(B::qsa_select_scratch, 229376, 500, kRead, "qsa_scores"),
                arena(B::qsa_select_scratch, 434176, 5 * 2 * 4, kWrite, "qsa_lists"),
            }));
  EXPECT_THROW(QsaIndexerOp::make(c, Stage::qk, 100, {0, 3000, 1, 0, 2049}), Error);
}

// MLA: h 64, nq 4, q_lora_rank 24, kv_lora_rank 32, rope 8, nope 16, v_head_dim 16.
// Widths: q 4·24 = 96; latent 32+8 = 40; absorbed 4·40 = 160; core out 4·32 = 128;
// q_rope 4·8 = 32; V up 4·16 = 64. T = 5.
ModelConfig mla_config() {
  ModelConfig c = attn_config();
  c.num_key_value_heads = 4;
  c.head_dim = 24;
  c.q_lora_rank = 24;
  c.kv_lora_rank = 32;
  c.qk_rope_head_dim = 8;
  c.qk_nope_head_dim = 16;
  c.v_head_dim = 16;
  return c;
}

TEST(MlaStageOp, FootprintsOfEveryStage) {
  using Stage = MlaStageOp::Stage;
  const ModelConfig c = mla_config();
  auto acc = [&](Stage s) { return flatten(MlaStageOp::make(c, s, 5).accesses()); };
  EXPECT_EQ(acc(Stage::q_latent_norm), (std::vector<Acc>{
                                           arena(B::ssm_ba, 0, 240, kRead, "q_latent_raw"),
                                           pool_read(),
                                           arena(B::ssm_ba, 0, 240, kWrite, "q_latent"),
                                       }));
  EXPECT_EQ(acc(Stage::k_rope), (std::vector<Acc>{
                                    arena(B::attn_output, 0, 400, kRead, "kv_latent"),
                                    arena(B::ssm_ba, 0, 80, kWrite, "k_rope"),
                                }));
  EXPECT_EQ(acc(Stage::kv_cache_write), (std::vector<Acc>{
                                            arena(B::attn_output, 0, 400, kRead, "kv_latent"),
                                            arena(B::ssm_ba, 0, 80, kRead, "k_rope"),
                                        }));
  EXPECT_EQ(acc(Stage::q_rope), (std::vector<Acc>{
                                    arena(B::qkv_output, 0, 960, kRead, "mla_q"),
                                    arena(B::ssm_conv_out_f32, 0, 320, kWrite, "q_rope"),
                                }));
  EXPECT_EQ(acc(Stage::q_absorb), (std::vector<Acc>{
                                      arena(B::qkv_output, 0, 960, kRead, "mla_q"),
                                      arena(B::ssm_conv_out_f32, 0, 320, kRead, "q_rope"),
                                      pool_read(),
                                      arena(B::ssm_deinterleaved, 0, 1600, kWrite, "q_absorbed"),
                                  }));
  EXPECT_EQ(acc(Stage::v_up), (std::vector<Acc>{
                                  arena(B::attn_output, 0, 1280, kRead, "attn_latent"),
                                  pool_read(),
                                  arena(B::ssm_deinterleaved, 0, 640, kWrite, "attn_v"),
                              }));
}

TEST(MlaAttnOp, PrefillRowsAfterTheDecodeRows) {
  // Rows 4..8: absorbed Q at 4·160·2 = 1280 (1600 bytes), output at 4·128·2 = 1024 (1280).
  const MlaAttnOp op = MlaAttnOp::make(mla_config(), false, 4, 5);
  EXPECT_EQ(op.name(), "mla_attn_prefill");
  EXPECT_EQ(flatten(op.accesses()),
            (std::vector<Acc>{
                arena(B::ssm_deinterleaved, 1280, 1600, kRead, "q_absorbed"),
                pool_read(),
                arena(B::attn_output, 1024, 1280, kWrite, "attn_latent"),
            }));
  EXPECT_EQ(MlaAttnOp::make(mla_config(), true, 0, 4).name(), "mla_attn_decode");
}

TEST(MlaHomes, SpecFormulasHoldTheLatentAndQuery) {
  // The chosen homes at T = m = 5: kv_latent 400 ≤ attn_output (m·nq·(kvl+rope)·2 = 1600),
  // q_absorbed 1600 ≤ ssm_deinterleaved, q_rope 320 ≤ ssm_conv_out_f32, k_rope 80 and
  // q_latent 240 ≤ ssm_ba (floor 256).
  RunShape s;
  s.max_batch_tokens = 5;
  const BufferSizes z = BufferSizes::from_config(mla_config(), s);
  EXPECT_GE(z.attn_output, 400u);
  EXPECT_GE(z.ssm_deinterleaved, 1600u);
  EXPECT_GE(z.ssm_conv_out_f32, 320u);
  EXPECT_GE(z.ssm_ba, 240u);
}

}  // namespace
}  // namespace bufferlab
