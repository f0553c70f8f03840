// Google Benchmark: the CUDA MoE routing and FFN ops (issue 4) through the Backend interface,
// timed with CUDA events (manual time) and reported against the H200 roofline of docs/gpu-runs.md:
// about 4.3 TB/s device copy and about 790 TFLOP/s dense BF16. Not pass/fail.
//
//   BM_CudaMoeRouter       the router GEMM on its three precision paths
//   BM_CudaMoeTopK         top-k on FP32 logits: softmax, sigmoid + bias (+ norm, scale 2.5)
//   BM_CudaMoeExpertGemm   the grouped expert GEMM, gate (up is the same GEMM) and down, routed
//                          ids spread evenly over all experts
//   BM_CudaMoeLmHead       the LM head over decode rows
//   BM_CudaMoeGemm         a dense BF16 projection (GemmOp kind "bf16")
//
// Per op, the compulsory bytes (each operand read once, each output written once; the expert
// GEMMs read only the experts the ids select) and flops = 2·M·N·K. Counters: kernel_us (mean of
// one call), gbps, tflops, roofline_fraction = max(bytes / 4.3e12, flops / 790e12) / time
// (1.0 = at the roofline). Shapes are real (Qwen3-Next, DeepSeek-V3, Llama-3-8B), named in the
// benchmark name so scripts/gpu-check.sh's PyTorch side-by-side mirrors them.
//
// Without a usable GPU every benchmark reports "skipped: <reason>"; an op the backend cannot
// run (a kernel not written yet, an error) reports "not run: <error>".
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../moe_bench_inputs.h"
#include "bench_cuda_rig.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "bufferlab/cuda/cuda_backend.h"
#include "bufferlab/oracle/pool_placement.h"

namespace bufferlab {
namespace {

using namespace bench;  // NOLINT(google-build-using-namespace): the shared rig

// ---------------------------------------------------------------- inputs

uint64_t distinct(const std::vector<uint32_t>& ids, uint64_t count) {
  return std::set<uint32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(count)).size();
}

struct Cost {
  double bytes = 0, flops = 0;
};

// The timed loop and the roofline counters; an Error from the op reports "not run".
template <class F>
void run_timed(benchmark::State& state, Device& d, Cost cost, F op) {
  try {
    op();
    d.backend->synchronize();
    for (auto _ : state) state.SetIterationTime(event_ms(d, op) / 1e3);
    const double s = mean_ms(d, op) / 1e3;
    d.backend->synchronize();
    state.counters["kernel_us"] = 1e6 * s;
    state.counters["gbps"] = cost.bytes / s / 1e9;
    state.counters["tflops"] = cost.flops / s / 1e12;
    state.counters["roofline_fraction"] =
        std::max(cost.bytes / kCopyBytesPerS, cost.flops / kBf16FlopsPerS) / s;
    state.SetBytesProcessed(static_cast<int64_t>(cost.bytes) *
                            static_cast<int64_t>(state.iterations()));
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("not run: ") + e.what()).c_str());
  }
}

// Runs `body` unless the device is missing or the workspace cannot be set up.
template <class F>
void with_device(benchmark::State& state, F body) {
  Device* d = device_or_skip(state);
  if (d == nullptr) return;
  try {
    body(*d);
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("not run: ") + e.what()).c_str());
  }
}

double u(uint64_t x) { return static_cast<double>(x); }
uint64_t arg(const benchmark::State& state, int i) { return static_cast<uint64_t>(state.range(i)); }

constexpr uint64_t kMaxTokens = 8192;  // router, top-k, GEMM passes: 64, 1024, 8192 rows
constexpr uint64_t kMaxExpertTokens = 4096;
constexpr uint64_t kMaxLmRows = 1024;

// ---------------------------------------------------------------- router

void BM_CudaMoeRouter(benchmark::State& state, RouterPrecision p) {
  with_device(state, [&](Device& d) {
    const uint64_t T = arg(state, 0), h = arg(state, 1), E = arg(state, 2);
    ModelConfig c;
    c.hidden_size = h;
    c.num_experts = E;
    MoeRouterOp op = MoeRouterOp::make(c, T, p);
    const uint64_t pool = oracle::place_in_pool({&op.weight});
    MoeRouterOp big = MoeRouterOp::make(c, kMaxTokens, p);
    big.weight = op.weight;
    use_workspace(
        d,
        std::string("router/") + to_string(p) + "/" + std::to_string(h) + "/" + std::to_string(E),
        big.accesses(), pool, [&] {
          if (p == RouterPrecision::fp32_routing)
            upload_tiled(d, big.input, f32_tile(big.input.elements(), 3, 2.0f));
          else
            upload_tiled(d, big.input, bf16_tile(big.input.elements(), 3, 2.0f));
          upload_tiled(d, big.weight, bf16_tile(big.weight.elements(), 4, 0.05f));
        });
    const Cost cost{u(op.input.bytes() + op.weight.bytes() + op.logits.bytes()),
                    2.0 * u(T) * u(h) * u(E)};
    run_timed(state, d, cost, [&] { d.backend->moe_router(d.ws, op); });
  });
}

