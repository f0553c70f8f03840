// Google Benchmark: the CPU attention cores (docs/spec/attention.md §4, docs/spec/numerics.md
// §8, ops/attention.h) through the Backend interface, each against a machine baseline timed in
// the same run. Not pass/fail.
//
//   BM_AttnPrefillCpu   attn_prefill of one stream of `tokens` rows after `context` keys in the
//                       paged cache; baseline: Eigen float GEMMs of the same FLOPs (below)
//   BM_AttnDecodeCpu    attn_decode of `rows` decode rows with `context` cached keys each, one
//                       split (attn_output directly) or split-K (the H200 sizing's split count)
//                       + splitk_merge; baseline: a memcpy of the K and V bytes it reads
// Models (../attention_bench_cases.h): qwen3-next-80b, gpt-oss-20b on a full and a sliding
// layer (window 128), llama-3.1-8b. Prefill: 256 tokens after no context, 64 tokens after
// 1024; decode: 4 rows at contexts 1024 and 8192.
//
// Setup (once per benchmark, not timed): make_attn_case draws the pass (seeded, shuffled
// blocks), plan_attention places it, allocate_attention_footprint makes the workspace and
// run_attention runs the whole pass once (staging, cache writes, cores, gate), so the timed op
// reads real staged Q / K / V and a filled cache. Timed: the core op alone (decode split-K: the
// core and the merge).
//
// Baselines and counters (every ratio from timings taken back to back, seconds_per_call):
//   prefill  eigen_fraction = Eigen's time / ours for the same FLOPs (1: GEMM speed). Eigen
//            runs attention's two products without mask or softmax: per KV head
//            S = Q_g·Kᵀ ([group·t, hd]·[hd, n]) and O = S·V ([group·t, n]·[n, hd]), n the mean
//            visible keys per query row (rounded), so 4·nq·t·n·hd flops — the FLOP model's
//            count up to that rounding (each side's own count gives its gflops). Also gflops,
//            eigen_gflops, keys_per_row.
//   decode   copy_fraction = memcpy time of the KV bytes / ours (1: decode at memcpy speed;
//            bench_timing.h's parallel_memcpy), gbps (KV bytes / time), memcpy_gbps, gflops;
//            split-K adds merge_us (the merge alone).
// The core is the reference backend: fixed-order FP32 dots over d (one dependent chain per
// score, no library GEMM: ops/attention.h pins the order), so it is far from either baseline
// by design; the ratios say how far.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Dense>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "../attention_bench_cases.h"
#include "bench_timing.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/attention_inputs.h"
#include "seeded_values.h"

namespace bufferlab {
namespace {

using bench::attn_u;
using bench::AttnModel;
using bench::copy_seconds;
using bench::seconds_per_call;

constexpr double kMinS = 0.1;  // each same-run timing window (seconds)

// ---------------------------------------------------------------- setup

// One planned pass on its own workspace, after one whole run.
struct AttnSetup {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  oracle::AttnPlan plan;
  AttnGeometry geom;
  Workspace ws;
};

// The setup of `spec` (keyed by `key`): one live at a time, so a run holds one cache at once.
AttnSetup& attn_setup(const std::string& key, const oracle::AttnCaseSpec& spec) {
  static std::string live_key;
  static std::unique_ptr<AttnSetup> live;
  if (live && live_key == key) return *live;
  live.reset();
  auto s = std::make_unique<AttnSetup>();
  const oracle::AttnCase c = oracle::make_attn_case(spec, bench::kAttnBenchSeed);
  s->plan = oracle::plan_attention(c);
  s->geom = c.geom;
  s->ws = oracle::allocate_attention_footprint(*s->backend, s->plan);
  (void)oracle::run_attention(*s->backend, s->ws, s->plan, c);
  live = std::move(s);
  live_key = key;
  return *live;
}

// The key of one benchmark's setup.
std::string attn_key(const char* op, const AttnModel& m, uint64_t a, uint64_t b, uint64_t c) {
  return std::string(op) + "/" + m.tag + "/" + std::to_string(a) + "/" + std::to_string(b) + "/" +
         std::to_string(c);
}

// The setup, or null after skipping the benchmark on an Error (a kernel or harness refusing).
template <class Make>
AttnSetup* attn_setup_or_skip(benchmark::State& state, Make make) {
  try {
    return &make();
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("skipped: ") + e.what()).c_str());
    return nullptr;
  }
}

// ---------------------------------------------------------------- Eigen baseline

// Seconds of attention's two products in Eigen (the header's baseline) for nkv KV heads of
// `group` query heads, t query rows, n keys; measured once per shape in this run.
double eigen_attention_seconds(uint64_t nkv, uint64_t group, uint64_t hd, uint64_t t, uint64_t n) {
  static std::map<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, uint64_t>, double> cache;
  return bench::cached_seconds(cache, std::tuple{nkv, group, hd, t, n}, [&] {
    const auto rows = static_cast<Eigen::Index>(group * t), d = static_cast<Eigen::Index>(hd),
               keys = static_cast<Eigen::Index>(n);
    struct Head {
      Eigen::MatrixXf q, kt, v, s, o;
    };
    std::vector<Head> heads(nkv);
    uint64_t seed = 11;
    const auto fill = [&](Eigen::MatrixXf& m, Eigen::Index r, Eigen::Index c, float scale) {
      const std::vector<float> v =
          testing::seeded_values(static_cast<uint64_t>(r * c), seed++, scale);
      m = Eigen::Map<const Eigen::MatrixXf>(v.data(), r, c);
    };
    for (Head& h : heads) {
      fill(h.q, rows, d, 1.0f);
      fill(h.kt, d, keys, 1.0f);
      fill(h.v, keys, d, 1.0f);
      h.s.resize(rows, keys);
      h.o.resize(rows, d);
    }
    return seconds_per_call(
        [&] {
          for (Head& h : heads) {
            h.s.noalias() = h.q * h.kt;
            h.o.noalias() = h.s * h.v;
            benchmark::DoNotOptimize(h.o.data());
          }
        },
        kMinS);
  });
}

