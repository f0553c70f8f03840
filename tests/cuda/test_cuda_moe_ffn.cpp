// CudaBackend's non-routing MoE / FFN ops against the faithful FP64 oracle with the device
// GEMM roundoff (u = 2^-23: tensor cores do not round to nearest) and against the CPU backend:
// the routed-expert chain stage by stage (zero experts, repeated experts, hash, limit, latent
// in place), SwiGLU, the combine, every BF16 GemmOp epilogue and the LM head. CUDA vs CPU: each
// lies within its own bound of the faithful value, so they differ by at most the sum of the two
// bounds, per element. Without a usable GPU every test is SKIPPED.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bufferlab/backends/backend_factory.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounded_compare.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "bufferlab/oracle/moe_ffn_inputs.h"
#include "bufferlab/oracle/moe_ffn_judge.h"

namespace bufferlab {
namespace {

using oracle::Mode;

std::vector<double> values(const std::vector<uint16_t>& bits) {
  std::vector<double> v(bits.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_bits_to_f32(bits[i]);
  return v;
}

// CUDA's stored output against the CPU's: |cuda − cpu| ≤ b_cpu + b_cuda per element (both
// bounds taken against the faithful oracle of the CPU's stored inputs, which are the same
// uploads), over the elements the op writes.
oracle::TensorComparison cuda_vs_cpu(const std::string& name, const std::vector<uint16_t>& gpu,
                                     const std::vector<uint16_t>& cpu,
                                     const oracle::OpReference& on_cpu,
                                     const oracle::OpReference& on_gpu) {
  std::vector<double> bound(on_cpu.bound.size());
  for (size_t i = 0; i < bound.size(); ++i) bound[i] = on_cpu.bound[i] + on_gpu.bound[i];
  return oracle::compare_bf16_bounded(name + " cuda-cpu", gpu, values(cpu), on_cpu.cols,
                                      {bound, on_cpu.mask, "b_cpu + b_cuda"});
}

class CudaMoeFfn : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      gpu_ = make_backend("cuda");
    } catch (const BackendUnavailable& e) {
      GTEST_SKIP() << e.what();
    }
    cpu_ = make_backend("cpu");
  }

  // The chain on both backends from the same inputs; CUDA judged against the oracle (device
  // bounds), then each CUDA stage against the CPU's stage.
  void check_chain(const ModelConfig& config, uint64_t rows, bool hash,
                   const oracle::RoutingProfile& routing, uint64_t seed) {
    const auto chain = oracle::ExpertChain::make(config, rows, hash);
    const auto in = oracle::generate_expert_chain_inputs(chain, seed, routing, {1.0, 4}, 0);
    const Workspace gws = oracle::allocate_footprint(*gpu_, chain);
    const Workspace cws = oracle::allocate_footprint(*cpu_, chain);
    const auto gpu = oracle::run_expert_chain(*gpu_, gws, chain, in);
    const auto cpu = oracle::run_expert_chain(*cpu_, cws, chain, in);
    const auto report =
        oracle::judge_expert_chain(chain, in, gpu, "cuda", seed, oracle::device_bounds());
    EXPECT_TRUE(report.passed()) << oracle::format_report(report);
    // Stage by stage on the CPU's stored inputs (the bounds of both backends).
    const auto db = oracle::device_bounds(), cb = oracle::cpu_bounds();
    const uint64_t z = chain.zero_experts;
    const auto gather = oracle::moe_gather(chain.gather, cpu.gather.stored, z);
    expect(cuda_vs_cpu("moe_gathered", gpu.gather.out, cpu.gather.out, gather, gather));
    for (auto [op, g, c] :
         {std::tuple{&chain.gate, &gpu.gate, &cpu.gate}, std::tuple{&chain.up, &gpu.up, &cpu.up},
          std::tuple{&chain.down, &gpu.down, &cpu.down}})
      expect(cuda_vs_cpu(op->output_value, g->out, c->out,
                         oracle::moe_expert_gemm(*op, c->stored, Mode::faithful, cb, z),
                         oracle::moe_expert_gemm(*op, c->stored, Mode::faithful, db, z)));
    expect(cuda_vs_cpu("expert_act", gpu.act.out, cpu.act.out,
                       oracle::swiglu(chain.act, cpu.act.stored, Mode::faithful, cb),
                       oracle::swiglu(chain.act, cpu.act.stored, Mode::faithful, db)));
    expect(cuda_vs_cpu("moe_combine_out", gpu.combine.out, cpu.combine.out,
                       oracle::moe_combine(chain.combine, cpu.combine.stored, Mode::faithful, cb),
                       oracle::moe_combine(chain.combine, cpu.combine.stored, Mode::faithful, db)));
  }

