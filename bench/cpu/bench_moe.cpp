// Google Benchmark: the CPU MoE routing and FFN ops (issue 4) against baselines measured in the
// same run. Not pass/fail.
//
//   BM_MoeTopKCpu        Backend::moe_topk on FP32 logits (softmax; sigmoid + bias with
//                        norm_topk_prob and a routed scale) against a naive loop: per row, the
//                        keys, a full std::sort of (key desc, index asc), the first top_k, the
//                        weights. Counters: speedup_vs_naive = naive / ours, ids_agree (the
//                        fraction of selected ids equal to the naive loop's; 1 unless near-tied
//                        keys round differently), naive_us.
//   BM_MoeTopKGroupedCpu Backend::moe_topk with DeepSeek-V3's router groups (8, keep 4, top 8 of
//                        256) against the naive grouped loop and the same top-k without groups
//                        on the same logits. Counters: speedup_vs_naive, vs_ungrouped (grouped /
//                        ungrouped seconds), ids_agree, naive_us.
//   BM_MoeRouterCpu      Backend::moe_router on each precision path against a naive triple loop
//                        over the same operands (widen each element to float, dot over the
//                        hidden index innermost, store as the path does). Counters:
//                        speedup_vs_naive, gflops, naive_us.
//   BM_MoeGemmCpu        Backend::gemm (kind "bf16"), Backend::moe_expert_gemm (gate and down,
//   BM_MoeExpertGemmCpu  routed ids spread evenly over the experts) and Backend::lm_head against
//   BM_MoeLmHeadCpu      Eigen's own peak here: an Eigen::MatrixXf product of the same M, N, K
//                        (preallocated, OpenMP-parallel like ours). Counters: gflops (ours),
//                        eigen_gflops, eigen_fraction = ours / eigen.
//
// Each ratio compares timings taken the same way, back to back (seconds_per_call), so a busy
// machine slows both alike. Shapes are real per-op shapes where they fit a 2-core CI machine
// (router: Qwen3-Next h 2048 × E' 512, DeepSeek-V3 h 7168 × E' 256); the expert and LM-head
// GEMMs keep their real K and N but fewer experts / a smaller vocabulary. Until a CPU kernel
// exists its benchmarks report "skipped: <the backend's error>".
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../moe_bench_inputs.h"
#include "bench_rig.h"
#include "bench_timing.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "seeded_values.h"

