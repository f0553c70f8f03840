// Google Benchmark: the CUDA attention cores (docs/spec/attention.md §4, docs/spec/numerics.md
// §8, ops/attention.h) through the Backend interface, timed with CUDA events (manual time)
// against the H200 roofline of docs/gpu-runs.md. Not pass/fail.
//
//   BM_CudaAttnPrefill  attn_prefill of one stream of `tokens` rows after `context` keys in the
//                       paged cache
//   BM_CudaAttnDecode   attn_decode of `rows` decode rows with `context` cached keys each: one
//                       split, or split-K with the H200 sizing's split count + splitk_merge
// Models (../attention_bench_cases.h, the CPU bench's): qwen3-next-80b, gpt-oss-20b on a full
// and a sliding layer (window 128), llama-3.1-8b. Prefill: 1024 and 4096 tokens after no
// context, 512 after 4096; decode: 8 rows at contexts 1024 and 8192. The shapes are named in
// the benchmark names, so scripts/torch_attention.py (PyTorch SDPA, run by
// scripts/gpu-check.sh) times the same work.
//
// Setup, once per shape (not timed): make_attn_case draws the pass (seeded, shuffled blocks),
// plan_attention places it, and run_attention runs the whole pass once on the workspace, so
// the timed core reads real staged Q / K / V and a filled cache. A decode shape's workspace
// also holds the one-split plan of the same case (the pool and metadata are placed alike), so
// its two benchmarks time the same rows and keys.
//
// Roofline, with the FLOP model of ../attention_bench_cases.h (4·hd·nq per visible (row, key)):
//   bytes    compulsory traffic: Q (prefill: the staged copy; decode: the Q heads of the qkv
//            rows) and the BF16 output once; prefill: the K and V scratch rows and the cache
//            keys of the stream's prefix that any row sees; decode: every visible K and V row
//            (split-K partials are the algorithm's own traffic, not counted)
//   counters kernel_us, gbps, tflops, roofline_fraction = max(bytes / 4.3e12, flops / 67e12) /
//            time (the kernels compute in FP32 on CUDA cores), tc_roofline_fraction = the same
//            with the BF16 tensor-core peak (790e12), the ceiling of a tensor-core kernel.
//            Split-K adds merge_us, one_split_us and speedup_vs_one_split (same run).
//
// Without a usable GPU every benchmark reports "skipped: <reason>"; an op or a case the backend
// refuses reports "not run: <error>".
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../attention_bench_cases.h"
#include "bench_cuda_rig.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/attention_inputs.h"

