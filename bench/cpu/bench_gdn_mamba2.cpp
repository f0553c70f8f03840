// Google Benchmark: the CPU Gated DeltaNet and Mamba-2 SSD cores (docs/spec/numerics.md §5–§6,
// ops/gdn.h, ops/mamba2.h), the chunked form against the token-by-token recurrence on the SAME
// workspace and inputs, and both against machine baselines timed in the same run. Not pass/fail.
//
//   BM_GdnChunkedCpu      gdn_chunk wu + state + output over one sequence of T tokens;
//                         baseline: gdn_recurrent over the same rows
//   BM_GdnConvGatesNormCpu the rest of the GDN core's ops: gdn_conv + gdn_gates +
//                         gdn_gated_norm; baseline: memcpy of the bytes they move
//   BM_SsdChunkedCpu      mamba2_chunk cumsum + bmm + scan over one sequence of T tokens;
//                         baseline: mamba2_recurrent over the same rows
//   BM_SsdConvNormCpu     mamba2_conv + mamba2_gated_norm; baseline: memcpy of their bytes
// Shapes: qwen3-next-80b GDN (nk 16, kd 128, nv 32, vd 128) at T = 64, 256, 1024; SSD of
// nemotron-h-56b (H 256, P 64, N 256, G 8) at T = 256 and tiny-mamba (H 6, P 24, N 40, G 2) at
// T = 256 and 1024.
//
// Setup (once per shape, not timed): the oracle harness plans both paths (plan_gdn /
// plan_mamba2), one workspace holds the union of their operands (they share the conv output,
// gates, output rows and the pool: the same offsets), the seeded generator's inputs
// (generate_gdn_inputs / generate_mamba2_inputs) are uploaded and the whole chunked call runs once
// (run_gdn / run_mamba2), so every timed op reads real conv outputs and gates. Timed: the
// backend's core ops alone. The recurrent state carries over from call to call (it stays
// bounded: every decay factor is ≤ 1).
//
// FLOP model, in multiply-adds (MAC; GFLOP/s counts 2 flops per MAC), C = 64:
//   GDN chunked, per region (chunk × value head):
//     C²·kd (Gram L, k·k) + C²·(kd + vd)/2 (W/U substitution) + 2·C·kd·vd (uc = U − W·S,
//     state update Kᵀ·uc) + C·kd·vd + C²·vd (output Q·S and the masked product with uc)
//   GDN recurrent: 4·kd·vd per token per value head (Sᵀk, α·S, k·δᵀ, Sᵀq)
//   SSD chunked: per (chunk, head) 2·C·P·N (C·h0, state update) + C²·P/2 (causal intra-chunk
//     sum), per (chunk, group) C²·N (CB, the full square)
//   SSD recurrent: 3·P·N per token per head (exp(dt·A)·h, dt·x·Bᵀ, h·C)
// Machine baselines, measured once per run on every OpenMP thread:
//   fma_gflops    a scalar acc = acc·m + a loop over 64 independent lanes per thread (the
//                 compiler vectorises it; no FMA in the baseline x86-64 build): the FP32 peak
//                 this build can reach
//   loop_gflops   a plain i-k-j triple-loop FP32 GEMM, 64×128 · 128×128 per thread (the
//                 chunked stages' W·S tile)
// Counters of the chunked benchmarks: tokens_per_s, recurrent_tokens_per_s,
// speedup_vs_recurrent (recurrent time / chunked time), gflops and recurrent_gflops (each
// path's own MAC count), fma_fraction = gflops / fma_gflops (and recurrent_fma_fraction),
// loop_gemm_ratio = gflops / loop_gflops, per-stage times in µs. Each ratio compares timings
// taken back to back with seconds_per_call, so a busy machine slows both alike.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_timing.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_harness.h"
#include "bufferlab/oracle/moe_ffn_harness.h"