  static void expect(const oracle::TensorComparison& c) {
    EXPECT_TRUE(c.passed()) << c.name << " max ULP " << c.max_ulp.value_or(0) << " first bad "
                            << (c.first_bad ? c.first_bad->reason : "");
  }

  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<Backend> cpu_;
};

ModelConfig moe_config(uint64_t hidden, uint64_t inter, uint64_t experts, uint64_t top_k,
                       uint64_t zero, uint64_t latent, double limit) {
  ModelConfig c;
  c.hidden_size = hidden;
  c.moe_intermediate_size = inter;
  c.num_experts = experts;
  c.num_experts_per_tok = top_k;
  c.zero_expert_num = zero;
  c.moe_latent_size = latent;
  c.swiglu_limit = limit;
  return c;
}

TEST_F(CudaMoeFfn, ChainPlain) {
  check_chain(moe_config(256, 128, 8, 2, 0, 0, 0.0), 37, false, {8, 0, 0.0, 0.3, false}, 11);
}

TEST_F(CudaMoeFfn, ChainZeroExpertsLimitAndRepeats) {
  check_chain(moe_config(192, 96, 6, 4, 2, 0, 7.0), 29, false, {6, 2, 0.3, 0.5, true}, 12);
}

TEST_F(CudaMoeFfn, ChainLatentInPlaceWithZeroExperts) {
  check_chain(moe_config(512, 64, 4, 3, 1, 96, 0.0), 17, false, {4, 1, 0.4, 0.0, false}, 13);
}

TEST_F(CudaMoeFfn, ChainHashLayerRepeatsExpertZero) {
  check_chain(moe_config(128, 33, 5, 3, 1, 0, 0.0), 21, true, {5, 0, 0.0, 0.9, true}, 14);
}

TEST_F(CudaMoeFfn, ChainOddShapesOneToken) {
  check_chain(moe_config(7, 5, 3, 2, 0, 0, 0.75), 1, false, {3, 0, 0.0, 0.0, false}, 15);
}

TEST_F(CudaMoeFfn, GemmEveryEpilogueAndLmHead) {
  const char* kinds[] = {"bf16", "bf16+swiglu-epilogue", "bf16+accumulate"};
  const BufferId outs[] = {BufferId::expert_gate_out, BufferId::ssm_qkvz, BufferId::moe_output};
  for (int e = 0; e < 3; ++e) {
    for (auto [rows, K, N] :
         {std::tuple<uint64_t, uint64_t, uint64_t>{1, 7, 3}, {33, 1024, 257}, {64, 2048, 512}}) {
      const TensorRef x = arena_tensor(BufferId::norm_output, 0, {rows, K}, DType::bf16);
      std::vector<Access> inputs = {{x, AccessKind::read, "norm"}};
      if (e > 0)
        inputs.push_back(
            {arena_tensor(outs[e], 0, {rows, N}, DType::bf16), AccessKind::read, "old"});
      const GemmOp op = GemmOp::make("ffn", kinds[e], inputs, rows, rows, K, N, outs[e], 0,
                                     DType::bf16, "ffn_out");
      const uint64_t seed = 100 + e * 10 + K;
      const oracle::GemmInputs in{
          oracle::seeded_bf16(rows * K, seed, {1.0, 4}),
          oracle::seeded_bf16(N * K, ~seed, {1.0 / std::sqrt(static_cast<double>(K)), 0}),
          e == 0 ? std::vector<uint16_t>{} : oracle::seeded_bf16(rows * N, seed + 1, {1.0, 0})};
      const auto gpu = oracle::run_gemm(*gpu_, oracle::allocate_footprint(*gpu_, op), op, in);
      const auto cpu = oracle::run_gemm(*cpu_, oracle::allocate_footprint(*cpu_, op), op, in);
      const auto report = oracle::judge_gemm(op, gpu, "cuda", seed, oracle::device_bounds());
      EXPECT_TRUE(report.passed()) << oracle::format_report(report);
      expect(cuda_vs_cpu(op.params(), gpu.out, cpu.out,
                         oracle::gemm(op, cpu.stored, Mode::faithful, oracle::cpu_bounds()),
                         oracle::gemm(op, cpu.stored, Mode::faithful, oracle::device_bounds())));
    }
  }
  // LM head, co-dispatch rows: the last token of each of 4 streams of 9 rows.
  const LmHeadOp op = LmHeadOp::make(36, 4, 384, 1000, "codispatch", {0, 8, 9});
  const oracle::LmHeadInputs in{oracle::seeded_bf16(36 * 384, 5, {1.0, 4}),
                                oracle::seeded_bf16(1000 * 384, 6, {0.05, 0})};
  const auto gpu = oracle::run_lm_head(*gpu_, oracle::allocate_footprint(*gpu_, op), op, in);
  const auto cpu = oracle::run_lm_head(*cpu_, oracle::allocate_footprint(*cpu_, op), op, in);
  const auto report = oracle::judge_lm_head(op, gpu, "cuda", 5, oracle::device_bounds());
  EXPECT_TRUE(report.passed()) << oracle::format_report(report);
  expect(cuda_vs_cpu("logits", gpu.out, cpu.out,
                     oracle::lm_head(op, cpu.stored, Mode::faithful, oracle::cpu_bounds()),
                     oracle::lm_head(op, cpu.stored, Mode::faithful, oracle::device_bounds())));
}