namespace bufferlab {
namespace {

using bench::cached_seconds;
using bench::put_seeded;
using bench::seconds_per_call;
using bench::sigmoidf;

// ---------------------------------------------------------------- inputs and workspaces

// Seeded inputs: the tests' generator (tests/support/seeded_values.h), one for the project.
using testing::seeded_value;

using bench::spread_ids;  // ../moe_bench_inputs.h

// ---------------------------------------------------------------- (a) top-k

struct TopKSetup : bench::OpRig<MoeTopKOp> {
  std::vector<std::pair<float, uint32_t>> keyed;  // the naive loop's row buffer
  std::vector<uint32_t> naive_ids;
  std::vector<float> naive_weights;
  std::optional<double> naive_s;  // the naive loop's seconds per call
};

using bench::topk_config;  // ../moe_bench_inputs.h

// Logits on the FP32 paths (gate_logits_f32).
TopKSetup& topk_setup(MoeScoring scoring, uint64_t experts, uint64_t top_k, uint64_t tokens) {
  using Key = std::tuple<MoeScoring, uint64_t, uint64_t, uint64_t>;
  static std::map<Key, std::unique_ptr<TopKSetup>> cache;
  return bench::cached_setup(cache, Key{scoring, experts, top_k, tokens}, [&] {
    auto s = std::make_unique<TopKSetup>();
    s->op = MoeTopKOp::make(topk_config(scoring, experts, top_k), tokens, /*logits_f32=*/true,
                            /*hash=*/false);
    bench::make_rig(*s, {&s->op.bias});
    put_seeded(*s->rig, s->op.logits, 1, 4.0f);
    if (s->op.use_bias) put_seeded(*s->rig, s->op.bias, 2, 0.05f);
    s->naive_ids.resize(tokens * top_k);
    s->naive_weights.resize(tokens * top_k);
    return s;
  });
}

// The naive reference: one thread, keys of the whole row, a full sort, the first top_k.
void naive_topk(TopKSetup& s) {
  const MoeTopKOp& op = s.op;
  const MoeTopKOp::Bound b = op.bind(s.rig->ws);
  const uint64_t E = op.shape().experts, k = op.shape().top_k;
  const bool softmax = op.scoring == MoeScoring::softmax;
  for (uint64_t t = 0; t < op.shape().rows; ++t) {
    const float* l = b.logits_f32 + t * E;
    s.keyed.clear();
    for (uint64_t e = 0; e < E; ++e) {
      const float key = softmax ? l[e] : sigmoidf(l[e]) + (b.bias ? b.bias[e] : 0.0f);
      s.keyed.emplace_back(key, static_cast<uint32_t>(e));
    }
    std::sort(s.keyed.begin(), s.keyed.end(), [](const auto& a, const auto& z) {
      return a.first > z.first || (a.first == z.first && a.second < z.second);
    });
    float max_logit = l[0], denom = 0.0f;
    if (softmax) {
      for (uint64_t e = 0; e < E; ++e) max_logit = std::max(max_logit, l[e]);
      for (uint64_t e = 0; e < E; ++e) denom += std::exp(l[e] - max_logit);
    }
    uint32_t* ids = s.naive_ids.data() + t * k;
    float* w = s.naive_weights.data() + t * k;
    float sum = 0.0f;
    for (uint64_t j = 0; j < k; ++j) {
      ids[j] = s.keyed[j].second;
      w[j] = softmax ? std::exp(l[ids[j]] - max_logit) / denom : sigmoidf(l[ids[j]]);
      sum += w[j];
    }
    const bool renormalise = op.norm_topk_prob && (softmax || sum > 1e-20f);
    for (uint64_t j = 0; j < k; ++j)
      w[j] = (renormalise ? w[j] / sum : w[j]) * static_cast<float>(op.routed_scaling_factor);
  }
}

double ids_agree(const TopKSetup& s) {
  const MoeTopKOp::Bound b = s.op.bind(s.rig->ws);
  uint64_t same = 0;
  for (uint64_t i = 0; i < s.naive_ids.size(); ++i) same += b.ids[i] == s.naive_ids[i];
  return static_cast<double>(same) / static_cast<double>(s.naive_ids.size());
}

void BM_MoeTopKCpu(benchmark::State& state, MoeScoring scoring) {
  const auto experts = static_cast<uint64_t>(state.range(0));
  const auto top_k = static_cast<uint64_t>(state.range(1));
  const auto tokens = static_cast<uint64_t>(state.range(2));
  TopKSetup& s = topk_setup(scoring, experts, top_k, tokens);
  if (!bench::time_against_naive(
          state, s.naive_s,
          [&] { benchmark::DoNotOptimize(s.rig->backend->moe_topk(s.rig->ws, s.op)); },
          [&] { naive_topk(s); }))
    return;
  state.counters["ids_agree"] = ids_agree(s);
  state.counters["threads"] = omp_get_max_threads();
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * tokens));
}

