// Google Benchmark: the CPU attention cores (docs/spec/attention.md §4, docs/spec/numerics.md
// §8, ops/attention.h) through the Backend interface, each against a machine baseline timed in
// the same run. Not pass/fail.
//
//   BM_AttnPrefillCpu   attn_prefill of one stream of `tokens` rows after `context` keys in the
//                       paged cache; baseline: Eigen float GEMMs of the same FLOPs (below)
//   BM_AttnDecodeCpu    attn_decode of `rows` decode rows with `context` cached keys each, one
//                       split (attn_output directly) or split-K (the H200 sizing's split count)
//                       + splitk_merge; baseline: a memcpy of the K and V bytes it reads
// Models (../attention_bench_cases.h, shared with the CUDA bench): qwen3-next-80b, gpt-oss-20b
// on a full and a sliding layer (window 128), llama-3.1-8b. Prefill: 256 tokens after no
// context, 64 tokens after 1024; decode: 4 rows at contexts 1024 and 8192.
//
// Setup (once per shape, not timed): make_attn_case draws the pass (seeded, shuffled blocks),
// plan_attention places it and run_attention runs the whole pass once on the workspace
// (staging, cache writes, cores, gate), so the timed op reads real staged Q / K / V and a
// filled cache. A decode shape's workspace also holds the one-split plan of the same case (pool
// and metadata are placed alike), so its two benchmarks time the same rows and keys. Timed:
// the core op alone (split-K: the core and the merge).
//
// Clock: with one OpenMP thread (OMP_NUM_THREADS=1) every time here, ours and the baselines',
// is the process's CPU time, so a machine shared with other jobs slows neither side's figure
// by descheduling; with more threads, wall time (CPU time would count the threads' waits).
// The benchmark loop reports the same clock (manual time); the counter cpu_clock says which.
//
// Baselines and counters (every ratio from timings taken back to back in the run):
//   prefill  eigen_fraction = Eigen's time / ours at the same FLOPs (1: GEMM speed). Eigen
//            runs attention's two products without mask or softmax: per KV head
//            S = Q_g·Kᵀ ([group·t, hd]·[hd, n]) and O = S·V ([group·t, n]·[n, hd]), n the mean
//            visible keys per query row (rounded), so 4·nq·t·n·hd flops — the FLOP model's
//            count up to that rounding (each side's own count gives its gflops). Also gflops,
//            eigen_gflops, keys_per_row, tokens_per_s.
//   decode   copy_fraction = memcpy time of the KV bytes / ours (1: decode at memcpy speed;
//            bench_timing.h's parallel_memcpy on the same clock), gbps (KV bytes / time),
//            memcpy_gbps, gflops; split-K adds merge_us (the merge alone) and
//            speedup_vs_one_split (the one-split benchmark's time of the same shape / ours).
// The core is the reference backend: fixed-order FP32 dots over d (one dependent chain per
// score, no library GEMM: ops/attention.h pins the order), so it is far from either baseline
// by design; the ratios say how far.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Dense>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../attention_bench_cases.h"
#include "bench_timing.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/attention_inputs.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "seeded_values.h"