void router_shapes(benchmark::internal::Benchmark* b) {
  // Shape-major order: consecutive benchmarks share one workspace.
  for (int64_t tokens : {64, 1024, 8192}) b->Args({tokens, 2048, 512});  // Qwen3-Next
  for (int64_t tokens : {64, 1024, 8192}) b->Args({tokens, 7168, 256});  // DeepSeek-V3
  b->ArgNames({"tokens", "hidden", "experts"})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_CudaMoeRouter, bf16, RouterPrecision::bf16)->Apply(router_shapes);
BENCHMARK_CAPTURE(BM_CudaMoeRouter, fp32_gate, RouterPrecision::fp32_gate)->Apply(router_shapes);
BENCHMARK_CAPTURE(BM_CudaMoeRouter, fp32_routing, RouterPrecision::fp32_routing)
    ->Apply(router_shapes);

// ---------------------------------------------------------------- top-k

void BM_CudaMoeTopK(benchmark::State& state, MoeScoring scoring) {
  with_device(state, [&](Device& d) {
    const uint64_t E = arg(state, 0), k = arg(state, 1), T = arg(state, 2);
    const ModelConfig c = topk_config(scoring, E, k);
    MoeTopKOp op = MoeTopKOp::make(c, T, /*logits_f32=*/true, /*hash=*/false);
    const uint64_t pool = oracle::place_in_pool({&op.bias});
    MoeTopKOp big = MoeTopKOp::make(c, kMaxTokens, true, false);
    big.bias = op.bias;
    use_workspace(d,
                  std::string("topk/") + to_string(scoring) + "/" + std::to_string(E) + "/" +
                      std::to_string(k),
                  big.accesses(), pool, [&] {
                    upload_tiled(d, big.logits, f32_tile(big.logits.elements(), 1, 4.0f));
                    if (big.use_bias) upload_tiled(d, big.bias, f32_tile(E, 2, 0.05f));
                  });
    const uint64_t bias = op.use_bias ? op.bias.bytes() : 0;
    const Cost cost{u(op.logits.bytes() + bias + op.ids.bytes() + op.weights.bytes()), 0.0};
    run_timed(state, d, cost, [&] { benchmark::DoNotOptimize(d.backend->moe_topk(d.ws, op)); });
  });
}

void topk_shapes(benchmark::internal::Benchmark* b) {
  // (experts, top_k): DeepSeek-V3, Qwen3-Next, the kernel's limits (kMaxScoredExperts, kMaxTopK).
  for (auto [experts, top_k] : {std::pair<int64_t, int64_t>{256, 8}, {512, 10}, {1024, 32}})
    for (int64_t tokens : {64, 1024, 8192}) b->Args({experts, top_k, tokens});
  b->ArgNames({"experts", "top_k", "tokens"})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_CudaMoeTopK, softmax, MoeScoring::softmax)->Apply(topk_shapes);
BENCHMARK_CAPTURE(BM_CudaMoeTopK, sigmoid_bias, MoeScoring::sigmoid)->Apply(topk_shapes);

// ---------------------------------------------------------------- expert GEMMs

void BM_CudaMoeExpertGemm(benchmark::State& state, ExpertProj proj) {
  with_device(state, [&](Device& d) {
    const uint64_t T = arg(state, 0), D = arg(state, 1), I = arg(state, 2), E = arg(state, 3),
                   k = arg(state, 4);
    ModelConfig c;
    c.hidden_size = D;
    c.moe_intermediate_size = I;
    c.num_experts = E;
    c.num_experts_per_tok = k;
    MoeExpertGemmOp op = MoeExpertGemmOp::make(c, T, proj);
    const uint64_t pool = oracle::place_in_pool({&op.weight});
    MoeExpertGemmOp big = MoeExpertGemmOp::make(c, kMaxExpertTokens, proj);
    big.weight = op.weight;
    const std::vector<uint32_t> ids = spread_ids(kMaxExpertTokens, k, E);
    use_workspace(d,
                  std::string("expert/") + to_string(proj) + "/" + std::to_string(D) + "/" +
                      std::to_string(I) + "/" + std::to_string(E) + "/" + std::to_string(k),
                  big.accesses(), pool, [&] {
                    upload_tiled(d, big.input, bf16_tile(big.input.elements(), 9, 1.0f));
                    upload_tiled(d, big.ids, ids);
                    upload_tiled(d, big.weight, bf16_tile(big.weight.elements(), 10, 0.05f));
                  });
    const uint64_t slots = T * k, K = op.shape().K, N = op.shape().N;
    const double weight_bytes = u(distinct(ids, slots)) * u(N) * u(K) * 2.0;
    const Cost cost{u(slots * K * 2 + slots * N * 2 + op.ids.bytes()) + weight_bytes,
                    2.0 * u(slots) * u(N) * u(K)};
    run_timed(state, d, cost, [&] { d.backend->moe_expert_gemm(d.ws, op); });
  });
}

