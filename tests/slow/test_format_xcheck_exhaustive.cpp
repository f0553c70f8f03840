// Exhaustive cross-check of the core number-format encoders against CUDA's host-side
// conversions (docs/spec/numerics.md §0): all 2^32 FP32 bit patterns, NaNs included, bit for bit.
// Label slow: a few minutes per format on two cores. The sampled version runs in CI
// (tests/format_xcheck/test_format_xcheck_sampled.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "format_reference_pairs.h"

namespace {

using namespace bufferlab::testing;

struct SweepResult {
  uint64_t mismatches = 0;
  uint32_t first_input = 0;  // valid when mismatches > 0
  uint32_t first_ours = 0;
  uint32_t first_cuda = 0;
  double seconds = 0;
};

// Inputs are handed out in chunks from a shared counter so uneven thread speeds balance out;
// each thread keeps its own lowest mismatch and the results are merged at the end.
template <uint32_t (*Ours)(float), uint32_t (*Cuda)(float)>
SweepResult sweep_all_f32() {
  constexpr uint64_t kTotal = uint64_t{1} << 32;
  constexpr uint64_t kChunk = uint64_t{1} << 22;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<uint64_t> next{0};
  std::vector<SweepResult> partial(threads);
  const auto start = std::chrono::steady_clock::now();
  auto worker = [&](SweepResult& r) {
    for (uint64_t begin = next.fetch_add(kChunk); begin < kTotal; begin = next.fetch_add(kChunk)) {
      for (uint64_t i = begin; i < begin + kChunk; ++i) {
        const auto bits = static_cast<uint32_t>(i);
        const float x = f32_from_bits(bits);
        const uint32_t ours = Ours(x);
        const uint32_t cuda = Cuda(x);
        if (ours == cuda) continue;
        if (r.mismatches == 0 || bits < r.first_input) r = {r.mismatches, bits, ours, cuda, 0};
        ++r.mismatches;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker, std::ref(partial[t]));
  for (auto& t : pool) t.join();
  SweepResult total;
  for (const auto& r : partial) {
    if (r.mismatches == 0) continue;
    if (total.mismatches == 0 || r.first_input < total.first_input) {
      total.first_input = r.first_input;
      total.first_ours = r.first_ours;
      total.first_cuda = r.first_cuda;
    }
    total.mismatches += r.mismatches;
  }
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ sweep    ] %s: 2^32 inputs, %u threads, %.1f s, %.1f M inputs/s, %" PRIu64
              " mismatches\n",
              ::testing::UnitTest::GetInstance()->current_test_info()->name(), threads,
              total.seconds, static_cast<double>(kTotal) / total.seconds / 1e6, total.mismatches);
  return total;
}

void expect_no_mismatch(const SweepResult& r) {
  EXPECT_EQ(r.mismatches, 0u) << "first mismatch: input 0x" << std::hex << r.first_input << " ("
                              << f32_from_bits(r.first_input) << "): ours 0x" << r.first_ours
                              << ", CUDA 0x" << r.first_cuda;
}

TEST(FormatXcheckExhaustive, Bf16AllF32Inputs) {
  expect_no_mismatch(sweep_all_f32<ours_bf16, cuda_bf16>());
}

TEST(FormatXcheckExhaustive, E4m3AllF32Inputs) {
  expect_no_mismatch(sweep_all_f32<ours_e4m3, cuda_e4m3>());
}

TEST(FormatXcheckExhaustive, E2m1AllF32Inputs) {
  expect_no_mismatch(sweep_all_f32<ours_e2m1, cuda_e2m1>());
}

}  // namespace