void topk_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t experts : {64, 256, 512, 1024})
    for (int64_t top_k : {8, 10, 32})
      for (int64_t tokens : {64, 1024})
        if (top_k <= experts) b->Args({experts, top_k, tokens});
  b->ArgNames({"experts", "top_k", "tokens"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MoeTopKCpu, softmax, MoeScoring::softmax)->Apply(topk_shapes);
BENCHMARK_CAPTURE(BM_MoeTopKCpu, sigmoid_bias, MoeScoring::sigmoid)->Apply(topk_shapes);

// ---------------------------------------------------------------- (a') group-limited top-k

// DeepSeek-V3's routing (sigmoid + bias, 256 experts in 8 groups, keep 4, top 8;
// docs/spec/numerics.md §2) against two baselines timed in the same run: the same backend's top-k
// WITHOUT groups on the same logits (vs_ungrouped = grouped / ungrouped seconds: the group
// step's cost) and a naive grouped loop (per row: keys, each group's two best by a partial sort,
// a full sort of the group scores, then a full sort of the kept groups' experts).
struct GroupedTopKSetup : bench::OpRig<MoeTopKOp> {
  MoeTopKOp ungrouped;
  std::vector<std::pair<float, uint32_t>> keyed, groups;
  std::vector<uint32_t> naive_ids;
  std::optional<double> naive_s, ungrouped_s;
};

constexpr uint64_t kGroupExperts = 256, kGroups = 8, kKeptGroups = 4, kGroupTopK = 8;

GroupedTopKSetup& grouped_topk_setup(uint64_t tokens) {
  static std::map<uint64_t, std::unique_ptr<GroupedTopKSetup>> cache;
  return bench::cached_setup(cache, tokens, [&] {
    auto s = std::make_unique<GroupedTopKSetup>();
    ModelConfig c = topk_config(MoeScoring::sigmoid, kGroupExperts, kGroupTopK);
    s->ungrouped = MoeTopKOp::make(c, tokens, /*logits_f32=*/true, /*hash=*/false);
    c.router_groups = kGroups;
    c.router_topk_groups = kKeptGroups;
    s->op = MoeTopKOp::make(c, tokens, /*logits_f32=*/true, /*hash=*/false);
    bench::make_rig(*s, {&s->op.bias});
    s->ungrouped.bias = s->op.bias;  // one bias, one set of logits
    put_seeded(*s->rig, s->op.logits, 1, 4.0f);
    put_seeded(*s->rig, s->op.bias, 2, 0.05f);
    s->naive_ids.resize(tokens * kGroupTopK);
    return s;
  });
}

void naive_grouped_topk(GroupedTopKSetup& s) {
  const MoeTopKOp::Bound b = s.op.bind(s.rig->ws);
  const uint64_t E = kGroupExperts, size = E / kGroups;
  const auto order = [](const auto& a, const auto& z) {
    return a.first > z.first || (a.first == z.first && a.second < z.second);
  };
  for (uint64_t t = 0; t < s.op.shape().rows; ++t) {
    const float* l = b.logits_f32 + t * E;
    s.keyed.clear();
    for (uint64_t e = 0; e < E; ++e)
      s.keyed.emplace_back(sigmoidf(l[e]) + b.bias[e], static_cast<uint32_t>(e));
    s.groups.clear();
    for (uint64_t g = 0; g < kGroups; ++g) {
      std::vector<std::pair<float, uint32_t>> group(s.keyed.begin() + g * size,
                                                    s.keyed.begin() + (g + 1) * size);
      std::partial_sort(group.begin(), group.begin() + 2, group.end(), order);
      s.groups.emplace_back(group[0].first + group[1].first, static_cast<uint32_t>(g));
    }
    std::sort(s.groups.begin(), s.groups.end(), order);
    std::vector<std::pair<float, uint32_t>> kept;
    for (uint64_t g = 0; g < kKeptGroups; ++g)
      for (uint64_t e = s.groups[g].second * size; e < (s.groups[g].second + 1) * size; ++e)
        kept.push_back(s.keyed[e]);
    std::sort(kept.begin(), kept.end(), order);
    for (uint64_t j = 0; j < kGroupTopK; ++j) s.naive_ids[t * kGroupTopK + j] = kept[j].second;
  }
}

void BM_MoeTopKGroupedCpu(benchmark::State& state) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  GroupedTopKSetup& s = grouped_topk_setup(tokens);
  const auto t = bench::time_against_naive(
      state, s.naive_s,
      [&] { benchmark::DoNotOptimize(s.rig->backend->moe_topk(s.rig->ws, s.op)); },
      [&] { naive_grouped_topk(s); });
  if (!t) return;
  if (!s.ungrouped_s)
    s.ungrouped_s = bench::seconds_per_call(
        [&] { benchmark::DoNotOptimize(s.rig->backend->moe_topk(s.rig->ws, s.ungrouped)); });
  // The grouped run last, so the ids compared are its own.
  s.rig->backend->moe_topk(s.rig->ws, s.op);
  const MoeTopKOp::Bound b = s.op.bind(s.rig->ws);
  uint64_t same = 0;
  for (uint64_t i = 0; i < s.naive_ids.size(); ++i) same += b.ids[i] == s.naive_ids[i];
  state.counters["vs_ungrouped"] = t->own / *s.ungrouped_s;
  state.counters["ids_agree"] = static_cast<double>(same) / static_cast<double>(s.naive_ids.size());
  state.counters["threads"] = omp_get_max_threads();
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * tokens));
}