TEST_F(CudaMoeFfn, SwigluExtremeGatesAndCombineInPlace) {
  const SwigluOp op = SwigluOp::make(9, 4097, 0.0, "expert_gate", "expert_up", "expert_act");
  const oracle::SwigluInputs in{oracle::seeded_bf16(9 * 4097, 1, {8.0, 6}),
                                oracle::seeded_bf16(9 * 4097, 2, {1.0, 6})};
  const auto gpu = oracle::run_swiglu(*gpu_, oracle::allocate_footprint(*gpu_, op), op, in);
  const auto report = oracle::judge_swiglu(op, gpu, "cuda", 1, oracle::device_bounds());
  EXPECT_TRUE(report.passed()) << oracle::format_report(report);

  const MoeCombineOp cop = MoeCombineOp::make(moe_config(64, 8, 6, 4, 2, 48, 0.0), 40, false);
  const oracle::CombineInputs cin{
      oracle::seeded_ids(40, 4, 3, {6, 2, 0.4, 0.2, false}), oracle::seeded_weights(40, 4, 4, 6.0),
      oracle::seeded_bf16(40 * 4 * 48, 5, {1.0, 4}), oracle::seeded_bf16(40 * 48, 6, {1.0, 4})};
  const auto cg = oracle::run_moe_combine(*gpu_, oracle::allocate_footprint(*gpu_, cop), cop, cin);
  const auto creport = oracle::judge_moe_combine(cop, cg, "cuda", 3, oracle::device_bounds());
  EXPECT_TRUE(creport.passed()) << oracle::format_report(creport);
}

TEST_F(CudaMoeFfn, PropertyChainAgreesWithOracleAndCpu) {
  const bool ok =
      rc::check("cuda expert chain agrees with the faithful oracle and the CPU", [this] {
        ModelConfig m;
        m.hidden_size = *rc::gen::inRange<uint64_t>(1, 513);
        m.moe_intermediate_size = *rc::gen::inRange<uint64_t>(1, 257);
        m.num_experts = *rc::gen::inRange<uint64_t>(1, 17);
        m.zero_expert_num = *rc::gen::inRange<uint64_t>(0, 3);
        m.num_experts_per_tok = *rc::gen::inRange<uint64_t>(
            1, std::min<uint64_t>(8, m.num_experts + m.zero_expert_num) + 1);
        m.swiglu_limit = *rc::gen::element(0.0, 7.0);
        // Cost: T·top_k·(3·I·D + D) ≤ 2^26.
        const uint64_t D = m.hidden_size, I = m.moe_intermediate_size, k = m.num_experts_per_tok;
        const uint64_t max_rows =
            std::clamp<uint64_t>((uint64_t{1} << 26) / (k * (3 * I * D + D)), 1, 64);
        const uint64_t rows = *rc::gen::inRange<uint64_t>(1, max_rows + 1);
        const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
        const auto chain = oracle::ExpertChain::make(m, rows, false);
        const auto in = oracle::generate_expert_chain_inputs(
            chain, seed, {m.num_experts, m.zero_expert_num, 0.25, 0.3, false}, {1.0, 4}, 0);
        const auto gpu =
            oracle::run_expert_chain(*gpu_, oracle::allocate_footprint(*gpu_, chain), chain, in);
        const auto report =
            oracle::judge_expert_chain(chain, in, gpu, "cuda", seed, oracle::device_bounds());
        RC_LOG() << oracle::format_report(report);
        RC_ASSERT(report.passed());
      });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace bufferlab
