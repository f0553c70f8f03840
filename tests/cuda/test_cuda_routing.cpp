// CudaBackend's MoE routing judged like the CPU's (oracle/routing_judge.h) with the device
// GEMM's unit roundoff u = 2^-23: router → top-k chains on every path over random configs and
// adversarial inputs, the top-k alone on stored logits with exact ties and NaN / ±Inf, and the
// launch limits. CUDA vs CPU ids are compared only where the answer is provable: on the same
// stored logits softmax keys are the logits themselves (one total order: identical ids), and
// in a chain a row whose oracle set is separated from the rest by more than every expert's
// CUDA bound (min_sel(key − e) > max_unsel(key + e)) must give both backends that set.
// Without a usable GPU every test is SKIPPED (make_backend("cuda") throws BackendUnavailable).
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
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/oracle/routing_judge.h"
#include "bufferlab/properties/routing_generators.h"

namespace bufferlab {
namespace {

using gen::RoutingCase;

struct Prepared {
  oracle::RoutingOps ops;
  oracle::RouterInputs router_in;
  oracle::TopKHostInputs topk_in;
};

Prepared prepare(const RoutingCase& c) {
  Prepared p{oracle::make_routing_ops(c.config, c.rows, c.precision, c.hash), {}, {}};
  const gen::RoutingTensors t = gen::routing_tensors(c);
  p.router_in = {t.x_bf16, t.x_f32, t.weight};
  p.topk_in = {t.bias, t.token_ids, t.tid2eid};
  return p;
}

oracle::StoredLogits stored_logits(const RoutingCase& c, bool nonfinite) {
  oracle::StoredLogits l;
  for (float v : gen::topk_logits(c, nonfinite)) {
    if (c.precision == RouterPrecision::bf16)
      l.bf16.push_back(f32_to_bf16_bits(v));
    else
      l.f32.push_back(v);
  }
  return l;
}

// Rows whose oracle set is provable under the CUDA bounds (see the file comment).
std::vector<bool> provable_sets(const Prepared& p) {
  const auto& op = p.ops.topk;
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  const auto exact = oracle::router_logits(p.ops.router, p.router_in, oracle::Mode::exact);
  const auto ref = oracle::select_topk(op, {exact, p.topk_in.bias, {}, {}});
  const auto bounds = oracle::score_key_bounds(
      op, exact,
      oracle::router_logit_bounds(p.ops.router, p.router_in, oracle::kUnitRoundoffDeviceGemm),
      p.topk_in.bias);
  std::vector<bool> out(rows, false);
  for (uint64_t t = 0; t < rows && top_k < experts; ++t) {
    double low_sel = INFINITY, high_rest = -INFINITY;
    for (uint64_t e = 0; e < experts; ++e) {
      const double k = ref.keys[t * experts + e], b = bounds[t * experts + e];
      const bool sel = std::find(ref.ids.begin() + t * top_k, ref.ids.begin() + (t + 1) * top_k,
                                 e) != ref.ids.begin() + (t + 1) * top_k;
      if (sel)
        low_sel = std::min(low_sel, k - b);
      else
        high_rest = std::max(high_rest, k + b);
    }
    out[t] = low_sel > high_rest;
  }
  return out;
}

class CudaRouting : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      gpu_ = make_backend("cuda");
    } catch (const BackendUnavailable& e) {
      GTEST_SKIP() << e.what();
    }
    cpu_ = make_backend("cpu");
  }

  oracle::ChainOutputs chain(Backend& b, const Prepared& p) {
    const Workspace ws = b.allocate(oracle::routing_footprint_layout(p.ops), p.ops.pool_bytes);
    return oracle::run_routing_chain(b, ws, p.ops, p.router_in, p.topk_in);
  }

  oracle::TopKOutputs topk(Backend& b, const Prepared& p, const oracle::StoredLogits& l) {
    const Workspace ws = b.allocate(oracle::routing_footprint_layout(p.ops), p.ops.pool_bytes);
    return oracle::run_topk(b, ws, p.ops.topk, l, p.topk_in);
  }

  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<Backend> cpu_;
};

TEST_F(CudaRouting, ChainsAreTieStableAndAgreeWithTheCpuWhereProvable) {
  uint64_t provable_rows = 0, rows = 0;
  const bool ok = rc::check(
      "cuda routing chain: tie stability (u = 2^-23), cuda = cpu ids where "
      "provable",
      [&] {
        const RoutingCase c = *gen::routing_case(gen::RoutingRanges{});
        RC_LOG() << c.describe() << "\n";
        const Prepared p = prepare(c);
        const auto gpu = chain(*gpu_, p);
        const auto v = oracle::judge_routing_chain(p.ops, p.router_in, p.topk_in, gpu,
                                                   oracle::kUnitRoundoffDeviceGemm, "cuda", c.seed);
        RC_LOG() << oracle::format_verdict(v);
        RC_ASSERT(v.passed());
        if (c.hash) return;
        const auto cpu = chain(*cpu_, p);
        const uint64_t k = p.ops.topk.shape().top_k;
        const std::vector<bool> provable = provable_sets(p);
        for (uint64_t t = 0; t < c.rows; ++t) {
          ++rows;
          if (!provable[t]) continue;
          ++provable_rows;
          RC_ASSERT(std::is_permutation(gpu.topk.ids.begin() + t * k,
                                        gpu.topk.ids.begin() + (t + 1) * k,
                                        cpu.topk.ids.begin() + t * k));
        }
      });
  std::printf("cuda vs cpu ids: %llu of %llu rows provable and equal as sets\n",
              static_cast<unsigned long long>(provable_rows),
              static_cast<unsigned long long>(rows));
  EXPECT_TRUE(ok);
}

TEST_F(CudaRouting, TopKOnStoredLogitsWithTiesNanAndInf) {
  const bool ok = rc::check("cuda top-k on stored logits", [&] {
    const RoutingCase c = *gen::routing_case(gen::RoutingRanges{});
    const bool nonfinite = *rc::gen::arbitrary<bool>();
    RC_LOG() << c.describe() << " nonfinite=" << nonfinite << "\n";
    const Prepared p = prepare(c);
    const oracle::StoredLogits l = stored_logits(c, nonfinite);
    const auto gpu = topk(*gpu_, p, l);
    const auto v = oracle::judge_topk(p.ops.topk, l, p.topk_in, gpu, "cuda", c.seed);
    RC_LOG() << oracle::format_verdict(v);
    RC_ASSERT(v.passed());
    // Softmax ranks the stored values themselves: one total order, identical ids.
    if (p.ops.topk.scoring == MoeScoring::softmax || c.hash)
      RC_ASSERT(gpu.ids == topk(*cpu_, p, l).ids);
  });
  EXPECT_TRUE(ok);
}

TEST_F(CudaRouting, TopKRefusesBeyondItsLimits) {
  for (const auto& [experts, k] : {std::pair<uint64_t, uint64_t>{kMaxScoredExperts + 1, 8},
                                   std::pair<uint64_t, uint64_t>{64, kMaxTopK + 1}}) {
    RoutingCase c;
    c.config.hidden_size = 1;
    c.config.num_experts = experts;
    c.config.num_experts_per_tok = k;
    c.config.vocab_size = 1;
    c.rows = 2;
    const Prepared p = prepare(c);
    EXPECT_THROW(topk(*gpu_, p, stored_logits(c, false)), Error) << experts << " " << k;
  }
}

}  // namespace
}  // namespace bufferlab