namespace bufferlab {
namespace {

using bench::copy_seconds;
using bench::first_call_or_skip;
using bench::seconds_per_call;

constexpr double kC = 64.0;       // chunk length of both chunked algorithms
constexpr double kStageS = 0.05;  // per-stage timing window (seconds)

double u(uint64_t x) { return static_cast<double>(x); }

// ---------------------------------------------------------------- FLOP model (MACs)

double macs(const GdnChunkOp& op) {
  const GdnChunkOp::Shape& d = op.shape();
  const double kd = u(d.kd), vd = u(d.vd);
  const double region =
      kC * kC * kd + kC * kC * (kd + vd) / 2 + 2 * kC * kd * vd + kC * kd * vd + kC * kC * vd;
  return region * u(d.chunks) * u(d.nv);
}

double macs(const GdnRecurrentOp& op) {
  const GdnRecurrentOp::Shape& d = op.shape();
  return 4.0 * u(d.kd) * u(d.vd) * u(d.rows) * u(d.nv);
}

double macs(const Mamba2ChunkOp& op) {
  const Mamba2ChunkOp::Shape& d = op.shape();
  const double P = u(d.P), N = u(d.N);
  return u(d.chunks) * (u(d.H) * (2 * kC * P * N + kC * kC * P / 2) + u(d.G) * kC * kC * N);
}

double macs(const Mamba2RecurrentOp& op) {
  const Mamba2RecurrentOp::Shape& d = op.shape();
  return 3.0 * u(d.P) * u(d.N) * u(d.H) * u(d.rows);
}

// ---------------------------------------------------------------- machine baselines

struct MachinePeak {
  double fma_flops_per_s = 0, loop_gemm_flops_per_s = 0;
};

constexpr int kLanes = 64, kFmaReps = 1 << 18;  // ~5 ms per call: a team barrier is noise
constexpr uint64_t kGemmM = 64, kGemmK = 128, kGemmN = 128;

// acc = acc·m + a on 64 independent lanes: enough chains to hide the add latency.
void fma_loop(float* acc, float m, float a) {
  for (int r = 0; r < kFmaReps; ++r)
    for (int i = 0; i < kLanes; ++i) acc[i] = acc[i] * m + a;
}

struct GemmTiles {
  std::vector<float> a = std::vector<float>(kGemmM * kGemmK, 0.5f);
  std::vector<float> b = std::vector<float>(kGemmK * kGemmN, 0.25f);
  std::vector<float> c = std::vector<float>(kGemmM * kGemmN, 0.0f);
};

// C = A·B, the textbook i-k-j loop (the innermost j loop is contiguous).
void loop_gemm(GemmTiles& t) {
  for (uint64_t i = 0; i < kGemmM; ++i) {
    float* c = t.c.data() + i * kGemmN;
    std::fill(c, c + kGemmN, 0.0f);
    for (uint64_t k = 0; k < kGemmK; ++k) {
      const float a = t.a[i * kGemmK + k];
      const float* b = t.b.data() + k * kGemmN;
      for (uint64_t j = 0; j < kGemmN; ++j) c[j] += a * b[j];
    }
  }
}

const MachinePeak& machine_peak() {
  static const MachinePeak peak = [] {
    MachinePeak p;
    const int threads = omp_get_max_threads();
    const double fma_flops = 2.0 * kLanes * kFmaReps * threads;
    p.fma_flops_per_s = fma_flops / seconds_per_call([] {
#pragma omp parallel
                          {
                            alignas(64) float acc[kLanes] = {};
                            fma_loop(acc, 0.999f, 1e-3f);
                            benchmark::DoNotOptimize(acc);
                          }
                        });
    std::vector<GemmTiles> tiles(static_cast<size_t>(threads));
    constexpr int kGemmReps = 32;
    const double gemm_flops = 2.0 * kGemmM * kGemmK * kGemmN * kGemmReps * threads;
    p.loop_gemm_flops_per_s = gemm_flops / seconds_per_call([&] {
#pragma omp parallel
                                {
                                  GemmTiles& t = tiles[static_cast<size_t>(omp_get_thread_num())];
                                  for (int r = 0; r < kGemmReps; ++r) {
                                    loop_gemm(t);
                                    benchmark::DoNotOptimize(t.c.data());
                                  }
                                }
                              });
    return p;
  }();
  return peak;
}

// ---------------------------------------------------------------- reporting

struct PathTimes {
  double chunked_s = 0, recurrent_s = 0, chunked_macs = 0, recurrent_macs = 0;
};

void report_paths(benchmark::State& state, uint64_t tokens, const PathTimes& t) {
  const MachinePeak& peak = machine_peak();
  const double flops = 2 * t.chunked_macs / t.chunked_s;
  const double rec_flops = 2 * t.recurrent_macs / t.recurrent_s;
  state.counters["tokens_per_s"] = u(tokens) / t.chunked_s;
  state.counters["recurrent_tokens_per_s"] = u(tokens) / t.recurrent_s;
  state.counters["speedup_vs_recurrent"] = t.recurrent_s / t.chunked_s;
  state.counters["gflops"] = flops / 1e9;
  state.counters["recurrent_gflops"] = rec_flops / 1e9;
  state.counters["fma_gflops"] = peak.fma_flops_per_s / 1e9;
  state.counters["loop_gflops"] = peak.loop_gemm_flops_per_s / 1e9;
  state.counters["fma_fraction"] = flops / peak.fma_flops_per_s;
  state.counters["recurrent_fma_fraction"] = rec_flops / peak.fma_flops_per_s;
  state.counters["loop_gemm_ratio"] = flops / peak.loop_gemm_flops_per_s;
  state.counters["threads"] = omp_get_max_threads();
}

// tokens/s, the memcpy fraction of `bytes`, and share_of_gdn_mamba2_ops = own / (own + the chunked
// core's time): these ops' part of the layer's SSM ops (projections excluded).
void report_rest(benchmark::State& state, uint64_t tokens, uint64_t bytes, double own,
                 double chunked) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["tokens_per_s"] = u(tokens) / own;
  state.counters["copy_fraction"] = copy_seconds(bytes) / own;
  state.counters["share_of_ssm_ops"] = own / (own + chunked);
  state.counters["threads"] = omp_get_max_threads();
}

// The setup `make` returns (a pointer); on an Error (a kernel or harness not written yet) skips
// the benchmark and returns null.
template <class F>
auto setup_or_skip(benchmark::State& state, F make) -> decltype(make()) {
  try {
    return make();
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("skipped: ") + e.what()).c_str());
    return nullptr;
  }
}