BENCHMARK(BM_MoeTopKGroupedCpu)
    ->ArgName("tokens")
    ->Arg(64)
    ->Arg(1024)
    ->Arg(8192)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// ---------------------------------------------------------------- (b) router GEMM

struct RouterSetup : bench::OpRig<MoeRouterOp> {
  std::vector<uint16_t> naive_bf16;
  std::vector<float> naive_f32;
  std::optional<double> naive_s;  // the naive loop's seconds per call
};

// The input is FP32 on the fp32_routing path, BF16 otherwise (put_seeded follows its dtype).
RouterSetup& router_setup(RouterPrecision p, uint64_t tokens, uint64_t hidden, uint64_t experts) {
  using Key = std::tuple<RouterPrecision, uint64_t, uint64_t, uint64_t>;
  static std::map<Key, std::unique_ptr<RouterSetup>> cache;
  return bench::cached_setup(cache, Key{p, tokens, hidden, experts}, [&] {
    auto s = std::make_unique<RouterSetup>();
    ModelConfig c;
    c.hidden_size = hidden;
    c.num_experts = experts;
    s->op = MoeRouterOp::make(c, tokens, p);
    bench::make_rig(*s, {&s->op.weight});
    put_seeded(*s->rig, s->op.input, 3, 2.0f);
    put_seeded(*s->rig, s->op.weight, 4, 0.05f);
    s->naive_bf16.resize(tokens * experts);
    s->naive_f32.resize(tokens * experts);
    return s;
  });
}

// The naive reference: three loops, each element widened to float, FP32 accumulation in
// order, stored as the path stores (BF16 on the bf16 path, FP32 otherwise).
void naive_router(RouterSetup& s) {
  const MoeRouterOp::Bound b = s.op.bind(s.rig->ws);
  const uint64_t T = s.op.shape().rows, H = s.op.shape().hidden, E = s.op.shape().experts;
  for (uint64_t t = 0; t < T; ++t)
    for (uint64_t e = 0; e < E; ++e) {
      float acc = 0.0f;
      for (uint64_t k = 0; k < H; ++k) {
        const float x = b.x_f32 ? b.x_f32[t * H + k] : bf16_bits_to_f32(b.x_bf16[t * H + k]);
        acc += x * bf16_bits_to_f32(b.weight[e * H + k]);
      }
      if (s.op.precision == RouterPrecision::bf16)
        s.naive_bf16[t * E + e] = f32_to_bf16_bits(acc);
      else
        s.naive_f32[t * E + e] = acc;
    }
}

void BM_MoeRouterCpu(benchmark::State& state, RouterPrecision p) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  const auto hidden = static_cast<uint64_t>(state.range(1));
  const auto experts = static_cast<uint64_t>(state.range(2));
  RouterSetup& s = router_setup(p, tokens, hidden, experts);
  // The naive loop takes seconds at 1024 tokens: one cold call is its measurement there.
  const auto t = bench::time_against_naive(
      state, s.naive_s, [&] { s.rig->backend->moe_router(s.rig->ws, s.op); },
      [&] { naive_router(s); }, false);
  if (!t) return;
  const double flops = 2.0 * static_cast<double>(tokens * hidden * experts);
  state.counters["gflops"] = flops / t->own / 1e9;
  state.counters["threads"] = omp_get_max_threads();
}

