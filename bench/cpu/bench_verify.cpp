// Throughput of the static verifier: (a) whole configurations verified per second
// (verify::verify_config over verify::pass_grid, every path combination, corrected sizing)
// per preset and per shipped config file, and (b) fuzz cases per second (fuzz::run). Each
// reports a ratio to a baseline measured in the same run — BufferSizes::from_config +
// Layout::build alone, for the same config or the same generated cases — so the numbers
// read "verifying costs N× sizing".
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/config_json.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/core/verify/driver.h"
#include "bufferlab/properties/fuzz_engine.h"

namespace bufferlab {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of `f`, over enough calls to last ~50 ms (no warm-up call).
template <class F>
double baseline_seconds(F f) {
  return bench::seconds_per_call(f, 0.05, /*warm_up=*/false);
}

const std::vector<PresetInfo>& presets() {
  static const std::vector<PresetInfo> all = list_presets();
  return all;
}

// Verifies `config` once per iteration at the docs/spec/buffers.md §2 default run shape on the
// default target, corrected sizing; counters per config and the ratio to one sizing + layout.
void verify_config_loop(benchmark::State& state, const ModelConfig& config) {
  const RunShape shape;
  const Target target;
  const auto grid = verify::pass_grid(shape);
  const double baseline = baseline_seconds([&] {
    auto layout =
        Layout::build(BufferSizes::from_config(config, shape, target, Sizing::corrected()));
    benchmark::DoNotOptimize(layout);
  });
  uint64_t configs = 0, plans = 0, findings = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    const auto sizes = BufferSizes::from_config(config, shape, target, Sizing::corrected());
    const verify::ConfigReport report = verify::verify_config(config, sizes, target, shape, grid);
    ++configs;
    plans += report.plans;
    findings += report.findings.size();
  }
  const double per_config =
      std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(configs);
  state.counters["configs_per_s"] =
      benchmark::Counter(static_cast<double>(configs), benchmark::Counter::kIsRate);
  state.counters["plans_per_s"] =
      benchmark::Counter(static_cast<double>(plans), benchmark::Counter::kIsRate);
  state.counters["findings"] = static_cast<double>(findings / configs);
  state.counters["x_sizing_baseline"] = per_config / baseline;
}

// (a) One preset (state.range(0) indexes list_presets()).
void BM_VerifyConfig(benchmark::State& state) {
  const PresetInfo& info = presets().at(static_cast<size_t>(state.range(0)));
  state.SetLabel(info.name);
  verify_config_loop(state, preset(info.name));
}
BENCHMARK(BM_VerifyConfig)
    ->DenseRange(0, static_cast<int64_t>(presets().size()) - 1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

// The shipped config.json files (data/configs), sorted by name: the configs users bring.
const std::vector<std::string>& shipped_config_files() {
  static const std::vector<std::string> files = [] {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(BUFFERLAB_CONFIGS_DIR))
      if (entry.path().extension() == ".json") out.push_back(entry.path().string());
    std::sort(out.begin(), out.end());
    return out;
  }();
  return files;
}

// (a') One shipped config file (state.range(0) indexes shipped_config_files()), loaded
// through the config.json loader as `--config FILE` does.
void BM_VerifyShippedConfig(benchmark::State& state) {
  const std::string& path = shipped_config_files().at(static_cast<size_t>(state.range(0)));
  state.SetLabel(std::filesystem::path(path).filename().string());
  verify_config_loop(state, load_config_file(path));
}
BENCHMARK(BM_VerifyShippedConfig)
    ->DenseRange(0, static_cast<int64_t>(shipped_config_files().size()) - 1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

// (b) Fuzz cases per second: each iteration runs 200 cases (seed = iteration), on one core.
void BM_FuzzCases(benchmark::State& state) {
  constexpr uint64_t kCases = 200;
  fuzz::FuzzOptions opts;
  opts.max_cases = kCases;
  // Throughput only: failing cases are counted, never stop the run or get shrunk.
  opts.accept = [](const std::string&) { return false; };
  // Baseline: drawing the same cases and sizing + laying them out, nothing else.
  const double baseline = baseline_seconds([&] {
    for (uint64_t i = 0; i < kCases; ++i) {
      const fuzz::FuzzCase c = fuzz::generate_case(opts, fuzz::case_seed(opts.seed, i));
      auto layout =
          Layout::build(BufferSizes::from_config(c.config, c.shape, c.target, Sizing::corrected()));
      benchmark::DoNotOptimize(layout);
    }
  });
  uint64_t cases = 0, failing = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    const fuzz::FuzzResult r = fuzz::run(opts);
    cases += r.progress.cases;
    failing += r.progress.other_failures;
    ++opts.seed;
  }
  const double per_run = std::chrono::duration<double>(Clock::now() - t0).count() /
                         static_cast<double>(state.iterations());
  state.counters["cases_per_s"] =
      benchmark::Counter(static_cast<double>(cases), benchmark::Counter::kIsRate);
  state.counters["failing_cases"] = static_cast<double>(failing);
  state.counters["x_sizing_baseline"] = per_run / baseline;
}
BENCHMARK(BM_FuzzCases)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
}  // namespace bufferlab