// ---------------------------------------------------------------- both paths of one shape

// The chunked and the recurrent plan of one shape and one workspace holding the union of their
// operands (they share the conv output, gates, output rows and the pool: the same offsets);
// chunked_s: the chunked time of the shape, shared by the family's two benchmarks.
template <class Plan>
struct PathsSetup {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  Plan chunked, recurrent;
  Workspace ws;
  std::optional<double> chunked_s;
};

template <class Plan>
std::unique_ptr<PathsSetup<Plan>> paths_setup(Plan chunked, Plan recurrent) {
  auto s = std::make_unique<PathsSetup<Plan>>();
  s->chunked = std::move(chunked);
  s->recurrent = std::move(recurrent);
  std::vector<Access> all = s->chunked.accesses();
  const std::vector<Access> rec = s->recurrent.accesses();
  all.insert(all.end(), rec.begin(), rec.end());
  s->ws = s->backend->allocate(oracle::ffn_footprint_layout(all),
                               std::max(s->chunked.pool_bytes, s->recurrent.pool_bytes));
  return s;
}

// Each family's core ops as the benchmarks call them, and the counter names of its three chunk
// stages.
void run(Backend& b, Workspace& ws, const GdnChunkOp& op) { b.gdn_chunk(ws, op); }
void run(Backend& b, Workspace& ws, const GdnRecurrentOp& op) { b.gdn_recurrent(ws, op); }
void run(Backend& b, Workspace& ws, const Mamba2ChunkOp& op) { b.mamba2_chunk(ws, op); }
void run(Backend& b, Workspace& ws, const Mamba2RecurrentOp& op) { b.mamba2_recurrent(ws, op); }