void router_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t tokens : {64, 1024}) {
    b->Args({tokens, 2048, 512});  // Qwen3-Next
    b->Args({tokens, 7168, 256});  // DeepSeek-V3
  }
  b->ArgNames({"tokens", "hidden", "experts"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MoeRouterCpu, bf16, RouterPrecision::bf16)->Apply(router_shapes);
BENCHMARK_CAPTURE(BM_MoeRouterCpu, fp32_gate, RouterPrecision::fp32_gate)->Apply(router_shapes);
BENCHMARK_CAPTURE(BM_MoeRouterCpu, fp32_routing, RouterPrecision::fp32_routing)
    ->Apply(router_shapes);

// ---------------------------------------------------------------- (c) GEMMs against Eigen

// Eigen's float GEMM of the same M, N, K, preallocated, measured once per shape.
double eigen_seconds(uint64_t M, uint64_t N, uint64_t K) {
  static std::map<std::tuple<uint64_t, uint64_t, uint64_t>, double> cache;
  return cached_seconds(cache, std::tuple{M, N, K}, [&] {
    const auto m = static_cast<Eigen::Index>(M), n = static_cast<Eigen::Index>(N),
               k = static_cast<Eigen::Index>(K);
    Eigen::MatrixXf a(m, k), b(k, n), c(m, n);
    for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = seeded_value(i, 5, 1.0f);
    for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = seeded_value(i, 6, 0.05f);
    return seconds_per_call([&] {
      c.noalias() = a * b;
      benchmark::DoNotOptimize(c.data());
    });
  });
}

void report_gemm(benchmark::State& state, double own, uint64_t M, uint64_t N, uint64_t K) {
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N * K);
  const double eigen = eigen_seconds(M, N, K);
  state.counters["gflops"] = flops / own / 1e9;
  state.counters["eigen_gflops"] = flops / eigen / 1e9;
  state.counters["eigen_fraction"] = eigen / own;
  state.counters["threads"] = omp_get_max_threads();
  state.counters["eigen_threads"] = Eigen::nbThreads();
}

using GemmSetup = bench::OpRig<GemmOp>;

// A dense BF16 projection y[rows, N] = x[rows, K]·Wᵀ (norm_output → moe_output).
GemmSetup& gemm_setup(uint64_t rows, uint64_t K, uint64_t N) {
  static std::map<std::tuple<uint64_t, uint64_t, uint64_t>, std::unique_ptr<GemmSetup>> cache;
  return bench::cached_setup(cache, std::tuple{rows, K, N}, [&] {
    auto s = std::make_unique<GemmSetup>();
    const TensorRef x = arena_tensor(BufferId::norm_output, 0, {rows, K}, DType::bf16);
    s->op = GemmOp::make("bench_proj", "bf16", {{x, AccessKind::read, "norm"}}, rows, rows, K, N,
                         BufferId::moe_output, 0, DType::bf16, "proj_out");
    bench::make_rig(*s, {&s->op.weight});
    put_seeded(*s->rig, x, 7, 1.0f);
    put_seeded(*s->rig, s->op.weight, 8, 0.05f);
    return s;
  });
}

// The benchmark of `ours`, a GEMM of M × N × K, against Eigen's (report_gemm).
template <class F>
void time_gemm(benchmark::State& state, F ours, uint64_t M, uint64_t N, uint64_t K) {
  if (bench::timed_loop_or_skip(state, ours)) report_gemm(state, seconds_per_call(ours), M, N, K);
}

void BM_MoeGemmCpu(benchmark::State& state) {
  const auto rows = static_cast<uint64_t>(state.range(0));
  const auto K = static_cast<uint64_t>(state.range(1));
  const auto N = static_cast<uint64_t>(state.range(2));
  GemmSetup& s = gemm_setup(rows, K, N);
  time_gemm(
      state, [&] { s.rig->backend->gemm(s.rig->ws, s.op); }, rows, N, K);
}

