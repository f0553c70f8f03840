// MoE and dense-FFN op descriptors: footprints worked out by hand on small shapes (top-k
// regions, router paths, expert buffers, latent MoE, zero experts, every dense-FFN
// activation format), so a wrong offset or extent fails here before any plan is built.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "test_fixtures.h"

namespace bufferlab {
namespace {

// h = 64, vocab 1000, E = 8 routed + 2 zero experts, top_k = 3, moe_intermediate 32.
ModelConfig moe_config() { return testing::small_moe_config(); }

void expect_ref(const TensorRef& t, BufferId buffer, uint64_t offset, uint64_t bytes, DType dtype) {
  EXPECT_EQ(t.space, Space::arena) << t.to_string();
  EXPECT_EQ(t.buffer, buffer) << t.to_string();
  EXPECT_EQ(t.offset, offset) << t.to_string();
  EXPECT_EQ(t.bytes(), bytes) << t.to_string();
  EXPECT_EQ(t.dtype, dtype) << t.to_string();
}

bool same_ref(const TensorRef& a, const TensorRef& b) {
  return a.space == b.space && a.buffer == b.buffer && a.offset == b.offset && a.shape == b.shape &&
         a.dtype == b.dtype;
}

const Access* find(const std::vector<Access>& v, BufferId id, AccessKind kind) {
  for (const Access& a : v)
    if (a.tensor.space == Space::arena && a.tensor.buffer == id && a.kind == kind) return &a;
  return nullptr;
}

TEST(TopKRegions, FiveRowsTopThree) {
  // 5 rows · 3 = 15 ids (u32, 60 B) at 0; 15 weights (f32, 60 B) at 4·5·3 = 60; end 120.
  const TopKRegions r = topk_regions(5, 3);
  EXPECT_EQ(r.ids_offset, 0u);
  EXPECT_EQ(r.ids_bytes, 60u);
  EXPECT_EQ(r.weights_offset, 60u);
  EXPECT_EQ(r.weights_bytes, 60u);
  EXPECT_EQ(r.end(), 120u);
  // §4.4: the co-dispatched moe region is align(T·top_k·8, 64) = align(120, 64) = 128 bytes.
  EXPECT_LE(r.end(), 128u);
}

TEST(TopKRegions, OverflowIsAnError) { EXPECT_THROW(topk_regions(uint64_t{1} << 62, 8), Error); }

TEST(MoeTopK, WritesIdsAndWeightsIntoScratch) {
  const MoeTopKOp op = MoeTopKOp::make(moe_config(), 5, /*logits_f32=*/false, /*hash=*/false);
  const std::vector<Access> acc = op.accesses();
  ASSERT_EQ(acc.size(), 3u);  // logits, ids, weights (softmax: no bias)
  // gate_logits bf16 [5, 8 + 2] = 100 B.
  expect_ref(acc[0].tensor, BufferId::gate_logits, 0, 100, DType::bf16);
  EXPECT_EQ(acc[0].kind, AccessKind::read);
  expect_ref(acc[1].tensor, BufferId::scratch, 0, 60, DType::u32);
  expect_ref(acc[2].tensor, BufferId::scratch, 60, 60, DType::f32);
  EXPECT_EQ(acc[1].kind, AccessKind::write);
  EXPECT_EQ(acc[2].kind, AccessKind::write);
  EXPECT_EQ(acc[1].value, "topk_ids");
  EXPECT_EQ(acc[2].value, "topk_weights");
}

TEST(MoeTopK, SigmoidWithBiasReadsTheBiasSoftmaxDoesNot) {
  ModelConfig c = moe_config();
  c.use_routing_bias = true;
  EXPECT_FALSE(MoeTopKOp::make(c, 5, true, false).use_bias);
  c.scoring_func = "sigmoid";
  const MoeTopKOp op = MoeTopKOp::make(c, 5, true, false);
  EXPECT_TRUE(op.use_bias);
  // gate_logits_f32 [5, 10] = 200 B; bias f32 [10] in the weight pool.
  expect_ref(op.logits, BufferId::gate_logits_f32, 0, 200, DType::f32);
  EXPECT_EQ(op.bias.space, Space::weights);
  EXPECT_EQ(op.bias.bytes(), 40u);
  EXPECT_EQ(op.accesses().size(), 4u);
}

TEST(MoeTopK, HashLayerReadsTokenIdsAndTable) {
  const MoeTopKOp op = MoeTopKOp::make(moe_config(), 5, false, /*hash=*/true);
  const std::vector<Access> acc = op.accesses();
  const Access* tok = find(acc, BufferId::token_ids, AccessKind::read);
  ASSERT_NE(tok, nullptr);
  expect_ref(tok->tensor, BufferId::token_ids, 0, 20, DType::u32);  // u32 [5]
  EXPECT_EQ(tok->value, "@token_ids");
  // tid2eid i32 [vocab 1000, top_k 3] in the weight pool.
  EXPECT_EQ(op.tid2eid.space, Space::weights);
  EXPECT_EQ(op.tid2eid.bytes(), 12000u);
  EXPECT_NE(op.params().find("moe_topk_hash(rows=5"), std::string::npos) << op.params();
}

TEST(MoeRouter, EveryPrecisionPath) {
  const ModelConfig c = moe_config();
  // bf16: norm_output bf16 [5, 64] = 640 B → gate_logits bf16 [5, 10] = 100 B.
  const MoeRouterOp bf = MoeRouterOp::make(c, 5, RouterPrecision::bf16);
  expect_ref(bf.input, BufferId::norm_output, 0, 640, DType::bf16);
  expect_ref(bf.logits, BufferId::gate_logits, 0, 100, DType::bf16);
  EXPECT_EQ(bf.input_value, "norm");
  // fp32-gate: same input → gate_logits_f32 f32 [5, 10] = 200 B.
  const MoeRouterOp fg = MoeRouterOp::make(c, 5, RouterPrecision::fp32_gate);
  expect_ref(fg.input, BufferId::norm_output, 0, 640, DType::bf16);
  expect_ref(fg.logits, BufferId::gate_logits_f32, 0, 200, DType::f32);
  // fp32-routing: moe_router_in_f32 f32 [5, 64] = 1280 B → gate_logits_f32.
  const MoeRouterOp fr = MoeRouterOp::make(c, 5, RouterPrecision::fp32_routing);
  expect_ref(fr.input, BufferId::moe_router_in_f32, 0, 1280, DType::f32);
  expect_ref(fr.logits, BufferId::gate_logits_f32, 0, 200, DType::f32);
  EXPECT_EQ(fr.input_value, "norm_f32");
  EXPECT_EQ(fr.params(), "moe_router(rows=5,h=64,experts=10,path=fp32-routing)");
}

TEST(MoeExperts, BufferFootprintsFiveRows) {
  const ModelConfig c = moe_config();
  // Gathered rows: expert_down_out bf16 [5·3, 64] = 1920 B, from norm_output [5, 64].
  const MoeGatherOp g = MoeGatherOp::make(c, 5);
  expect_ref(g.input, BufferId::norm_output, 0, 640, DType::bf16);
  expect_ref(g.gathered, BufferId::expert_down_out, 0, 1920, DType::bf16);
  // gate / up: [5][3·32] bf16 = 960 B each, token-major.
  const MoeExpertGemmOp gate = MoeExpertGemmOp::make(c, 5, ExpertProj::gate);
  const MoeExpertGemmOp up = MoeExpertGemmOp::make(c, 5, ExpertProj::up);
  EXPECT_TRUE(same_ref(gate.input, g.gathered));
  expect_ref(gate.output, BufferId::expert_gate_out, 0, 960, DType::bf16);
  expect_ref(up.output, BufferId::expert_up_out, 0, 960, DType::bf16);
  EXPECT_EQ(gate.dims.K, 64u);
  EXPECT_EQ(gate.dims.N, 32u);
  EXPECT_EQ(gate.weight.bytes(), 8u * 32 * 64 * 2);  // [E, I, D] bf16
  // down: expert_gate_out [5][96] → expert_down_out [15, 64] = 1920 B (over the gathered rows).
  const MoeExpertGemmOp down = MoeExpertGemmOp::make(c, 5, ExpertProj::down);
  EXPECT_TRUE(same_ref(down.input, gate.output));
  EXPECT_EQ(down.input_value, "expert_act");
  expect_ref(down.output, BufferId::expert_down_out, 0, 1920, DType::bf16);
  EXPECT_EQ(down.dims.K, 32u);
  EXPECT_EQ(down.dims.N, 64u);
}

TEST(MoeExperts, SwigluIsDeclaredInPlace) {
  const SwigluOp op = SwigluOp::make(5, 96, 7.0, "expert_gate", "expert_up", "expert_act");
  const std::vector<Access> acc = op.accesses();
  ASSERT_EQ(acc.size(), 3u);
  EXPECT_EQ(acc[0].kind, AccessKind::read);
  EXPECT_EQ(acc[2].kind, AccessKind::write);
  EXPECT_TRUE(same_ref(acc[0].tensor, acc[2].tensor));  // identical: declared in place
  expect_ref(acc[1].tensor, BufferId::expert_up_out, 0, 960, DType::bf16);
  EXPECT_EQ(acc[2].value, "expert_act");
  EXPECT_EQ(op.params(), "swiglu(rows=5,width=96,limit=7)");
}

TEST(MoeCombine, ZeroExpertsReadTheInputExceptOnHashLayers) {
  ModelConfig c = moe_config();
  const MoeCombineOp op = MoeCombineOp::make(c, 5, false);
  EXPECT_TRUE(op.reads_input);
  expect_ref(op.output, BufferId::moe_output, 0, 640, DType::bf16);  // [5, 64]
  EXPECT_NE(find(op.accesses(), BufferId::norm_output, AccessKind::read), nullptr);
  expect_ref(op.ids, BufferId::scratch, 0, 60, DType::u32);
  expect_ref(op.weights, BufferId::scratch, 60, 60, DType::f32);
  EXPECT_FALSE(MoeCombineOp::make(c, 5, /*hash=*/true).reads_input);
  c.zero_expert_num = 0;
  const MoeCombineOp plain = MoeCombineOp::make(c, 5, false);
  EXPECT_FALSE(plain.reads_input);
  EXPECT_EQ(find(plain.accesses(), BufferId::norm_output, AccessKind::read), nullptr);
}

TEST(MoeLatent, ExpertsRunInLatentSpaceInSsmBa) {
  ModelConfig c = moe_config();
  c.moe_latent_size = 16;
  // Latent x: ssm_ba bf16 [5, 16] = 160 B; gathered [15, 16] = 480 B.
  const MoeGatherOp g = MoeGatherOp::make(c, 5);
  expect_ref(g.input, BufferId::ssm_ba, 0, 160, DType::bf16);
  EXPECT_EQ(g.input_value, "moe_latent");
  expect_ref(g.gathered, BufferId::expert_down_out, 0, 480, DType::bf16);
  const MoeExpertGemmOp gate = MoeExpertGemmOp::make(c, 5, ExpertProj::gate);
  EXPECT_EQ(gate.dims.K, 16u);
  const MoeExpertGemmOp down = MoeExpertGemmOp::make(c, 5, ExpertProj::down);
  expect_ref(down.output, BufferId::expert_down_out, 0, 480, DType::bf16);
  // The combine writes the latent in place of the latent input (zero experts read it).
  const MoeCombineOp comb = MoeCombineOp::make(c, 5, false);
  expect_ref(comb.output, BufferId::ssm_ba, 0, 160, DType::bf16);
  EXPECT_TRUE(same_ref(comb.input, comb.output));
  EXPECT_EQ(comb.output_value, "moe_latent_out");
}

TEST(FfnActQuant, Fp8FiveRowsK100) {
  // P = ceil16(5) = 16 rows; act e4m3 [16, 100] = 1600 B; scale f32 [16, cdiv(100,128)=1] = 64 B.
  const TensorRef x{Space::arena, BufferId::norm_output, 0, {5, 100}, DType::bf16};
  const FfnActQuantOp op = FfnActQuantOp::make(x, "norm", 5, 100, FfnActFormat::fp8);
  EXPECT_EQ(op.dims.padded_rows, 16u);
  expect_ref(op.act, BufferId::ffn_act_a, 0, 1600, DType::fp8_e4m3);
  expect_ref(op.scale, BufferId::ffn_act_scale, 0, 64, DType::f32);
  EXPECT_EQ(op.accesses().size(), 3u);
  EXPECT_EQ(op.weight_dtype(), DType::fp8_e4m3);
}

TEST(FfnActQuant, Int8FiveRowsK100) {
  // act i8 [16, 100] = 1600 B; scale f32 [16, cdiv(100,32)=4] = 256 B.
  const TensorRef x{Space::arena, BufferId::norm_output, 0, {5, 100}, DType::bf16};
  const FfnActQuantOp op = FfnActQuantOp::make(x, "norm", 5, 100, FfnActFormat::int8);
  expect_ref(op.act, BufferId::ffn_act_a, 0, 1600, DType::i8);
  expect_ref(op.scale, BufferId::ffn_act_scale, 0, 256, DType::f32);
}

TEST(FfnActQuant, Nvfp4FiveRowsK100) {
  // act e2m1 [16, 100] packed = 16·50 = 800 B; scale e4m3 [16, cdiv(100,16)=7] = 112 B; the
  // FP32 global scale at 112 (4 B).
  const TensorRef x{Space::arena, BufferId::norm_output, 0, {5, 100}, DType::bf16};
  const FfnActQuantOp op = FfnActQuantOp::make(x, "norm", 5, 100, FfnActFormat::nvfp4);
  expect_ref(op.act, BufferId::ffn_act_a, 0, 800, DType::fp4_e2m1x2);
  expect_ref(op.scale, BufferId::ffn_act_scale, 0, 112, DType::fp8_e4m3);
  expect_ref(op.global_scale, BufferId::ffn_act_scale, 112, 4, DType::f32);
  EXPECT_EQ(op.accesses().size(), 4u);
  EXPECT_EQ(op.gemm_reads().size(), 3u);
  // Odd K = 101: each row packs cdiv(101,2) = 51 bytes → 16·51 = 816 B.
  const FfnActQuantOp odd = FfnActQuantOp::make(x, "norm", 5, 101, FfnActFormat::nvfp4);
  EXPECT_EQ(odd.act.bytes(), 816u);
}

TEST(FfnActQuant, Q8_1FiveRowsK100) {
  // q8_1: K padded to 256 → 8 blocks · 36 B = 288 B per row, T = 5 rows → 1440 B.
  const TensorRef x{Space::arena, BufferId::norm_output, 0, {5, 100}, DType::bf16};
  const Q8QuantOp op = Q8QuantOp::make(x, "norm", BufferId::ffn_act_q8, "ffn_act_q8", 5, 100);
  expect_ref(op.output, BufferId::ffn_act_q8, 0, 1440, DType::u8);
}

TEST(FfnActQuant, QuantizedGemmWritesPhantomPaddingRows) {
  // int8 gate GEMM, T = 5, N = 48: result expert_gate_out [5, 48] = 480 B, phantom rows
  // [5, 16) at 480 = 11·48·2 = 1056 B, ending at 16·48·2 = 1536.
  const TensorRef x{Space::arena, BufferId::norm_output, 0, {5, 100}, DType::bf16};
  const FfnActQuantOp q = FfnActQuantOp::make(x, "norm", 5, 100, FfnActFormat::int8);
  const GemmOp g = GemmOp::make("ffn_gate", "int8", q.gemm_reads(), 5, q.dims.padded_rows, 100, 48,
                                BufferId::expert_gate_out, 0, DType::bf16, "ffn_gate");
  expect_ref(g.output, BufferId::expert_gate_out, 0, 480, DType::bf16);
  const std::vector<Access> acc = g.accesses();
  const Access* ph = find(acc, BufferId::expert_gate_out, AccessKind::phantom_write);
  ASSERT_NE(ph, nullptr);
  EXPECT_EQ(ph->begin(), 480u);
  EXPECT_EQ(ph->end(), 1536u);
  // The GEMM reads all 16 quantized rows (the quantizer wrote the padding as zeros).
  const Access* a = find(acc, BufferId::ffn_act_a, AccessKind::read);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->end(), 1600u);
}

// The NVFP4 global scale fits after the group scales at every row count up to m and every K
// up to kmax (the proof in ffn.cpp), on the spec sizing of a small dense model.
TEST(FfnActQuant, Nvfp4GlobalScaleFitsTheSpecScaleBuffer) {
  ModelConfig c = moe_config();
  c.num_experts = 0;
  c.num_experts_per_tok = 1;
  c.zero_expert_num = 0;
  c.moe_intermediate_size = 0;
  c.intermediate_size = 100;
  for (uint64_t m : {1u, 5u, 16u, 17u}) {
    const BufferSizes s = BufferSizes::from_config(c, m, 256, 16, 4);
    for (uint64_t K : {c.hidden_size, c.intermediate_size}) {
      const TensorRef x{Space::arena, BufferId::norm_output, 0, {m, K}, DType::bf16};
      const FfnActQuantOp op = FfnActQuantOp::make(x, "x", m, K, FfnActFormat::nvfp4);
      EXPECT_LE(op.global_scale.offset + op.global_scale.bytes(), s.ffn_act_scale)
          << "m=" << m << " K=" << K;
      EXPECT_LE(op.act.bytes(), s.ffn_act_a) << "m=" << m << " K=" << K;
    }
  }
}

}  // namespace
}  // namespace bufferlab