constexpr const char* kGdnStages[] = {"wu_us", "state_us", "output_us"};
constexpr const char* kMamba2Stages[] = {"cumsum_us", "bmm_us", "scan_us"};
const char* const* stage_names(const oracle::GdnPlan&) { return kGdnStages; }
const char* const* stage_names(const oracle::Mamba2Plan&) { return kMamba2Stages; }

// Every chunk stage of the chunked plan, in order.
template <class Plan>
void run_chunked(PathsSetup<Plan>& s) {
  for (const auto& op : s.chunked.chunk) run(*s.backend, s.ws, op);
}

// The chunked benchmark: the chunk stages timed, then the recurrent path and each stage alone
// (report_paths); keeps the chunked seconds per call in s.chunked_s.
template <class Plan>
void time_paths(benchmark::State& state, PathsSetup<Plan>& s, uint64_t tokens) {
  auto chunked = [&] { run_chunked(s); };
  auto recurrent = [&] { run(*s.backend, s.ws, s.recurrent.recurrent); };
  if (!first_call_or_skip(state, chunked) || !first_call_or_skip(state, recurrent)) return;
  for (auto _ : state) chunked();
  PathTimes t;
  t.recurrent_s = seconds_per_call(recurrent, 0.1, false);  // warmed by the first call above
  t.chunked_s = seconds_per_call(chunked);
  s.chunked_s = t.chunked_s;
  t.chunked_macs = macs(s.chunked.chunk.front());
  t.recurrent_macs = macs(s.recurrent.recurrent);
  report_paths(state, tokens, t);
  const auto& stages = s.chunked.chunk;
  for (size_t i = 0; i < stages.size(); ++i)
    state.counters[stage_names(s.chunked)[i]] =
        1e6 * seconds_per_call([&] { run(*s.backend, s.ws, stages[i]); }, kStageS);
}

// The benchmark of the core's other ops (`rest`, moving `bytes`): report_rest against the
// chunked time of the same shape (the chunked benchmark's, or timed here once).
template <class Plan, class Rest>
void time_rest(benchmark::State& state, PathsSetup<Plan>& s, uint64_t tokens, uint64_t bytes,
               Rest rest) {
  if (!bench::timed_loop_or_skip(state, rest)) return;
  if (!s.chunked_s) s.chunked_s = seconds_per_call([&] { run_chunked(s); });
  report_rest(state, tokens, bytes, seconds_per_call(rest), *s.chunked_s);
}

// ---------------------------------------------------------------- GDN

using GdnSetup = PathsSetup<oracle::GdnPlan>;
using GdnKey = std::pair<uint64_t, uint64_t>;  // tokens, nv

// qwen3-next-80b with `nv` value heads (32 in the model).
GdnSetup& gdn_setup(uint64_t tokens, uint64_t nv) {
  static std::map<GdnKey, std::unique_ptr<GdnSetup>> cache;
  return bench::cached_setup(cache, GdnKey{tokens, nv}, [&] {
    ModelConfig c = preset("qwen3-next-80b");
    c.linear_num_value_heads = nv;
    const oracle::GdnDims dims = oracle::GdnDims::of(c, 1, tokens);
    auto s = paths_setup(oracle::plan_gdn(dims, oracle::GdnPath::chunked),
                         oracle::plan_gdn(dims, oracle::GdnPath::recurrent));
    oracle::run_gdn(*s->backend, s->ws, s->chunked,
                    oracle::generate_gdn_inputs(dims, 0x6D6E + tokens));
    return s;
  });
}

void BM_GdnChunkedCpu(benchmark::State& state) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  const auto nv = static_cast<uint64_t>(state.range(1));
  if (GdnSetup* s = setup_or_skip(state, [&] { return &gdn_setup(tokens, nv); }))
    time_paths(state, *s, tokens);
}

