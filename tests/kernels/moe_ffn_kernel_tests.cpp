// The non-routing MoE / FFN ops (docs/spec/numerics.md §8) on the backend under test
// (tests/support/ backend_under_test.h) against the faithful FP64 oracle (oracle/moe_ffn.h) with
// the backend's bound model (round to nearest on the CPU, the device GEMM roundoff u = 2^-23
// elsewhere): THE gather order, the grouped expert GEMMs across the tile edges (kTileM 64, kTileN
// 128, kTileK 128) and the grouping chunk (2^16 slots) — exact on integer data —, the routed-expert
// chain stage by stage (zero experts, repeated experts, hash, limit, latent in place), SwiGLU
// with a limit, the combine with zero experts (and in place), every BF16 GemmOp epilogue and
// the LM head's source rows, hand-worked cases and a RapidCheck chain property. On a backend
// other than the CPU also against the CPU: each lies within its own bound of the faithful
// value, so they differ by at most the sum of the two bounds, per element.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "backend_under_test.h"
#include "bf16_shorthands.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "bufferlab/oracle/bounded_compare.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "bufferlab/oracle/moe_ffn_inputs.h"
#include "bufferlab/oracle/moe_ffn_judge.h"
#include "bufferlab/oracle/pool_placement.h"
#include "moe_kernel_support.h"
#include "report_checks.h"
#include "seeded_values.h"
#include "workspace_rig.h"

namespace bufferlab {
namespace {

using testing::bf;
using testing::expect_passed;
using testing::fl;
using testing::KernelTest;
using testing::moe_config;
using testing::Rig;
using testing::small_ints;

using oracle::Mode;

using Bits = std::vector<uint16_t>;
using Ids = std::vector<uint32_t>;
using Floats = std::vector<float>;

constexpr uint16_t kPoison = 0xFFFF;  // a BF16 element the arena poison left alone

bool written(const oracle::OpReference& r, size_t i) { return r.mask.empty() || r.mask[i] != 0; }

std::vector<double> values(const Bits& bits) {
  std::vector<double> v(bits.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = fl(bits[i]);
  return v;
}

// Another backend's stored output against the CPU's: |got − cpu| ≤ b_cpu + b_got per element
// (both bounds against the faithful oracle of the CPU's stored inputs), over the elements the
// op writes whose inputs the two backends stored bit for bit alike (`same`, empty: all). A
// stage downstream of a GEMM may see inputs that differ by the GEMMs' own bounded rounding
// (cuBLAS and Eigen sum in different orders); there the two are not comparable element by
// element, and each stays judged against the oracle of its own inputs (judge_expert_chain).
oracle::TensorComparison versus_cpu(const std::string& name, const Bits& got, const Bits& cpu,
                                    const oracle::OpReference& on_cpu,
                                    const oracle::OpReference& on_got,
                                    const std::vector<uint8_t>& same = {}) {
  std::vector<double> bound(on_cpu.bound.size());
  for (size_t i = 0; i < bound.size(); ++i) bound[i] = on_cpu.bound[i] + on_got.bound[i];
  std::vector<uint8_t> mask = on_cpu.mask;
  if (!same.empty()) {
    if (mask.empty()) mask.assign(same.size(), 1);
    for (size_t i = 0; i < mask.size(); ++i) mask[i] = mask[i] != 0 && same[i] != 0;
  }
  return oracle::compare_bf16_bounded(name + " vs cpu", got, values(cpu), on_cpu.cols,
                                      {bound, mask, "b_cpu + b_backend"});
}

// Elementwise ops: element i's inputs agree.
std::vector<uint8_t> same_elements(const Bits& a1, const Bits& a2, const Bits& b1, const Bits& b2) {
  std::vector<uint8_t> same(a1.size());
  for (size_t i = 0; i < same.size(); ++i) same[i] = a1[i] == a2[i] && b1[i] == b2[i];
  return same;
}

// The down projection: output row s (width n) reads slot s's act slice (width k).
std::vector<uint8_t> same_down_rows(const Bits& act1, const Bits& act2, uint64_t slots, uint64_t k,
                                    uint64_t n) {
  std::vector<uint8_t> same(slots * n, 1);
  for (uint64_t s = 0; s < slots; ++s)
    if (!std::equal(act1.begin() + s * k, act1.begin() + (s + 1) * k, act2.begin() + s * k))
      std::fill(same.begin() + s * n, same.begin() + (s + 1) * n, 0);
  return same;
}

// Combine: out[t, d] reads row t's ids and weights, down[t·top_k + j, d] and input[t, d].
std::vector<uint8_t> same_combine(const oracle::CombineInputs& a, const oracle::CombineInputs& b,
                                  uint64_t rows, uint64_t top_k, uint64_t width) {
  std::vector<uint8_t> same(rows * width, 1);
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t d = 0; d < width; ++d) {
      bool ok = a.input.empty() || a.input[t * width + d] == b.input[t * width + d];
      for (uint64_t j = 0; j < top_k; ++j) {
        const uint64_t slot = t * top_k + j;
        ok = ok && a.ids[slot] == b.ids[slot] && a.weights[slot] == b.weights[slot] &&
             a.down[slot * width + d] == b.down[slot * width + d];
      }
      same[t * width + d] = ok;
    }
  return same;
}

ModelConfig ffn_config(uint64_t hidden, uint64_t inter, uint64_t experts, uint64_t top_k,
                       uint64_t zero, uint64_t latent, double limit) {
  ModelConfig c = moe_config(hidden, experts, top_k, zero, inter);
  c.moe_latent_size = latent;
  c.swiglu_limit = limit;
  return c;
}

// h = 64, E = 8 routed + 2 zero experts, top_k = 3, I = 32: the small config of the stage
// smoke tests; 5 rows of ids with zero experts (8, 9) and repeated experts.
ModelConfig small_config() { return ffn_config(64, 32, 8, 3, 2, 0, 0.0); }
Ids sample_ids() { return {3, 0, 8, 3, 7, 1, 0, 9, 3, 5, 2, 7, 9, 8, 1}; }

class MoeFfnKernel : public KernelTest {
 protected:
  static oracle::BoundModel bounds() { return testing::bounds_for(on_cpu()); }