namespace bufferlab {
namespace {

using bench::attn_u;
using bench::AttnModel;

constexpr double kMinS = 0.1;  // each same-run timing window (seconds)

// ---------------------------------------------------------------- the clock

bool attn_cpu_clock() { return omp_get_max_threads() == 1; }

// Seconds on the header's clock: process CPU time with one thread, else wall time.
double attn_now() {
  timespec ts{};
  clock_gettime(attn_cpu_clock() ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Mean seconds per call of f on that clock over at least min_s (after `done` calls that already
// took `spent` seconds, e.g. the benchmark loop's).
template <class F>
double attn_seconds_per_call(F f, double min_s, uint64_t done = 0, double spent = 0.0) {
  while (done == 0 || spent < min_s) {
    const double t0 = attn_now();
    f();
    spent += attn_now() - t0;
    ++done;
  }
  return spent / static_cast<double>(done);
}

// The benchmark loop of `op` (each iteration's time on the header's clock, manual time), after
// one warm-up call that skips the benchmark on an Error; then the mean over at least kMinS.
// Returns 0 when skipped.
template <class F>
double attn_time_op(benchmark::State& state, F op) {
  if (!bench::first_call_or_skip(state, op)) return 0.0;
  uint64_t done = 0;
  double spent = 0.0;
  for (auto _ : state) {
    const double t0 = attn_now();
    op();
    const double s = attn_now() - t0;
    state.SetIterationTime(s);
    spent += s;
    ++done;
  }
  state.counters["cpu_clock"] = attn_cpu_clock() ? 1 : 0;
  state.counters["threads"] = omp_get_max_threads();
  return attn_seconds_per_call(op, kMinS, done, spent);
}

// ---------------------------------------------------------------- setup

// The live pass: its case's plan (decode: split-K when the spec asks for it) and, for decode,
// the one-split plan of the same case, on one workspace, after one whole run.
struct AttnSetup {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  oracle::AttnPlan plan, one_split;
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
  std::vector<Access> all = s->plan.accesses();
  if (c.decode.rows > 0) {
    oracle::AttnCase one = c;
    one.decode.splits = 1;
    s->one_split = oracle::plan_attention(one);
    if (s->one_split.pool_bytes != s->plan.pool_bytes)
      throw Error("bench: the one-split plan places the pool differently");
    const std::vector<Access> more = s->one_split.accesses();
    all.insert(all.end(), more.begin(), more.end());
  }
  s->ws = s->backend->allocate(oracle::ffn_footprint_layout(all), s->plan.pool_bytes);
  (void)oracle::run_attention(*s->backend, s->ws, s->plan, c);
  live = std::move(s);
  live_key = key;
  return *live;
}

// The key of one shape's setup.
std::string attn_key(const char* op, const AttnModel& m, uint64_t a, uint64_t b) {
  return std::string(op) + "/" + m.tag + "/" + std::to_string(a) + "/" + std::to_string(b);
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

// ---------------------------------------------------------------- baselines

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
    const auto fill = [&](Eigen::MatrixXf& m, Eigen::Index r, Eigen::Index c) {
      const std::vector<float> v =
          testing::seeded_values(static_cast<uint64_t>(r * c), seed++, 1.0f);
      m = Eigen::Map<const Eigen::MatrixXf>(v.data(), r, c);
    };
    for (Head& h : heads) {
      fill(h.q, rows, d);
      fill(h.kt, d, keys);
      fill(h.v, keys, d);
      h.s.resize(rows, keys);
      h.o.resize(rows, d);
    }
    const auto products = [&] {
      for (Head& h : heads) {
        h.s.noalias() = h.q * h.kt;
        h.o.noalias() = h.s * h.v;
        benchmark::DoNotOptimize(h.o.data());
      }
    };
    products();  // warm-up
    return attn_seconds_per_call(products, kMinS);
  });
}

// Seconds per parallel_memcpy of `bytes` (bench_timing.h's bandwidth baseline) on the header's
// clock, measured once per size in this run.
double attn_copy_seconds(uint64_t bytes) {
  static std::map<uint64_t, double> cache;
  return bench::cached_seconds(cache, bytes, [&] {
    std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes, std::byte{0});
    const auto copy = [&] {
      bench::parallel_memcpy(dst.data(), src.data(), bytes);
      benchmark::DoNotOptimize(dst.data());
    };
    copy();  // warm-up: the pages are touched
    return attn_seconds_per_call(copy, kMinS);
  });
}

// ---------------------------------------------------------------- prefill

void BM_AttnPrefillCpu(benchmark::State& state, AttnModel m) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  const auto context = static_cast<uint64_t>(state.range(1));
  AttnSetup* s = attn_setup_or_skip(state, [&]() -> AttnSetup& {
    return attn_setup(attn_key("prefill", m, tokens, context),
                      bench::attn_prefill_spec(m, tokens, context));
  });
  if (s == nullptr) return;
  const double own = attn_time_op(state, [&] { s->backend->attn_prefill(s->ws, s->plan.prefill); });
  if (own == 0.0) return;

