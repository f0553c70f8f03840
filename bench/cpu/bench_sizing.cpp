// from_config + Layout::build per call on the qwen3-next-80b preset. The sizing
// runs once per engine start, so the interest is "cheap enough to call in a fuzz loop":
// the fuzzer evaluates it per generated case.
#include <benchmark/benchmark.h>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/presets.h"

namespace {

bufferlab::ModelConfig reference_model() { return bufferlab::preset("qwen3-next-80b"); }

// Baseline: from_config starts by validating the config; the ratio to this says what the
// 41 formulas cost on top.
void BM_ValidateOnly(benchmark::State& state) {
  const auto config = reference_model();
  for (auto _ : state) {
    config.validate();
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ValidateOnly);

void BM_FromConfig(benchmark::State& state) {
  const auto config = reference_model();
  const uint64_t m = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    auto sizes = bufferlab::BufferSizes::from_config(config, m, 32768, 16, 32);
    benchmark::DoNotOptimize(sizes);
  }
}
BENCHMARK(BM_FromConfig)->Arg(1)->Arg(8192);

void BM_LayoutBuild(benchmark::State& state) {
  const auto sizes = bufferlab::BufferSizes::from_config(reference_model(), 8192, 32768, 16, 32);
  for (auto _ : state) {
    auto layout = bufferlab::Layout::build(sizes);
    benchmark::DoNotOptimize(layout);
  }
}
BENCHMARK(BM_LayoutBuild);

void BM_FromConfigPlusLayout(benchmark::State& state) {
  const auto config = reference_model();
  for (auto _ : state) {
    auto layout =
        bufferlab::Layout::build(bufferlab::BufferSizes::from_config(config, 8192, 32768, 16, 32));
    benchmark::DoNotOptimize(layout);
  }
}
BENCHMARK(BM_FromConfigPlusLayout);

}  // namespace