// ---------------------------------------------------------------- prefill

void BM_AttnPrefillCpu(benchmark::State& state, AttnModel m) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  const auto context = static_cast<uint64_t>(state.range(1));
  const std::string key = attn_key("prefill", m, tokens, context, 0);
  AttnSetup* s = attn_setup_or_skip(state, [&]() -> AttnSetup& {
    return attn_setup(key, bench::attn_prefill_spec(m, tokens, context));
  });
  if (s == nullptr) return;
  const auto ours = [&] { s->backend->attn_prefill(s->ws, s->plan.prefill); };
  if (!bench::timed_loop_or_skip(state, ours)) return;
  const double own = seconds_per_call(ours, kMinS, false);  // warmed by the loop

  const AttnGeometry& g = s->geom;
  const uint64_t keys = bench::attn_prefill_keys(tokens, context, bench::attn_window(m, g));
  const uint64_t n = static_cast<uint64_t>(std::llround(attn_u(keys) / attn_u(tokens)));
  const double eigen = eigen_attention_seconds(g.nkv, g.group(), g.hd, tokens, n);
  const double flops = bench::attn_flops(g, keys), eigen_flops = bench::attn_flops(g, tokens * n);
  state.counters["gflops"] = flops / own / 1e9;
  state.counters["eigen_gflops"] = eigen_flops / eigen / 1e9;
  state.counters["eigen_fraction"] = (flops / own) / (eigen_flops / eigen);
  state.counters["eigen_us"] = 1e6 * eigen;
  state.counters["keys_per_row"] = attn_u(keys) / attn_u(tokens);
  state.counters["tokens_per_s"] = attn_u(tokens) / own;
  state.counters["threads"] = omp_get_max_threads();
  state.counters["eigen_threads"] = Eigen::nbThreads();
}

// ---------------------------------------------------------------- decode

void BM_AttnDecodeCpu(benchmark::State& state, AttnModel m) {
  const auto rows = static_cast<uint64_t>(state.range(0));
  const auto context = static_cast<uint64_t>(state.range(1));
  const auto splits = static_cast<uint64_t>(state.range(2));
  const std::string key = attn_key("decode", m, rows, context, splits);
  AttnSetup* s = attn_setup_or_skip(state, [&]() -> AttnSetup& {
    return attn_setup(key, bench::attn_decode_spec(m, rows, context, splits));
  });
  if (s == nullptr) return;
  const oracle::AttnPlan& p = s->plan;
  const auto merge = [&] { s->backend->splitk_merge(s->ws, p.merge); };
  const auto ours = [&] {
    s->backend->attn_decode(s->ws, p.decode);
    if (p.decode.split_k()) merge();
  };
  if (!bench::timed_loop_or_skip(state, ours)) return;
  const double own = seconds_per_call(ours, kMinS, false);

  const AttnGeometry& g = s->geom;
  const uint64_t window = bench::attn_window(m, g);
  const uint64_t bytes = bench::attn_decode_kv_bytes(g, rows, context, window);
  const double copy = copy_seconds(bytes, kMinS);
  state.counters["copy_fraction"] = copy / own;
  state.counters["gbps"] = attn_u(bytes) / own / 1e9;
  state.counters["memcpy_gbps"] = attn_u(bytes) / copy / 1e9;
  state.counters["gflops"] =
      bench::attn_flops(g, rows * bench::attn_visible(context, window)) / own / 1e9;
  if (p.decode.split_k()) state.counters["merge_us"] = 1e6 * seconds_per_call(merge, kMinS / 2);
  state.counters["threads"] = omp_get_max_threads();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

// ---------------------------------------------------------------- registration

[[maybe_unused]] const bool kRegistered = [] {
  for (const AttnModel& m : bench::kAttnModels)
    benchmark::RegisterBenchmark((std::string("BM_AttnPrefillCpu/") + m.tag).c_str(),
                                 BM_AttnPrefillCpu, m)
        ->Args({256, 0})
        ->Args({64, 1024})
        ->ArgNames({"tokens", "context"})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  constexpr int64_t kRows = 4;
  for (const AttnModel& m : bench::kAttnModels) {
    const auto split_k = static_cast<int64_t>(bench::attn_h200_splits(m, kRows));
    for (int64_t context : {1024, 8192})
      for (int64_t splits : {int64_t{1}, split_k})
        benchmark::RegisterBenchmark((std::string("BM_AttnDecodeCpu/") + m.tag).c_str(),
                                     BM_AttnDecodeCpu, m)
            ->Args({kRows, context, splits})
            ->ArgNames({"rows", "context", "splits"})
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
  }
  return true;
}();

}  // namespace
}  // namespace bufferlab