namespace bufferlab {
namespace {

using namespace bench;  // NOLINT(google-build-using-namespace): the shared rig

uint64_t arg(const benchmark::State& state, int i) { return static_cast<uint64_t>(state.range(i)); }

struct Cost {
  double bytes = 0, flops = 0;
};

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

using Work = std::function<void()>;

// Times `op` (one warm-up call first) and reports the roofline counters; returns the mean
// seconds per call.
double run_timed(benchmark::State& state, Device& d, Cost cost, const Work& op) {
  op();
  d.backend->synchronize();
  for (auto _ : state) state.SetIterationTime(event_ms(d, op) / 1e3);
  const double s = mean_ms(d, op) / 1e3;
  const double at_copy = cost.bytes / kCopyBytesPerS;
  state.counters["kernel_us"] = 1e6 * s;
  state.counters["gbps"] = cost.bytes / s / 1e9;
  state.counters["tflops"] = cost.flops / s / 1e12;
  state.counters["roofline_fraction"] = std::max(at_copy, cost.flops / kFp32FlopsPerS) / s;
  state.counters["tc_roofline_fraction"] = std::max(at_copy, cost.flops / kBf16FlopsPerS) / s;
  state.SetBytesProcessed(static_cast<int64_t>(cost.bytes) *
                          static_cast<int64_t>(state.iterations()));
  return s;
}

// ---------------------------------------------------------------- the live pass

// The plans of the live workspace (Device::key): the case's plan and, for decode, the same
// case planned with one split.
struct LivePass {
  std::string key;
  oracle::AttnPlan plan, one_split;
  AttnGeometry geom;
};

// Makes `key`'s pass live: draws the case, plans it, allocates the footprint (with the one-split
// twin's for decode) and runs the whole pass once. Replaces the previous pass.
const LivePass& use_pass(Device& d, const std::string& key, const oracle::AttnCaseSpec& spec) {
  static LivePass live;
  if (live.key == key && d.key == key) return live;
  live.key.clear();
  d.key.clear();  // the workspace no longer matches any plan held here
  const oracle::AttnCase c = oracle::make_attn_case(spec, kAttnBenchSeed);
  live.plan = oracle::plan_attention(c);
  live.geom = c.geom;
  std::vector<Access> all = live.plan.accesses();
  if (c.decode.rows > 0) {
    oracle::AttnCase one = c;
    one.decode.splits = 1;
    live.one_split = oracle::plan_attention(one);
    if (live.one_split.pool_bytes != live.plan.pool_bytes)
      throw Error("bench: the one-split plan places the pool differently");
    const std::vector<Access> more = live.one_split.accesses();
    all.insert(all.end(), more.begin(), more.end());
  }
  use_workspace(d, key, all, live.plan.pool_bytes,
                [&] { (void)oracle::run_attention(*d.backend, d.ws, live.plan, c); });
  live.key = key;
  return live;
}

std::string pass_key(const char* op, const AttnModel& m, uint64_t a, uint64_t b) {
  return std::string(op) + "/" + m.tag + "/" + std::to_string(a) + "/" + std::to_string(b);
}

// ---------------------------------------------------------------- prefill

void BM_CudaAttnPrefill(benchmark::State& state, AttnModel m) {
  with_device(state, [&](Device& d) {
    const uint64_t t = arg(state, 0), ctx = arg(state, 1);
    const LivePass& p = use_pass(d, pass_key("prefill", m, t, ctx), attn_prefill_spec(m, t, ctx));
    const AttnGeometry& g = p.geom;
    const uint64_t window = attn_window(m, g);
    // Prefix keys any row sees: [lo of the first row, ctx).
    const uint64_t lo0 = window > 0 && ctx + 1 > window ? ctx + 1 - window : 0;
    const uint64_t prefix = ctx > lo0 ? ctx - lo0 : 0;
    const Cost cost{attn_u(2 * (2 * t * g.q_width() + 2 * (t + prefix) * g.kv_width())),
                    attn_flops(g, attn_prefill_keys(t, ctx, window))};
    const Work op = [&] { d.backend->attn_prefill(d.ws, p.plan.prefill); };
    const double s = run_timed(state, d, cost, op);
    state.counters["tokens_per_s"] = attn_u(t) / s;
  });
}

// ---------------------------------------------------------------- decode

void BM_CudaAttnDecode(benchmark::State& state, AttnModel m) {
  with_device(state, [&](Device& d) {
    const uint64_t rows = arg(state, 0), ctx = arg(state, 1), splits = arg(state, 2);
    // One workspace per (model, rows, context): the split-K plan and its one-split twin.
    const LivePass& p = use_pass(d, pass_key("decode", m, rows, ctx),
                                 attn_decode_spec(m, rows, ctx, attn_h200_splits(m, rows)));
    const AttnGeometry& g = p.geom;
    const uint64_t window = attn_window(m, g);
    const Cost cost{attn_u(attn_decode_kv_bytes(g, rows, ctx, window) + 2 * 2 * rows * g.q_width()),
                    attn_flops(g, rows * attn_visible(ctx, window))};
    const Work one = [&] { d.backend->attn_decode(d.ws, p.one_split.decode); };
    const Work merge = [&] { d.backend->splitk_merge(d.ws, p.plan.merge); };
    const Work split_k = [&] {
      d.backend->attn_decode(d.ws, p.plan.decode);
      merge();
    };
    if (splits == 1 || !p.plan.decode.split_k()) {
      run_timed(state, d, cost, one);
      return;
    }
    const double s = run_timed(state, d, cost, split_k);
    const double one_s = mean_ms(d, one) / 1e3;
    state.counters["merge_us"] = 1e3 * mean_ms(d, merge);
    state.counters["one_split_us"] = 1e6 * one_s;
    state.counters["speedup_vs_one_split"] = one_s / s;
    d.backend->synchronize();
  });
}

// ---------------------------------------------------------------- registration

// Shape by shape, so a decode shape's two benchmarks share one workspace (use_pass).
[[maybe_unused]] const bool kRegistered = [] {
  for (const AttnModel& m : kAttnModels)
    benchmark::RegisterBenchmark((std::string("BM_CudaAttnPrefill/") + m.tag).c_str(),
                                 BM_CudaAttnPrefill, m)
        ->Args({1024, 0})
        ->Args({4096, 0})
        ->Args({512, 4096})
        ->ArgNames({"tokens", "context"})
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  constexpr int64_t kRows = 8;
  for (const AttnModel& m : kAttnModels) {
    const auto split_k = static_cast<int64_t>(attn_h200_splits(m, kRows));
    for (int64_t context : {1024, 8192})
      for (int64_t splits : {int64_t{1}, split_k})
        benchmark::RegisterBenchmark((std::string("BM_CudaAttnDecode/") + m.tag).c_str(),
                                     BM_CudaAttnDecode, m)
            ->Args({kRows, context, splits})
            ->ArgNames({"rows", "context", "splits"})
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace bufferlab