  const AttnGeometry& g = s->geom;
  const uint64_t keys = bench::attn_prefill_keys(tokens, context, bench::attn_window(m, g));
  const auto n = static_cast<uint64_t>(std::llround(attn_u(keys) / attn_u(tokens)));
  const double eigen = eigen_attention_seconds(g.nkv, g.group(), g.hd, tokens, n);
  const double flops = bench::attn_flops(g, keys), eigen_flops = bench::attn_flops(g, tokens * n);
  state.counters["gflops"] = flops / own / 1e9;
  state.counters["eigen_gflops"] = eigen_flops / eigen / 1e9;
  state.counters["eigen_fraction"] = (flops / own) / (eigen_flops / eigen);
  state.counters["eigen_us"] = 1e6 * eigen;
  state.counters["keys_per_row"] = attn_u(keys) / attn_u(tokens);
  state.counters["tokens_per_s"] = attn_u(tokens) / own;
  state.counters["eigen_threads"] = Eigen::nbThreads();
}

// ---------------------------------------------------------------- decode

void BM_AttnDecodeCpu(benchmark::State& state, AttnModel m) {
  const auto rows = static_cast<uint64_t>(state.range(0));
  const auto context = static_cast<uint64_t>(state.range(1));
  const auto splits = static_cast<uint64_t>(state.range(2));
  // One setup per (model, rows, context): the split-K plan and its one-split twin.
  const std::string key = attn_key("decode", m, rows, context);
  AttnSetup* s = attn_setup_or_skip(state, [&]() -> AttnSetup& {
    return attn_setup(key,
                      bench::attn_decode_spec(m, rows, context, bench::attn_h200_splits(m, rows)));
  });
  if (s == nullptr) return;
  const bool split_k = splits > 1 && s->plan.decode.split_k();
  const oracle::AttnPlan& p = s->plan;
  const auto merge = [&] { s->backend->splitk_merge(s->ws, p.merge); };
  double own = 0.0;
  if (split_k)
    own = attn_time_op(state, [&] {
      s->backend->attn_decode(s->ws, p.decode);
      merge();
    });
  else
    own = attn_time_op(state, [&] { s->backend->attn_decode(s->ws, s->one_split.decode); });
  if (own == 0.0) return;

  // The one-split time of each shape, for its split-K benchmark (registered after it).
  static std::map<std::string, double> one_split_s;
  const AttnGeometry& g = s->geom;
  const uint64_t window = bench::attn_window(m, g);
  const uint64_t bytes = bench::attn_decode_kv_bytes(g, rows, context, window);
  const double copy = attn_copy_seconds(bytes);
  state.counters["copy_fraction"] = copy / own;
  state.counters["gbps"] = attn_u(bytes) / own / 1e9;
  state.counters["memcpy_gbps"] = attn_u(bytes) / copy / 1e9;
  state.counters["gflops"] =
      bench::attn_flops(g, rows * bench::attn_visible(context, window)) / own / 1e9;
  if (!split_k) {
    one_split_s[key] = own;
  } else {
    merge();  // warm-up
    state.counters["merge_us"] = 1e6 * attn_seconds_per_call(merge, kMinS / 2);
    if (auto it = one_split_s.find(key); it != one_split_s.end())
      state.counters["speedup_vs_one_split"] = it->second / own;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

// ---------------------------------------------------------------- registration

// Shape by shape (decode: one split, then split-K), so each shape is set up once.
[[maybe_unused]] const bool kRegistered = [] {
  for (const AttnModel& m : bench::kAttnModels)
    benchmark::RegisterBenchmark((std::string("BM_AttnPrefillCpu/") + m.tag).c_str(),
                                 BM_AttnPrefillCpu, m)
        ->Args({256, 0})
        ->Args({64, 1024})
        ->ArgNames({"tokens", "context"})
        ->Unit(benchmark::kMillisecond)
        ->UseManualTime();
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
            ->UseManualTime();
  }
  return true;
}();

}  // namespace
}  // namespace bufferlab