  // The chain from the same inputs judged against the oracle; on another backend each stage
  // also against the CPU's stage.
  static void check_chain(const ModelConfig& config, uint64_t rows, bool hash,
                          const oracle::RoutingProfile& routing, uint64_t seed) {
    const auto chain = oracle::ExpertChain::make(config, rows, hash);
    const auto in = oracle::generate_expert_chain_inputs(chain, seed, routing, {1.0, 4}, 0);
    const auto got = oracle::run_expert_chain(
        backend(), oracle::allocate_footprint(backend(), chain), chain, in);
    expect_passed(oracle::judge_expert_chain(chain, in, got, backend().name(), seed, bounds()));
    if (on_cpu()) return;
    Backend& cpu_backend = testing::cpu_backend();
    const auto cpu = oracle::run_expert_chain(
        cpu_backend, oracle::allocate_footprint(cpu_backend, chain), chain, in);
    const auto gb = bounds(), cb = oracle::cpu_bounds();
    const uint64_t z = chain.zero_experts;
    const auto gather = oracle::moe_gather(chain.gather, cpu.gather.stored, z);
    expect_passed(versus_cpu("moe_gathered", got.gather.out, cpu.gather.out, gather, gather));
    for (auto [op, g, c] :
         {std::tuple{&chain.gate, &got.gate, &cpu.gate}, std::tuple{&chain.up, &got.up, &cpu.up}})
      expect_passed(versus_cpu(op->output_value, g->out, c->out,
                               oracle::moe_expert_gemm(*op, c->stored, Mode::faithful, cb, z),
                               oracle::moe_expert_gemm(*op, c->stored, Mode::faithful, gb, z)));
    expect_passed(versus_cpu("expert_act", got.act.out, cpu.act.out,
                             oracle::swiglu(chain.act, cpu.act.stored, Mode::faithful, cb),
                             oracle::swiglu(chain.act, cpu.act.stored, Mode::faithful, gb),
                             same_elements(got.act.stored.gate, cpu.act.stored.gate,
                                           got.act.stored.up, cpu.act.stored.up)));
    const auto& dd = chain.down.shape();
    expect_passed(
        versus_cpu(chain.down.output_value, got.down.out, cpu.down.out,
                   oracle::moe_expert_gemm(chain.down, cpu.down.stored, Mode::faithful, cb, z),
                   oracle::moe_expert_gemm(chain.down, cpu.down.stored, Mode::faithful, gb, z),
                   same_down_rows(got.down.stored.input, cpu.down.stored.input, dd.rows * dd.top_k,
                                  dd.K, dd.N)));
    const auto& cd = chain.combine.shape();
    expect_passed(versus_cpu(
        "moe_combine_out", got.combine.out, cpu.combine.out,
        oracle::moe_combine(chain.combine, cpu.combine.stored, Mode::faithful, cb),
        oracle::moe_combine(chain.combine, cpu.combine.stored, Mode::faithful, gb),
        same_combine(got.combine.stored, cpu.combine.stored, cd.rows, cd.top_k, cd.width)));
  }
};

// ---- gather, expert GEMMs ----

// ids [[2, 0], [0, 3], [2, 1]] with E = 3 routed experts (3 is a zero expert): counts 2, 1, 2,
// offsets 0, 2, 3 → gathered rows: s1 (t0) → 0, s2 (t1) → 1, s5 (t2) → 2, s0 (t0) → 3,
// s4 (t2) → 4; row 5 is left untouched.
TEST_F(MoeFfnKernel, GatherRowsSortedByExpertThenSlot) {
  const ModelConfig c = moe_config(3, 3, 2, /*zero=*/1);
  const MoeGatherOp op = MoeGatherOp::make(c, 3);
  Rig rig(backend(), {op.accesses()}, 0);
  const Bits x = {bf(1), bf(2), bf(3), bf(4), bf(5), bf(6), bf(7), bf(8), bf(9)};
  rig.put(op.input, x);
  rig.put(op.ids, Ids{2, 0, 0, 3, 2, 1});
  backend().execute(rig.ws, op);
  const Bits got = rig.get<uint16_t>(op.gathered);
  const Bits want = {bf(1), bf(2), bf(3), bf(4), bf(5), bf(6), bf(7),   bf(8),   bf(9),
                     bf(1), bf(2), bf(3), bf(7), bf(8), bf(9), kPoison, kPoison, kPoison};
  EXPECT_EQ(got, want);
}

struct ExpertCase {
  uint64_t rows, top_k, experts, zero, D, I;
};

// Every written element of `got` is exactly the oracle's faithful value; `what` names it.
void expect_exactly_faithful(const oracle::OpReference& ref, const Bits& got, const char* what) {
  ASSERT_EQ(got.size(), ref.value.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (written(ref, i)) {
      ASSERT_EQ(fl(got[i]), ref.value[i]) << what << " element " << i;
    }
}

// gather → gate GEMM → down GEMM (the down reads the gate output as its activation) on integer
// data: every FP32 sum is exact, so each stored value is the oracle's faithful value (the BF16
// of the exact sum), each stage judged on the backend's own stored inputs. Zero-expert slots
// are left untouched.
void check_expert_chain(Backend& backend, const oracle::BoundModel& bm, const ExpertCase& k,
                        uint64_t seed) {
  ModelConfig c = moe_config(k.D, k.experts, k.top_k, k.zero, k.I);
  const MoeGatherOp gather = MoeGatherOp::make(c, k.rows);
  MoeExpertGemmOp gate = MoeExpertGemmOp::make(c, k.rows, ExpertProj::gate);
  MoeExpertGemmOp down = MoeExpertGemmOp::make(c, k.rows, ExpertProj::down);
  const uint64_t pool = oracle::place_in_pool({&gate.weight, &down.weight});
  Rig rig(backend, {gather.accesses(), gate.accesses(), down.accesses()}, pool);

  const uint64_t slots = k.rows * k.top_k;
  Ids ids(slots);
  uint64_t s = seed;
  for (auto& id : ids) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<uint32_t>((s >> 33) % (k.experts + k.zero));
  }
  const Bits x = small_ints(k.rows * k.D, seed + 1, 2);
  const Bits wg = small_ints(k.experts * k.I * k.D, seed + 2, 2, 0.5f);
  const Bits wd = small_ints(k.experts * k.D * k.I, seed + 3, 1, 0.25f);
  rig.put(gather.input, x);
  rig.put(gather.ids, ids);
  rig.put(gate.weight, wg);
  rig.put(down.weight, wd);
  backend.execute(rig.ws, gather);
  const Bits gathered = rig.get<uint16_t>(gather.gathered);
  backend.execute(rig.ws, gate);
  backend.execute(rig.ws, down);
  const Bits gate_out = rig.get<uint16_t>(gate.output);
  const Bits down_out = rig.get<uint16_t>(down.output);

  expect_exactly_faithful(oracle::moe_gather(gather, {x, ids}, k.zero), gathered, "gathered");
  expect_exactly_faithful(
      oracle::moe_expert_gemm(gate, {gathered, ids, wg}, Mode::faithful, bm, k.zero), gate_out,
      "gate");
  const oracle::ExpertGemmInputs down_in{gate_out, ids, wd};
  // BF16 gate values times quarters: exact in FP32 while |Σ| < 2^16 (checked).
  const auto exact_down = oracle::moe_expert_gemm(down, down_in, Mode::exact, bm, k.zero);
  for (size_t i = 0; i < exact_down.value.size(); ++i)
    if (written(exact_down, i)) {
      ASSERT_LT(std::fabs(exact_down.value[i]), 65536.0) << i;
    }
  expect_exactly_faithful(oracle::moe_expert_gemm(down, down_in, Mode::faithful, bm, k.zero),
                          down_out, "down");
  for (uint64_t slot = 0; slot < slots; ++slot) {
    if (ids[slot] < k.experts) continue;
    // gate/up write a non-routed slot's slice as zeros (ops/moe.h).
    ASSERT_EQ(gate_out[slot * k.I], 0) << "zero-expert slot " << slot;
    // expert_down_out held the gathered rows before the down wrote it: left as it was.
    for (uint64_t d = 0; d < k.D; ++d)
      ASSERT_EQ(down_out[slot * k.D + d], gathered[slot * k.D + d]) << "zero-expert " << slot;
  }
}

// 150 tokens × top 2 over 3 experts (+1 zero): ~75 rows per expert → two M tiles; D = 130 and
// I = 136 cross the K and N tile edges.
TEST_F(MoeFfnKernel, ExpertGroupedGemmsExactAcrossTiles) {
  check_expert_chain(backend(), bounds(), {150, 2, 3, 1, 130, 136}, 11);
}

// 33,000 tokens × top 2 = 66,000 slots: more than one grouping chunk (2^16 slots); the gather
// order and the experts' rows continue across the chunk boundary.
TEST_F(MoeFfnKernel, ExpertGroupingAcrossChunks) {
  check_expert_chain(backend(), bounds(), {33000, 2, 5, 2, 6, 4}, 23);
}

// The small config on random data: the gather, gate and up GEMMs on the gathered rows, and the
// down GEMM reading the gate output as its activation, each judged on its own stored inputs.
TEST_F(MoeFfnKernel, ExpertStagesWithZeroAndRepeatedExperts) {
  const ModelConfig c = small_config();
  const uint64_t rows = 5, z = c.zero_expert_num;
  const Ids ids = sample_ids();
  const MoeGatherOp gather = MoeGatherOp::make(c, rows);
  const auto g =
      oracle::run_moe_gather(backend(), oracle::allocate_footprint(backend(), gather), gather,
                             {testing::seeded_bf16_values(rows * 64, 4, 1), ids});
  expect_passed(oracle::judge_moe_gather(gather, g, z, backend().name(), 4));
  Bits gate_out;
  for (auto [proj, seed] : {std::tuple{ExpertProj::gate, 5}, std::tuple{ExpertProj::up, 6},
                            std::tuple{ExpertProj::down, 7}}) {
    const MoeExpertGemmOp op = MoeExpertGemmOp::make(c, rows, proj);
    const Bits& input = proj == ExpertProj::down ? gate_out : g.out;
    const oracle::ExpertGemmInputs in{input, ids,
                                      testing::seeded_bf16_values(8 * 32 * 64, seed, 1)};
    const auto r =
        oracle::run_moe_expert_gemm(backend(), oracle::allocate_footprint(backend(), op), op, in);
    expect_passed(oracle::judge_moe_expert_gemm(op, r, z, backend().name(), seed, bounds()));
    if (proj == ExpertProj::gate) gate_out = r.out;
  }
}

// ---- the routed-expert chain ----

TEST_F(MoeFfnKernel, ChainPlain) {
  check_chain(ffn_config(256, 128, 8, 2, 0, 0, 0.0), 37, false, {8, 0, 0.0, 0.3, false}, 11);
}

TEST_F(MoeFfnKernel, ChainZeroExpertsLimitAndRepeats) {
  check_chain(ffn_config(192, 96, 6, 4, 2, 0, 7.0), 29, false, {6, 2, 0.3, 0.5, true}, 12);
}

TEST_F(MoeFfnKernel, ChainLatentInPlaceWithZeroExperts) {
  check_chain(ffn_config(512, 64, 4, 3, 1, 96, 0.0), 17, false, {4, 1, 0.4, 0.0, false}, 13);
}

TEST_F(MoeFfnKernel, ChainHashLayerRepeatsExpertZero) {
  check_chain(ffn_config(128, 33, 5, 3, 1, 0, 0.0), 21, true, {5, 0, 0.0, 0.9, true}, 14);
}

TEST_F(MoeFfnKernel, ChainOddShapesOneToken) {
  check_chain(ffn_config(7, 5, 3, 2, 0, 0, 0.75), 1, false, {3, 0, 0.0, 0.0, false}, 15);
}

TEST_F(MoeFfnKernel, PropertyChainAgreesWithOracle) {
  const bool ok = rc::check("expert chain agrees with the faithful oracle", [] {
    ModelConfig m;
    m.hidden_size = *rc::gen::inRange<uint64_t>(1, 513);
    m.moe_intermediate_size = *rc::gen::inRange<uint64_t>(1, 257);
    m.num_experts = *rc::gen::inRange<uint64_t>(1, 17);
    m.zero_expert_num = *rc::gen::inRange<uint64_t>(0, 3);
    m.num_experts_per_tok = *rc::gen::inRange<uint64_t>(
        1, std::min<uint64_t>(8, m.num_experts + m.zero_expert_num) + 1);
    m.swiglu_limit = *rc::gen::element(0.0, 7.0);
    // Cost: T·top_k·(3·I·D + D) ≤ 2^26.
    const uint64_t D = m.hidden_size, I = m.moe_intermediate_size, k = m.num_experts_per_tok;
    const uint64_t max_rows =
        std::clamp<uint64_t>((uint64_t{1} << 26) / (k * (3 * I * D + D)), 1, 64);
    const uint64_t rows = *rc::gen::inRange<uint64_t>(1, max_rows + 1);
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    const auto chain = oracle::ExpertChain::make(m, rows, false);
    const auto in = oracle::generate_expert_chain_inputs(
        chain, seed, {m.num_experts, m.zero_expert_num, 0.25, 0.3, false}, {1.0, 4}, 0);
    const auto got = oracle::run_expert_chain(
        backend(), oracle::allocate_footprint(backend(), chain), chain, in);
    const auto report =
        oracle::judge_expert_chain(chain, in, got, backend().name(), seed, bounds());
    RC_LOG() << oracle::format_report(report);
    RC_ASSERT(report.passed());
  });
  EXPECT_TRUE(ok);
}

// ---- SwiGLU ----

oracle::SwigluRun run_swiglu(const SwigluOp& op, const oracle::SwigluInputs& in) {
  Backend& b = testing::backend_under_test();
  return oracle::run_swiglu(b, oracle::allocate_footprint(b, op), op, in);
}

// a = silu(g)·u, silu(g) = g/(1 + e^-g); with limit 7: g = min(g, 7), u = clamp(u, −7, 7).
// g = 10, u = −20 → silu(7)·(−7) = −48.9553 (unclamped it would be −199.9). A NaN gate gives
// a NaN. Every element within judge_swiglu's bound of the faithful value.
TEST_F(MoeFfnKernel, SwigluClampsThenGates) {
  const Bits g = {bf(2), bf(10), bf(-3), bf(10), bf(std::nanf("")), bf(0)};
  const Bits u = {bf(3), bf(-20), bf(8), bf(1), bf(1), bf(5)};
  for (double limit : {0.0, 7.0}) {
    const SwigluOp op = SwigluOp::make(2, 3, limit, "g", "u", "a");
    const auto r = run_swiglu(op, {g, u});
    expect_passed(oracle::judge_swiglu(op, r, backend().name(), 0, bounds()));
    EXPECT_TRUE(std::isnan(fl(r.out[4]))) << "limit " << limit;
    if (limit > 0) {
      EXPECT_NEAR(fl(r.out[1]), -48.9553, 0.2);
    }
  }
}

// Random gates and ups in [−2, 2) with limit 0.75 (5 rows × 96), and extreme gates (scale 8,
// exponents ±6) over 9 rows of 4097 without a limit.
TEST_F(MoeFfnKernel, SwigluLimitAndExtremeGates) {
  const SwigluOp lim = SwigluOp::make(5, 96, 0.75, "expert_gate", "expert_up", "expert_act");
  const auto r = run_swiglu(lim, {testing::seeded_bf16_values(5 * 96, 8, 2.0f),
                                  testing::seeded_bf16_values(5 * 96, 9, 2.0f)});
  expect_passed(oracle::judge_swiglu(lim, r, backend().name(), 8, bounds()));

  const SwigluOp op = SwigluOp::make(9, 4097, 0.0, "expert_gate", "expert_up", "expert_act");
  const auto x = run_swiglu(
      op, {oracle::seeded_bf16(9 * 4097, 1, {8.0, 6}), oracle::seeded_bf16(9 * 4097, 2, {1.0, 6})});
  expect_passed(oracle::judge_swiglu(op, x, backend().name(), 1, bounds()));
}

// ---- combine ----

// E = 2 routed + 2 zero experts, top 3. Row 0 ids [0, 2, 1] weights [0.5, 0.25, 2]:
// 0.5·down0 + 0.25·x0 + 2·down2. Row 1 ids [3, 1, 0] weights [1, −1, 0.75]:
// x1 − down4 + 0.75·down5. Width 3, integer data: exact.
TEST_F(MoeFfnKernel, CombineAddsZeroExpertIdentityTerms) {
  const ModelConfig c = moe_config(3, 2, 3, /*zero=*/2);
  const MoeCombineOp op = MoeCombineOp::make(c, 2, /*hash=*/false);
  ASSERT_TRUE(op.reads_input);
  Rig rig(backend(), {op.accesses()}, 0);
  Bits down(6 * 3, kPoison);  // zero-expert slots (1 and 3) are never written upstream
  for (uint64_t s : {0, 2, 4, 5})
    for (uint64_t d = 0; d < 3; ++d) down[s * 3 + d] = bf(static_cast<float>(s * 10 + d));
  const Bits x = {bf(1), bf(2), bf(3), bf(4), bf(5), bf(6)};
  rig.put(op.ids, Ids{0, 2, 1, 3, 1, 0});
  rig.put(op.weights, Floats{0.5f, 0.25f, 2.0f, 1.0f, -1.0f, 0.75f});
  rig.put(op.down, down);
  rig.put(op.input, x);
  backend().execute(rig.ws, op);
  // row 0: 0.5·[0,1,2] + 0.25·[1,2,3] + 2·[20,21,22] = [40.25, 43, 45.75]
  // row 1: [4,5,6] − [40,41,42] + 0.75·[50,51,52] = [1.5, 2.25, 3]
  EXPECT_EQ(rig.get<uint16_t>(op.output),
            (Bits{bf(40.25f), bf(43), bf(45.75f), bf(1.5f), bf(2.25f), bf(3)}));

  rig.put(op.ids, Ids{0, 2, 4, 3, 1, 0});  // 4 ≥ E' = 4: corrupt
  EXPECT_THROW(backend().execute(rig.ws, op), Error);
}

// Latent MoE combines in place of its input (ssm_ba): each row's input is read before it is
// overwritten. Hash layers never read the input: a zero-expert id there is an Error.
TEST_F(MoeFfnKernel, CombineInPlaceForLatentMoeAndHashRefusesZeroExperts) {
  ModelConfig c = moe_config(8, 2, 2, /*zero=*/1);
  c.moe_latent_size = 2;
  const MoeCombineOp op = MoeCombineOp::make(c, 2, false);
  ASSERT_EQ(op.output.buffer, op.input.buffer);
  Rig rig(backend(), {op.accesses()}, 0);
  Bits down(4 * 2, kPoison);
  down[0] = bf(10), down[1] = bf(20), down[6] = bf(30), down[7] = bf(40);
  rig.put(op.ids, Ids{0, 2, 2, 1});
  rig.put(op.weights, Floats{1.0f, 3.0f, 0.5f, 2.0f});
  rig.put(op.down, down);
  rig.put(op.input, Bits{bf(1), bf(2), bf(3), bf(4)});
  backend().execute(rig.ws, op);
  // row 0: [10, 20] + 3·[1, 2] = [13, 26]; row 1: 0.5·[3, 4] + 2·[30, 40] = [61.5, 82]
  EXPECT_EQ(rig.get<uint16_t>(op.output), (Bits{bf(13), bf(26), bf(61.5f), bf(82)}));

  const MoeCombineOp hashed = MoeCombineOp::make(c, 2, /*hash=*/true);
  ASSERT_FALSE(hashed.reads_input);
  rig.put(hashed.ids, Ids{0, 2, 0, 1});
  EXPECT_THROW(backend().execute(rig.ws, hashed), Error);
}

// The small config's ids (zero and repeated experts) with weights in (0, 0.7], and a latent
// combine in place over 40 rows: each within judge_moe_combine's bound; an id ≥ E' is an Error.
TEST_F(MoeFfnKernel, CombineWithZeroExpertsAndInPlaceAgree) {
  const MoeCombineOp op = MoeCombineOp::make(small_config(), 5, /*hash=*/false);
  oracle::CombineInputs in{sample_ids(),
                           {},
                           testing::seeded_bf16_values(5 * 3 * 64, 10, 1),
                           testing::seeded_bf16_values(5 * 64, 11, 1)};
  for (uint64_t i = 0; i < in.ids.size(); ++i)
    in.weights.push_back(0.1f * static_cast<float>(i % 7 + 1));
  const auto ws = oracle::allocate_footprint(backend(), op);
  expect_passed(oracle::judge_moe_combine(op, oracle::run_moe_combine(backend(), ws, op, in),
                                          backend().name(), 10, bounds()));
  in.ids[4] = 10;  // ≥ E' = 10
  EXPECT_THROW(oracle::run_moe_combine(backend(), ws, op, in), Error);

  const MoeCombineOp cop = MoeCombineOp::make(ffn_config(64, 8, 6, 4, 2, 48, 0.0), 40, false);
  const oracle::CombineInputs cin{
      oracle::seeded_ids(40, 4, 3, {6, 2, 0.4, 0.2, false}), oracle::seeded_weights(40, 4, 4, 6.0),
      oracle::seeded_bf16(40 * 4 * 48, 5, {1.0, 4}), oracle::seeded_bf16(40 * 48, 6, {1.0, 4})};
  const auto cg =
      oracle::run_moe_combine(backend(), oracle::allocate_footprint(backend(), cop), cop, cin);
  expect_passed(oracle::judge_moe_combine(cop, cg, backend().name(), 3, bounds()));
}

// ---- GemmOp epilogues ----

// 70 × 140 · (130 × 140)ᵀ crosses every tile edge; integer data keeps the FP32 product exact:
// store and accumulate store exactly the oracle's faithful value, the swiglu epilogue lies
// within judge_gemm's bound. FP8 is refused.
TEST_F(MoeFfnKernel, GemmEveryBf16EpilogueExactOnIntegers) {
  const uint64_t rows = 70, K = 140, N = 130;
  const TensorRef x = arena_tensor(BufferId::norm_output, 0, {rows, K}, DType::bf16);
  const TensorRef out = arena_tensor(BufferId::moe_output, 0, {rows, N}, DType::bf16);
  const Bits xv = small_ints(rows * K, 31, 2), wv = small_ints(N * K, 32, 2, 0.5f);
  const Bits old = small_ints(rows * N, 33, 3, 0.25f);
  for (const char* kind : {"bf16", "bf16+swiglu-epilogue", "bf16+accumulate"}) {
    const bool store = std::string(kind) == "bf16";
    std::vector<Access> inputs = {{x, AccessKind::read, "x"}};
    if (!store) inputs.push_back({out, AccessKind::read, "y"});
    GemmOp op = GemmOp::make("dense", kind, inputs, rows, rows, K, N, BufferId::moe_output, 0,
                             DType::bf16, "y");
    oracle::place_in_pool({&op.weight});
    const auto r = oracle::run_gemm(backend(), oracle::allocate_footprint(backend(), op), op,
                                    {xv, wv, store ? Bits{} : old});
    expect_passed(oracle::judge_gemm(op, r, backend().name(), 31, bounds()));
    if (op.epilogue() != GemmEpilogue::swiglu)
      expect_exactly_faithful(oracle::gemm(op, r.stored, Mode::faithful, bounds()), r.out, kind);
  }
  GemmOp fp8 = GemmOp::make("dense", "fp8", {{x, AccessKind::read, "x"}}, rows, rows, K, N,
                            BufferId::moe_output, 0, DType::bf16, "y");
  Rig rig(backend(), {fp8.accesses()}, oracle::place_in_pool({&fp8.weight}));
  EXPECT_THROW(backend().gemm(rig.ws, fp8), Error);
}

// Random data, every epilogue over shapes from one row to past the tiles (1 × 7 × 3,
// 5 × 64 × 48, 33 × 1024 × 257, 64 × 2048 × 512), judged; on another backend also against the
// CPU.
TEST_F(MoeFfnKernel, GemmEveryEpilogueAgrees) {
  const char* kinds[] = {"bf16", "bf16+swiglu-epilogue", "bf16+accumulate"};
  const BufferId outs[] = {BufferId::expert_gate_out, BufferId::ssm_qkvz, BufferId::moe_output};
  for (int e = 0; e < 3; ++e) {
    for (auto [rows, K, N] : {std::tuple<uint64_t, uint64_t, uint64_t>{1, 7, 3},
                              {5, 64, 48},
                              {33, 1024, 257},
                              {64, 2048, 512}}) {
      const TensorRef x = arena_tensor(BufferId::norm_output, 0, {rows, K}, DType::bf16);
      std::vector<Access> inputs = {{x, AccessKind::read, "norm"}};
      if (e > 0)
        inputs.push_back(
            {arena_tensor(outs[e], 0, {rows, N}, DType::bf16), AccessKind::read, "old"});
      const GemmOp op = GemmOp::make("ffn", kinds[e], inputs, rows, rows, K, N, outs[e], 0,
                                     DType::bf16, "ffn_out");
      const uint64_t seed = 100 + e * 10 + K;
      const oracle::GemmInputs in{
          oracle::seeded_bf16(rows * K, seed, {1.0, 4}),
          oracle::seeded_bf16(N * K, ~seed, {1.0 / std::sqrt(static_cast<double>(K)), 0}),
          e == 0 ? Bits{} : oracle::seeded_bf16(rows * N, seed + 1, {1.0, 0})};
      const auto got =
          oracle::run_gemm(backend(), oracle::allocate_footprint(backend(), op), op, in);
      expect_passed(oracle::judge_gemm(op, got, backend().name(), seed, bounds()));
      if (on_cpu()) continue;
      Backend& cpu = testing::cpu_backend();
      const auto c = oracle::run_gemm(cpu, oracle::allocate_footprint(cpu, op), op, in);
      expect_passed(versus_cpu(op.params(), got.out, c.out,
                               oracle::gemm(op, c.stored, Mode::faithful, oracle::cpu_bounds()),
                               oracle::gemm(op, c.stored, Mode::faithful, bounds())));
    }
  }
}

// ---- LM head ----

// 5 input rows, 3 logits rows: row 0 reads row 0 (direct), rows 1, 2 read 2 and 4 (tail base 2,
// stride 2). vocab 130 crosses an N tile. Integer data: exactly the faithful value.
TEST_F(MoeFfnKernel, LmHeadReadsTheSourceRows) {
  const uint64_t rows = 5, logits_rows = 3, hidden = 20, vocab = 130;
  LmHeadOp op = LmHeadOp::make(rows, logits_rows, hidden, vocab, "test", LmHeadRows{1, 2, 2});
  Rig rig(backend(), {op.accesses()}, oracle::place_in_pool({&op.table}));
  const Bits x = small_ints(rows * hidden, 41, 3), table = small_ints(vocab * hidden, 42, 2);
  rig.put(op.input, x);
  rig.put(op.table, table);
  backend().execute(rig.ws, op);
  const Bits got = rig.get<uint16_t>(op.output);
  expect_exactly_faithful(oracle::lm_head(op, {x, table}, Mode::faithful, bounds()), got, "logits");
  // A descriptor edited to read past its rows is refused, not read.
  op.source_rows.tail_stride = 3;
  EXPECT_THROW(backend().execute(rig.ws, op), Error);
}

// Random data: decode rows (row 0 direct, tail base 2 stride 2, vocab 100) and co-dispatch rows
// (the last token of each of 4 streams of 9 rows, vocab 1000), judged; on another backend the
// co-dispatch case also against the CPU.
TEST_F(MoeFfnKernel, LmHeadAgrees) {
  const LmHeadOp dec = LmHeadOp::make(5, 3, 64, 100, "decode", LmHeadRows{1, 2, 2});
  const oracle::LmHeadInputs din{testing::seeded_bf16_values(5 * 64, 12, 1),
                                 testing::seeded_bf16_values(100 * 64, 15, 1)};
  const auto d =
      oracle::run_lm_head(backend(), oracle::allocate_footprint(backend(), dec), dec, din);
  expect_passed(oracle::judge_lm_head(dec, d, backend().name(), 12, bounds()));

  const LmHeadOp op = LmHeadOp::make(36, 4, 384, 1000, "codispatch", {0, 8, 9});
  const oracle::LmHeadInputs in{oracle::seeded_bf16(36 * 384, 5, {1.0, 4}),
                                oracle::seeded_bf16(1000 * 384, 6, {0.05, 0})};
  const auto got =
      oracle::run_lm_head(backend(), oracle::allocate_footprint(backend(), op), op, in);
  expect_passed(oracle::judge_lm_head(op, got, backend().name(), 5, bounds()));
  if (on_cpu()) return;
  Backend& cpu = testing::cpu_backend();
  const auto c = oracle::run_lm_head(cpu, oracle::allocate_footprint(cpu, op), op, in);
  expect_passed(versus_cpu("logits", got.out, c.out,
                           oracle::lm_head(op, c.stored, Mode::faithful, oracle::cpu_bounds()),
                           oracle::lm_head(op, c.stored, Mode::faithful, bounds())));
}

}  // namespace
}  // namespace bufferlab
