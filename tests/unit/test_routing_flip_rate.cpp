// MEASURES how often the BF16 router path selects a different expert set than the FP32 paths
// (and than the FP64 oracle) on near-tied logits, per logit magnitude band, on the CPU
// backend; prints the table (stdout and GTest RecordProperty). Inputs: the generators'
// near_ties pattern — logits within half a BF16 ULP of a few BF16 values, so the BF16 store
// makes each cluster an exact tie (resolved to the lower index) while FP32 keeps them
// 2^-23..2^-8 relative apart. Deterministic seeds.
//
// Asserted, because provable: the FP32 paths never violate the tie-stability property (u =
// 2^-24); the BF16 path agrees above its larger bound; and the BF16 path flips at least once
// per band (its clusters' gaps are below half a BF16 ULP by construction, so it ranks them by
// index where FP32 ranks them by value). The rates themselves are reported, not asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/oracle/routing_judge.h"
#include "bufferlab/properties/routing_generators.h"

namespace bufferlab {
namespace {

struct Band {
  const char* name;
  int lo, hi;  // |l| in [2^lo, 2^hi): magnitudes lo .. hi-1
};
constexpr Band kBands[] = {{"[2^-4,2^-2)", -4, -2},
                           {"[2^-2,1)", -2, 0},
                           {"[1,4)", 0, 2},
                           {"[4,16)", 2, 4},
                           {"[16,64)", 4, 6}};

struct Tally {
  uint64_t rows = 0;
  uint64_t bf16_vs_fp32 = 0;     // BF16 set ≠ FP32-gate set
  uint64_t bf16_vs_oracle = 0;   // BF16 set ≠ the oracle's (exact logits)
  uint64_t fp32_vs_oracle = 0;   // FP32-gate set ≠ the oracle's (cut within the FP32 bound)
  uint64_t fp32_violations = 0;  // tie-stability failures, FP32-gate and FP32-routing
  uint64_t bf16_violations = 0;  // failures above the BF16 path's larger bound
};

struct PathRun {
  std::vector<uint32_t> ids;
  oracle::RoutingVerdict verdict;
  std::vector<double> logits;  // the stored logits the top-k read
};

PathRun run_path(Backend& backend, gen::RoutingCase c, RouterPrecision p,
                 const gen::RoutingTensors& t) {
  c.precision = p;
  const auto ops = oracle::make_routing_ops(c.config, c.rows, p, false);
  const oracle::RouterInputs rin{t.x_bf16, t.x_f32, t.weight};
  const oracle::TopKHostInputs tin{t.bias, {}, {}};
  const Workspace ws = backend.allocate(oracle::routing_footprint_layout(ops), ops.pool_bytes);
  const auto out = oracle::run_routing_chain(backend, ws, ops, rin, tin);
  return {out.topk.ids,
          oracle::judge_routing_chain(ops, rin, tin, out, oracle::kUnitRoundoffCpu, backend.name(),
                                      c.seed),
          out.logits.values()};
}

PathRun run_path(Backend& backend, gen::RoutingCase c, RouterPrecision p) {
  c.precision = p;
  return run_path(backend, c, p, gen::routing_tensors(c));
}

bool same_set(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, uint64_t row,
              uint64_t k) {
  return std::is_permutation(a.begin() + static_cast<std::ptrdiff_t>(row * k),
                             a.begin() + static_cast<std::ptrdiff_t>((row + 1) * k),
                             b.begin() + static_cast<std::ptrdiff_t>(row * k));
}

gen::RoutingCase near_tie_case(int magnitude, uint64_t seed, const char* scoring) {
  gen::RoutingCase c;
  c.config.hidden_size = 8;
  c.config.num_experts = 16;
  c.config.num_experts_per_tok = 1 + seed % 4;
  c.config.scoring_func = scoring;
  c.config.vocab_size = 1;
  c.rows = 64;
  c.pattern = gen::RoutingPattern::near_ties;
  c.magnitude = magnitude;
  c.seed = seed;
  return c;
}

TEST(RoutingFlipRate, Bf16PathFlipsNearTiesTheFp32PathsKeep) {
  const std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::vector<Tally> tallies;
  for (const Band& band : kBands) {
    Tally tally;
    for (int mag = band.lo; mag < band.hi; ++mag)
      for (uint64_t seed = 1; seed <= 8; ++seed) {
        // softmax ranks logits; sigmoid ranks f(l) (its flips shrink where σ′ is small).
        const gen::RoutingCase c = near_tie_case(mag, seed, seed % 2 ? "softmax" : "sigmoid");
        const uint64_t k = c.config.num_experts_per_tok;
        const PathRun bf16 = run_path(*cpu, c, RouterPrecision::bf16);
        const PathRun gate = run_path(*cpu, c, RouterPrecision::fp32_gate);
        const PathRun f32 = run_path(*cpu, c, RouterPrecision::fp32_routing);
        EXPECT_TRUE(gate.verdict.passed()) << c.describe() << oracle::format_verdict(gate.verdict);
        EXPECT_TRUE(f32.verdict.passed()) << c.describe() << oracle::format_verdict(f32.verdict);
        EXPECT_TRUE(bf16.verdict.passed()) << c.describe() << oracle::format_verdict(bf16.verdict);
        tally.fp32_violations += gate.verdict.ties->failures + f32.verdict.ties->failures;
        tally.bf16_violations += bf16.verdict.ties->failures;
        tally.bf16_vs_oracle += bf16.verdict.ties->sets_differ;
        tally.fp32_vs_oracle += gate.verdict.ties->sets_differ;
        for (uint64_t t = 0; t < c.rows; ++t)
          tally.bf16_vs_fp32 += same_set(bf16.ids, gate.ids, t, k) ? 0 : 1;
        tally.rows += c.rows;
      }
    tallies.push_back(tally);
  }

  std::string table =
      "BF16-path selection flips on near-ties (CPU backend, E' = 16, top_k 1..4, h = 8)\n"
      "band |l|        rows  flips(bf16 vs fp32)  rate    bf16 vs oracle  fp32 vs oracle  "
      "fp32 violations  bf16 violations\n";
  for (size_t b = 0; b < tallies.size(); ++b) {
    const Tally& t = tallies[b];
    const double rate = t.rows ? static_cast<double>(t.bf16_vs_fp32) / t.rows : 0.0;
    char line[256];
    std::snprintf(line, sizeof line,
                  "%-14s %6llu  %19llu  %5.1f%%  %14llu  %14llu  %15llu  %15llu\n", kBands[b].name,
                  static_cast<unsigned long long>(t.rows),
                  static_cast<unsigned long long>(t.bf16_vs_fp32), 100.0 * rate,
                  static_cast<unsigned long long>(t.bf16_vs_oracle),
                  static_cast<unsigned long long>(t.fp32_vs_oracle),
                  static_cast<unsigned long long>(t.fp32_violations),
                  static_cast<unsigned long long>(t.bf16_violations));
    table += line;
    const std::string key = std::string("band_") + std::to_string(b);
    RecordProperty(key + "_range", kBands[b].name);
    RecordProperty(key + "_rows", std::to_string(t.rows));
    RecordProperty(key + "_bf16_vs_fp32_flips", std::to_string(t.bf16_vs_fp32));
    RecordProperty(key + "_bf16_vs_oracle", std::to_string(t.bf16_vs_oracle));
    RecordProperty(key + "_fp32_vs_oracle", std::to_string(t.fp32_vs_oracle));
    RecordProperty(key + "_fp32_violations", std::to_string(t.fp32_violations));
    EXPECT_EQ(t.fp32_violations, 0u) << kBands[b].name;
    EXPECT_EQ(t.bf16_violations, 0u) << kBands[b].name;
    EXPECT_GT(t.bf16_vs_fp32, 0u) << kBands[b].name;
  }
  std::fputs(table.c_str(), stdout);
}

// The same measurement on RANDOM router inputs of a realistic shape (E' = 512, top_k 10,
// h = 512: Qwen3-Next's expert count and top_k, a shorter hidden to stay in the CI budget).
// Softmax ranks logits, and BF16 rounding is relative, so scaling every logit by 2^m changes
// nothing: the band is instead an OFFSET c shared by a row's logits (a constant input column
// times a gate column c: logit = c + a random part of spread ~1), so |l| ≈ c while the gaps
// between experts stay the same and the BF16 ULP at the logit grows with c. Counts how often
// the BF16 store changes the selected SET, or only the ORDER, relative to the FP32-gate path.
// Rates reported, not asserted; the FP32 paths and the BF16 path above its bound are asserted.
TEST(RoutingFlipRate, Bf16PathFlipsOnRandomRouterInputsPerLogitOffset) {
  const std::unique_ptr<Backend> cpu = make_cpu_backend();
  constexpr double kOffsets[] = {0.0, 0.25, 1.0, 4.0, 16.0, 64.0};
  std::string table =
      "BF16-path flips on random router inputs (CPU backend, softmax, E' = 512, top_k 10, "
      "h = 512, logits = offset + spread ~1)\n"
      "offset   rows  set flips  rate    order-only flips  rate    fp32 violations  "
      "bf16 violations\n";
  for (const double offset : kOffsets) {
    uint64_t rows = 0, set_flips = 0, order_flips = 0, fp32_bad = 0, bf16_bad = 0;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      gen::RoutingCase c;
      c.config.hidden_size = 512;
      c.config.num_experts = 512;
      c.config.num_experts_per_tok = 10;
      c.config.scoring_func = "softmax";
      c.config.norm_topk_prob = true;
      c.config.vocab_size = 1;
      c.rows = 32;
      c.pattern = gen::RoutingPattern::random;
      c.magnitude = 0;
      c.seed = 1000 + seed;
      gen::RoutingTensors t = gen::routing_tensors(c);
      const uint64_t h = c.config.hidden_size, k = c.config.num_experts_per_tok;
      // Column 0 carries the offset: x[., 0] = 1, Wg[., 0] = offset (both exact in BF16).
      for (uint64_t r = 0; r < c.rows; ++r) {
        t.x_bf16[r * h] = f32_to_bf16_bits(1.0f);
        t.x_f32[r * h] = 1.0f;
      }
      for (uint64_t e = 0; e < c.experts(); ++e)
        t.weight[e * h] = f32_to_bf16_bits(static_cast<float>(offset));
      const PathRun bf16 = run_path(*cpu, c, RouterPrecision::bf16, t);
      const PathRun gate = run_path(*cpu, c, RouterPrecision::fp32_gate, t);
      fp32_bad += gate.verdict.ties->failures;
      bf16_bad += bf16.verdict.ties->failures;
      for (uint64_t r = 0; r < c.rows; ++r) {
        const bool same = same_set(bf16.ids, gate.ids, r, k);
        const auto at = [&](const std::vector<uint32_t>& v) {
          return v.begin() + static_cast<std::ptrdiff_t>(r * k);
        };
        set_flips += same ? 0 : 1;
        order_flips +=
            same && !std::equal(at(bf16.ids), at(bf16.ids) + static_cast<std::ptrdiff_t>(k),
                                at(gate.ids))
                ? 1
                : 0;
      }
      rows += c.rows;
    }
    char line[256];
    std::snprintf(line, sizeof line,
                  "%-6g %6llu  %9llu  %5.1f%%  %16llu  %5.1f%%  %15llu  %15llu\n", offset,
                  static_cast<unsigned long long>(rows), static_cast<unsigned long long>(set_flips),
                  100.0 * set_flips / rows, static_cast<unsigned long long>(order_flips),
                  100.0 * order_flips / rows, static_cast<unsigned long long>(fp32_bad),
                  static_cast<unsigned long long>(bf16_bad));
    table += line;
    RecordProperty("offset_" + std::to_string(offset) + "_set_flips", std::to_string(set_flips));
    EXPECT_EQ(fp32_bad, 0u) << "offset " << offset;
    EXPECT_EQ(bf16_bad, 0u) << "offset " << offset;
  }
  std::fputs(table.c_str(), stdout);
}

// The group step of DeepSeek-V3's routing (256 experts, 8 groups, keep 4, top 8, sigmoid + bias,
// h = 512) on random router inputs, on group_ties (whole groups copied, reversed, or moved
// below a BF16 ULP: group scores tied or a hair apart) and on near_ties (every logit within half
// a BF16 ULP of a few values: the BF16 store ties what FP32 keeps apart), per logit magnitude: how
// often the BF16 store changes the KEPT GROUPS relative to the FP32-gate path (each path's kept
// groups are the oracle's on the logits that path stored, which the judge holds the kernel to), and
// how often the selected set. Rates reported, not asserted; every path's group step and selection
// are asserted (the BF16 path above its larger bound).
TEST(RoutingFlipRate, Bf16PathFlipsTheGroupStep) {
  const std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::string table =
      "BF16-path flips of the group step (CPU backend, sigmoid + bias, E = 256, 8 groups, keep 4, "
      "top_k 8, h = 512)\n"
      "pattern      |l|~2^m   rows  kept-group flips  rate    set flips  rate    group cuts "
      "unresolved (fp32)  violations\n";
  for (const gen::RoutingPattern pattern :
       {gen::RoutingPattern::random, gen::RoutingPattern::group_ties,
        gen::RoutingPattern::near_ties})
    for (const int mag : {-4, -2, 0, 2}) {
      uint64_t rows = 0, group_flips = 0, set_flips = 0, unresolved = 0, bad = 0;
      for (uint64_t seed = 1; seed <= 4; ++seed) {
        gen::RoutingCase c = gen::deepseek_v3_routing(32, 512, 2000 + seed);
        c.pattern = pattern;
        c.magnitude = mag;
        const gen::RoutingTensors t = gen::routing_tensors(c);
        const PathRun bf16 = run_path(*cpu, c, RouterPrecision::bf16, t);
        const PathRun gate = run_path(*cpu, c, RouterPrecision::fp32_gate, t);
        const PathRun f32 = run_path(*cpu, c, RouterPrecision::fp32_routing, t);
        for (const PathRun* r : {&bf16, &gate, &f32}) {
          EXPECT_TRUE(r->verdict.passed()) << c.describe() << oracle::format_verdict(r->verdict);
          bad += r->verdict.ties->failures + r->verdict.ties->group_failures;
        }
        unresolved += gate.verdict.ties->group_cut_unresolved;
        const MoeTopKOp op = MoeTopKOp::make(c.config, c.rows, true, false);
        const auto kept_bf16 = oracle::select_topk(op, {bf16.logits, t.bias, {}, {}}).kept_groups;
        const auto kept_gate = oracle::select_topk(op, {gate.logits, t.bias, {}, {}}).kept_groups;
        for (uint64_t r = 0; r < c.rows; ++r) {
          group_flips += same_set(kept_bf16, kept_gate, r, 4) ? 0 : 1;
          set_flips += same_set(bf16.ids, gate.ids, r, 8) ? 0 : 1;
        }
        rows += c.rows;
      }
      char line[256];
      std::snprintf(
          line, sizeof line, "%-12s %6d  %6llu  %16llu  %5.1f%%  %9llu  %5.1f%%  %28llu  %10llu\n",
          gen::to_string(pattern), mag, static_cast<unsigned long long>(rows),
          static_cast<unsigned long long>(group_flips), 100.0 * group_flips / rows,
          static_cast<unsigned long long>(set_flips), 100.0 * set_flips / rows,
          static_cast<unsigned long long>(unresolved), static_cast<unsigned long long>(bad));
      table += line;
      RecordProperty(
          std::string(gen::to_string(pattern)) + "_m" + std::to_string(mag) + "_group_flips",
          std::to_string(group_flips));
      EXPECT_EQ(bad, 0u) << gen::to_string(pattern) << " 2^" << mag;
    }
  std::fputs(table.c_str(), stdout);
}

}  // namespace
}  // namespace bufferlab