void BM_GdnConvGatesNormCpu(benchmark::State& state) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  const auto nv = static_cast<uint64_t>(state.range(1));
  GdnSetup* s = setup_or_skip(state, [&] { return &gdn_setup(tokens, nv); });
  if (s == nullptr) return;
  const oracle::GdnPlan& p = s->chunked;
  const GdnGeometry& g = p.dims.geom;
  // conv: Q|K|V bf16 in, f32 out; gates: [b|a] bf16 in, (β, α) f32 out; norm: o and z bf16
  // in, o bf16 out.
  const uint64_t bytes =
      tokens * (g.conv_dim * (2 + 4) + g.nv * (2 * 2 + 2 * 4) + g.value_dim * (2 + 2 + 2));
  time_rest(state, *s, tokens, bytes, [&] {
    s->backend->gdn_conv(s->ws, p.conv);
    s->backend->gdn_gates(s->ws, p.gates);
    s->backend->gdn_gated_norm(s->ws, p.norm);
  });
}

void gdn_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t tokens : {64, 256, 1024}) b->Args({tokens, 32});
  b->ArgNames({"tokens", "nv"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_GdnChunkedCpu)->Apply(gdn_shapes);
BENCHMARK(BM_GdnConvGatesNormCpu)->Apply(gdn_shapes);

// ---------------------------------------------------------------- Mamba-2 SSD

using Mamba2Setup = PathsSetup<oracle::Mamba2Plan>;
using Mamba2Key = std::pair<std::string, uint64_t>;  // preset, tokens

Mamba2Setup& mamba2_setup(const std::string& model, uint64_t tokens) {
  static std::map<Mamba2Key, std::unique_ptr<Mamba2Setup>> cache;
  return bench::cached_setup(cache, Mamba2Key{model, tokens}, [&] {
    const oracle::Mamba2Dims dims = oracle::Mamba2Dims::of(preset(model), 1, tokens);
    auto s = paths_setup(oracle::plan_mamba2(dims, oracle::Mamba2Path::chunked),
                         oracle::plan_mamba2(dims, oracle::Mamba2Path::recurrent));
    oracle::run_mamba2(*s->backend, s->ws, s->chunked,
                       oracle::generate_mamba2_inputs(dims, 0x55D + tokens));
    return s;
  });
}

void BM_SsdChunkedCpu(benchmark::State& state, const std::string& model) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  if (Mamba2Setup* s = setup_or_skip(state, [&] { return &mamba2_setup(model, tokens); }))
    time_paths(state, *s, tokens);
}

void BM_SsdConvNormCpu(benchmark::State& state, const std::string& model) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  Mamba2Setup* s = setup_or_skip(state, [&] { return &mamba2_setup(model, tokens); });
  if (s == nullptr) return;
  const oracle::Mamba2Plan& p = s->chunked;
  const Mamba2Geometry& g = p.dims.geom;
  // conv: xBC bf16 in and out; norm: y and z bf16 in, bf16 out.
  const uint64_t bytes = tokens * (g.d_xbc * (2 + 2) + g.d_inner * (2 + 2 + 2));
  time_rest(state, *s, tokens, bytes, [&] {
    s->backend->mamba2_conv(s->ws, p.conv);
    s->backend->mamba2_gated_norm(s->ws, p.norm);
  });
}

// nemotron-h-56b at T = 256, tiny-mamba at T = 256 and 1024.
void mamba2_units(benchmark::internal::Benchmark* b) {
  b->ArgName("tokens")->Unit(benchmark::kMillisecond)->UseRealTime();
}
void nemotron_shapes(benchmark::internal::Benchmark* b) { mamba2_units(b->Arg(256)); }
void tiny_mamba_shapes(benchmark::internal::Benchmark* b) { mamba2_units(b->Arg(256)->Arg(1024)); }

BENCHMARK_CAPTURE(BM_SsdChunkedCpu, nemotron_h_56b, std::string("nemotron-h-56b"))
    ->Apply(nemotron_shapes);
BENCHMARK_CAPTURE(BM_SsdChunkedCpu, tiny_mamba, std::string("tiny-mamba"))
    ->Apply(tiny_mamba_shapes);
BENCHMARK_CAPTURE(BM_SsdConvNormCpu, nemotron_h_56b, std::string("nemotron-h-56b"))
    ->Apply(nemotron_shapes);
BENCHMARK_CAPTURE(BM_SsdConvNormCpu, tiny_mamba, std::string("tiny-mamba"))
    ->Apply(tiny_mamba_shapes);

}  // namespace
}  // namespace bufferlab