// Qwen3-Next shared expert gate/up (2048 → 512) and a square 2048 projection.
BENCHMARK(BM_MoeGemmCpu)
    ->ArgsProduct({{64, 256}, {2048}, {512, 2048}})
    ->ArgNames({"rows", "K", "N"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Routed experts with Qwen3-Next's per-expert shape (D 2048, I 512, top_k 10) but 64 of its 512
// experts, so the weights stay 128 MiB per projection.
constexpr uint64_t kExpertHidden = 2048, kExpertInter = 512, kExperts = 64, kExpertTopK = 10;

using ExpertSetup = bench::OpRig<MoeExpertGemmOp>;

ExpertSetup& expert_setup(ExpertProj proj, uint64_t tokens) {
  static std::map<std::pair<ExpertProj, uint64_t>, std::unique_ptr<ExpertSetup>> cache;
  return bench::cached_setup(cache, std::pair{proj, tokens}, [&] {
    auto s = std::make_unique<ExpertSetup>();
    ModelConfig c;
    c.hidden_size = kExpertHidden;
    c.moe_intermediate_size = kExpertInter;
    c.num_experts = kExperts;
    c.num_experts_per_tok = kExpertTopK;
    s->op = MoeExpertGemmOp::make(c, tokens, proj);
    bench::make_rig(*s, {&s->op.weight});
    put_seeded(*s->rig, s->op.input, 9, 1.0f);
    s->rig->put(s->op.ids, spread_ids(tokens, kExpertTopK, kExperts));
    put_seeded(*s->rig, s->op.weight, 10, 0.05f);
    return s;
  });
}

void BM_MoeExpertGemmCpu(benchmark::State& state, ExpertProj proj) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  ExpertSetup& s = expert_setup(proj, tokens);
  // Every slot is routed: the grouped GEMM does slots × N × K multiply-adds.
  time_gemm(
      state, [&] { s.rig->backend->moe_expert_gemm(s.rig->ws, s.op); }, tokens * kExpertTopK,
      s.op.shape().N, s.op.shape().K);
}

void expert_shapes(benchmark::internal::Benchmark* b) {
  b->Arg(16)->Arg(128)->ArgName("tokens")->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MoeExpertGemmCpu, gate, ExpertProj::gate)->Apply(expert_shapes);
BENCHMARK_CAPTURE(BM_MoeExpertGemmCpu, down, ExpertProj::down)->Apply(expert_shapes);

using LmHeadSetup = bench::OpRig<LmHeadOp>;

// Decode rows (each logits row reads its own input row), h 2048, a 32000-token vocabulary.
constexpr uint64_t kLmHidden = 2048, kLmVocab = 32000;

LmHeadSetup& lm_head_setup(uint64_t rows) {
  static std::map<uint64_t, std::unique_ptr<LmHeadSetup>> cache;
  return bench::cached_setup(cache, rows, [&] {
    auto s = std::make_unique<LmHeadSetup>();
    s->op = LmHeadOp::make(rows, rows, kLmHidden, kLmVocab, "decode", LmHeadRows{rows, 0, 0});
    bench::make_rig(*s, {&s->op.table});
    put_seeded(*s->rig, s->op.input, 11, 1.0f);
    put_seeded(*s->rig, s->op.table, 12, 0.05f);
    return s;
  });
}

void BM_MoeLmHeadCpu(benchmark::State& state) {
  const auto rows = static_cast<uint64_t>(state.range(0));
  LmHeadSetup& s = lm_head_setup(rows);
  time_gemm(
      state, [&] { s.rig->backend->lm_head(s.rig->ws, s.op); }, rows, kLmVocab, kLmHidden);
}

BENCHMARK(BM_MoeLmHeadCpu)
    ->Arg(8)
    ->Arg(64)
    ->ArgName("rows")
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace bufferlab