void expert_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t tokens : {64, 1024, 4096}) b->Args({tokens, 2048, 512, 512, 10});  // Qwen3-Next
  for (int64_t tokens : {64, 1024, 4096}) b->Args({tokens, 7168, 2048, 256, 8});  // DeepSeek-V3
  b->ArgNames({"tokens", "hidden", "inter", "experts", "top_k"})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_CudaMoeExpertGemm, gate, ExpertProj::gate)->Apply(expert_shapes);
BENCHMARK_CAPTURE(BM_CudaMoeExpertGemm, down, ExpertProj::down)->Apply(expert_shapes);

// ---------------------------------------------------------------- LM head

void BM_CudaMoeLmHead(benchmark::State& state) {
  with_device(state, [&](Device& d) {
    const uint64_t R = arg(state, 0), h = arg(state, 1), V = arg(state, 2);
    LmHeadOp op = LmHeadOp::make(R, R, h, V, "decode", LmHeadRows{R, 0, 0});
    const uint64_t pool = oracle::place_in_pool({&op.table});
    LmHeadOp big =
        LmHeadOp::make(kMaxLmRows, kMaxLmRows, h, V, "decode", LmHeadRows{kMaxLmRows, 0, 0});
    big.table = op.table;
    use_workspace(d, "lm_head/" + std::to_string(h) + "/" + std::to_string(V), big.accesses(), pool,
                  [&] {
                    upload_tiled(d, big.input, bf16_tile(big.input.elements(), 11, 1.0f));
                    upload_tiled(d, big.table, bf16_tile(big.table.elements(), 12, 0.05f));
                  });
    const Cost cost{u(op.input.bytes() + op.table.bytes() + op.output.bytes()),
                    2.0 * u(R) * u(h) * u(V)};
    run_timed(state, d, cost, [&] { d.backend->lm_head(d.ws, op); });
  });
}

BENCHMARK(BM_CudaMoeLmHead)
    ->Args({64, 2048, 151936})  // Qwen3 vocabulary
    ->Args({1024, 2048, 151936})
    ->Args({64, 7168, 129280})  // DeepSeek-V3
    ->Args({1024, 7168, 129280})
    ->ArgNames({"rows", "hidden", "vocab"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------- dense BF16 GEMM

GemmOp dense_gemm(uint64_t rows, uint64_t K, uint64_t N) {
  const TensorRef x = arena_tensor(BufferId::norm_output, 0, {rows, K}, DType::bf16);
  return GemmOp::make("bench_proj", "bf16", {{x, AccessKind::read, "norm"}}, rows, rows, K, N,
                      BufferId::moe_output, 0, DType::bf16, "proj_out");
}

void BM_CudaMoeGemm(benchmark::State& state) {
  with_device(state, [&](Device& d) {
    const uint64_t R = arg(state, 0), K = arg(state, 1), N = arg(state, 2);
    GemmOp op = dense_gemm(R, K, N);
    const uint64_t pool = oracle::place_in_pool({&op.weight});
    GemmOp big = dense_gemm(kMaxTokens, K, N);
    big.weight = op.weight;
    use_workspace(d, "gemm/" + std::to_string(K) + "/" + std::to_string(N), big.accesses(), pool,
                  [&] {
                    const TensorRef& x = big.inputs[0].tensor;
                    upload_tiled(d, x, bf16_tile(x.elements(), 7, 1.0f));
                    upload_tiled(d, big.weight, bf16_tile(big.weight.elements(), 8, 0.05f));
                  });
    const Cost cost{u(op.inputs[0].tensor.bytes() + op.weight.bytes() + op.output.bytes()),
                    2.0 * u(R) * u(N) * u(K)};
    run_timed(state, d, cost, [&] { d.backend->gemm(d.ws, op); });
  });
}

void gemm_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t rows : {64, 1024, 8192}) b->Args({rows, 2048, 512});    // Qwen3-Next shared gate
  for (int64_t rows : {64, 1024, 8192}) b->Args({rows, 7168, 2048});   // DeepSeek-V3 shared gate
  for (int64_t rows : {64, 1024, 8192}) b->Args({rows, 4096, 14336});  // Llama-3-8B FFN gate
  b->ArgNames({"rows", "K", "N"})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_CudaMoeGemm)->Apply(gemm_shapes);

}  // namespace
}  // namespace bufferlab
