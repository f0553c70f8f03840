// Properties of the non-routing MoE / FFN ops: the CPU backend agrees with the faithful FP64
// oracle, stage by stage on its own stored inputs, under the derived per-element bounds
// (oracle/src/moe_ffn.cpp) — the routed-expert chain (gather, gate, up, SwiGLU, down,
// combine: zero experts, repeated and hot experts, hash layers, swiglu_limit on/off, latent
// in-place combine), SwiGLU and the combine on their own with extreme values, every BF16
// GemmOp epilogue and the LM head's source rows of every pass kind. And the judges catch
// planted bugs: a perfect run built from the oracle passes, and one element 2 ULP beyond its
// bound, a routed slot left poisoned, or the gather order swapped fails at its coordinates.
//
// Per-case oracle work stays ≤ 2^26 multiply-adds (docs/architecture.md): each generator derives
// its row cap from the op's cost formula, written next to it.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bf16_gemm_op.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "bufferlab/oracle/moe_ffn_inputs.h"
#include "bufferlab/oracle/moe_ffn_judge.h"
#include "bufferlab/properties/expert_chain_generators.h"
#include "cpu_backend.h"

namespace bufferlab {
namespace {

using oracle::Mode;
using testing::cpu_backend;

using U = uint64_t;
constexpr uint64_t kCostCap = uint64_t{1} << 26;

// ---- The routed-expert chain ----

using ChainCase = gen::ExpertChainCase;

// Cost (oracle::expert_chain_cost): T·top_k·3·I·D (gate, up, down) + T·top_k·D (combine)
// multiply-adds ≤ 2^26 (gen::ci_expert_chain_ranges: rows, then I / D, halved to fit).
ChainCase gen_chain_case() { return *gen::expert_chain_case(gen::ci_expert_chain_ranges()); }

// The case's seeded inputs of `chain` (its routing, activation and weight profiles).
oracle::ExpertChainInputs chain_inputs(const oracle::ExpertChain& chain, const ChainCase& c) {
  return oracle::generate_expert_chain_inputs(chain, c.seed, c.routing, c.act, c.weight_wide);
}

RC_GTEST_PROP(MoeFfnProperty, CpuExpertChainAgreesStageByStage, ()) {
  const ChainCase c = gen_chain_case();
  const auto chain = oracle::ExpertChain::make(c.config, c.rows, c.hash);
  RC_ASSERT(oracle::expert_chain_cost(chain) <= kCostCap);
  const auto in = chain_inputs(chain, c);
  const Workspace ws = oracle::allocate_footprint(cpu_backend(), chain);
  const auto run = oracle::run_expert_chain(cpu_backend(), ws, chain, in);
  const auto report = oracle::judge_expert_chain(chain, in, run, "cpu", c.seed);
  RC_LOG() << oracle::format_report(report);
  RC_ASSERT(report.passed());
}

// ---- SwiGLU alone: wide gates (expf overflow below −88), limit on/off ----

// Cost: rows·width element evaluations ≤ 16·4096 = 2^16.
RC_GTEST_PROP(MoeFfnProperty, CpuSwigluAgrees, ()) {
  const uint64_t rows = *rc::gen::inRange<uint64_t>(1, 17);
  const uint64_t width = *rc::gen::inRange<uint64_t>(1, 4097);
  const double limit = *rc::gen::element(0.0, 0.0, 7.0, 0.75, 100.0);
  const auto op = SwigluOp::make(rows, width, limit, "expert_gate", "expert_up", "expert_act");
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  const oracle::ValueProfile p{std::ldexp(1.0, *rc::gen::inRange(-4, 5)),
                               *rc::gen::element(0, 4, 8)};
  const oracle::SwigluInputs in{oracle::seeded_bf16(rows * width, seed, p),
                                oracle::seeded_bf16(rows * width, ~seed, p)};
  const Workspace ws = oracle::allocate_footprint(cpu_backend(), op);
  const auto report =
      oracle::judge_swiglu(op, oracle::run_swiglu(cpu_backend(), ws, op, in), "cpu", seed);
  RC_LOG() << oracle::format_report(report);
  RC_ASSERT(report.passed());
}

// ---- The combine alone: zero experts, hash, latent in place ----

// Cost: T·top_k·D ≤ 64·8·512 = 2^18.
RC_GTEST_PROP(MoeFfnProperty, CpuCombineAgrees, ()) {
  ModelConfig m;
  m.hidden_size = *rc::gen::inRange<uint64_t>(1, 513);
  m.moe_latent_size = *rc::gen::element(U{0}, U{0}, U{16}, U{96});  // > 0: in place of x
  m.num_experts = *rc::gen::inRange<uint64_t>(1, 17);
  m.zero_expert_num = *rc::gen::element(U{0}, U{1}, U{2});
  const bool hash = *rc::gen::element(false, false, true);
  m.num_experts_per_tok = *rc::gen::inRange<uint64_t>(1, 9);
  const uint64_t rows = *rc::gen::inRange<uint64_t>(1, 65);
  const auto op = MoeCombineOp::make(m, rows, hash);
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>(), D = op.shape().width;
  const uint64_t k = m.num_experts_per_tok;
  oracle::RoutingProfile rp{m.num_experts, hash ? 0 : m.zero_expert_num, 0.4, 0.3, hash};
  const oracle::ValueProfile p{std::ldexp(1.0, *rc::gen::inRange(-8, 9)), *rc::gen::element(0, 8)};
  oracle::CombineInputs in{oracle::seeded_ids(rows, k, seed, rp),
                           oracle::seeded_weights(rows, k, seed + 1, *rc::gen::element(1.0, 6.0)),
                           oracle::seeded_bf16(rows * k * D, seed + 2, p),
                           oracle::seeded_bf16(rows * D, seed + 3, p)};
  const Workspace ws = oracle::allocate_footprint(cpu_backend(), op);
  const auto report = oracle::judge_moe_combine(
      op, oracle::run_moe_combine(cpu_backend(), ws, op, in), "cpu", seed);
  RC_LOG() << oracle::format_report(report);
  RC_ASSERT(report.passed());
}

// ---- BF16 GemmOp: store (dense FFN gate/up), swiglu epilogue (shared expert), accumulate ----

struct GemmCase {
  GemmOp op;
  uint64_t seed = 0;
};

GemmOp gemm_of(GemmEpilogue e, uint64_t rows, uint64_t K, uint64_t N) {
  const BufferId out = e == GemmEpilogue::store    ? BufferId::expert_gate_out
                       : e == GemmEpilogue::swiglu ? BufferId::ssm_qkvz
                                                   : BufferId::moe_output;
  return testing::bf16_gemm_op(e, rows, K, N, out, "ffn", "ffn_out");
}

// Cost: rows·K·N ≤ 16·1024·512 = 2^23.
RC_GTEST_PROP(MoeFfnProperty, CpuGemmEveryEpilogueAgrees, ()) {
  const auto e =
      *rc::gen::element(GemmEpilogue::store, GemmEpilogue::swiglu, GemmEpilogue::accumulate);
  const uint64_t rows = *rc::gen::inRange<uint64_t>(1, 17),
                 K = *rc::gen::inRange<uint64_t>(1, 1025), N = *rc::gen::inRange<uint64_t>(1, 513);
  const GemmOp op = gemm_of(e, rows, K, N);
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  const int wide = *rc::gen::element(0, 6);
  const oracle::ValueProfile px{std::ldexp(1.0, *rc::gen::inRange(-6, 7)), wide};
  const oracle::ValueProfile pw{1.0 / std::sqrt(static_cast<double>(K)), wide};
  oracle::GemmInputs in{oracle::seeded_bf16(rows * K, seed, px),
                        oracle::seeded_bf16(N * K, ~seed, pw),
                        e == GemmEpilogue::store ? std::vector<uint16_t>{}
                                                 : oracle::seeded_bf16(rows * N, seed + 7, px)};
  const Workspace ws = oracle::allocate_footprint(cpu_backend(), op);
  const auto report =
      oracle::judge_gemm(op, oracle::run_gemm(cpu_backend(), ws, op, in), "cpu", seed);
  RC_LOG() << oracle::format_report(report);
  RC_ASSERT(report.passed());
}

// ---- LM head: the source rows of decode / verify / prefill / mixed / co-dispatch ----

// The rules of Pass::logits_source_rows (docs/spec/buffers.md §4.9).
LmHeadOp lm_head_of(int pass, uint64_t hidden, uint64_t vocab) {
  const uint64_t n = *rc::gen::inRange<uint64_t>(1, 9), t = *rc::gen::inRange<uint64_t>(1, 33);
  switch (pass) {
    case 0:  // decode / verify: row r reads row r; rows may be padded past n
      return LmHeadOp::make(n + *rc::gen::inRange<uint64_t>(0, 4), n, hidden, vocab, "decode",
                            {n, 0, 0});
    case 1:  // prefill: the last token
      return LmHeadOp::make(t, 1, hidden, vocab, "prefill", {0, t - 1, 0});
    case 2:  // mixed: decode rows, then the prefill's last token
      return LmHeadOp::make(n + t, n + 1, hidden, vocab, "mixed", {n, n + t - 1, 0});
    default: {  // co-dispatch: the last token of each of n streams of L rows
      const uint64_t streams = *rc::gen::inRange<uint64_t>(2, 9);
      return LmHeadOp::make(streams * t, streams, hidden, vocab, "codispatch", {0, t - 1, t});
    }
  }
}

// Cost: logits_rows·vocab·hidden ≤ 9·512·512 < 2^22.
RC_GTEST_PROP(MoeFfnProperty, CpuLmHeadAgreesOnEveryPassKind, ()) {
  const int pass = *rc::gen::inRange(0, 4);
  const LmHeadOp op =
      lm_head_of(pass, *rc::gen::inRange<uint64_t>(1, 513), *rc::gen::inRange<uint64_t>(1, 513));
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>(), h = op.shape().hidden;
  const oracle::LmHeadInputs in{
      oracle::seeded_bf16(op.shape().rows * h, seed, {1.0, *rc::gen::element(0, 6)}),
      oracle::seeded_bf16(op.shape().vocab * h, ~seed,
                          {1.0 / std::sqrt(static_cast<double>(h)), 0})};
  const Workspace ws = oracle::allocate_footprint(cpu_backend(), op);
  const auto report =
      oracle::judge_lm_head(op, oracle::run_lm_head(cpu_backend(), ws, op, in), "cpu", seed);
  RC_LOG() << oracle::format_report(report);
  RC_ASSERT(report.passed());
}

// ---- Planted bugs: the judges must catch them, at the right coordinates ----

// What a perfect backend stores at every stage (faithful values, poison where unwritten).
oracle::ExpertChainRun perfect_chain_run(const oracle::ExpertChain& c,
                                         const oracle::ExpertChainInputs& in) {
  using oracle::perfect_bf16_output;
  const auto bm = oracle::cpu_bounds();
  const uint64_t z = c.zero_experts;
  oracle::ExpertChainRun r;
  r.gather.stored = {in.x, in.ids};
  r.gather.out = perfect_bf16_output(oracle::moe_gather(c.gather, r.gather.stored, z));
  r.gate.stored = {r.gather.out, in.ids, in.w_gate};
  r.gate.out =
      perfect_bf16_output(oracle::moe_expert_gemm(c.gate, r.gate.stored, Mode::faithful, bm, z));
  r.up.stored = {r.gather.out, in.ids, in.w_up};
  r.up.out = perfect_bf16_output(oracle::moe_expert_gemm(c.up, r.up.stored, Mode::faithful, bm, z));
  r.act.stored = {r.gate.out, r.up.out};
  r.act.out = perfect_bf16_output(oracle::swiglu(c.act, r.act.stored, Mode::faithful, bm));
  r.down.stored = {r.act.out, in.ids, in.w_down};
  r.down.out =
      perfect_bf16_output(oracle::moe_expert_gemm(c.down, r.down.stored, Mode::faithful, bm, z));
  r.combine.stored = {in.ids, in.weights, r.down.out, in.x};
  r.combine.out =
      perfect_bf16_output(oracle::moe_combine(c.combine, r.combine.stored, Mode::faithful, bm));
  return r;
}

uint16_t next_up(uint16_t b) {
  if (b == 0x8000) return 0x0001;
  return (b & 0x8000) ? static_cast<uint16_t>(b - 1) : static_cast<uint16_t>(b + 1);
}

// A BF16 value 2 ULP past the first one outside [value − bound, value + bound].
uint16_t beyond_bound(double value, double bound) {
  const double edge = value + bound;
  uint16_t b = f32_to_bf16_bits(static_cast<float>(oracle::round_bf16(edge)));
  while (!(bf16_bits_to_f32(b) > edge)) b = next_up(b);
  return next_up(next_up(b));
}

// The elements a stage writes with a finite value.
std::vector<uint64_t> written(const oracle::OpReference& ref) {
  std::vector<uint64_t> out;
  for (uint64_t i = 0; i < ref.value.size(); ++i)
    if ((ref.mask.empty() || ref.mask[i]) && std::isfinite(ref.value[i])) out.push_back(i);
  return out;
}

RC_GTEST_PROP(MoeFfnPlanted, OneElementBeyondItsBoundFailsAtItsCoordinates, ()) {
  const ChainCase c = gen_chain_case();
  const auto chain = oracle::ExpertChain::make(c.config, c.rows, c.hash);
  const auto in = chain_inputs(chain, c);
  auto run = perfect_chain_run(chain, in);
  RC_ASSERT(oracle::judge_expert_chain(chain, in, run, "perfect", c.seed).passed());

  const auto bm = oracle::cpu_bounds();
  const uint64_t z = chain.zero_experts;
  const int stage = *rc::gen::inRange(0, 5);  // gate, up, swiglu, down, combine
  oracle::OpReference ref;
  std::vector<uint16_t>* out = nullptr;
  std::string name;
  switch (stage) {
    case 0:
      ref = oracle::moe_expert_gemm(chain.gate, run.gate.stored, Mode::faithful, bm, z);
      out = &run.gate.out, name = "expert_gate";
      break;
    case 1:
      ref = oracle::moe_expert_gemm(chain.up, run.up.stored, Mode::faithful, bm, z);
      out = &run.up.out, name = "expert_up";
      break;
    case 2:
      ref = oracle::swiglu(chain.act, run.act.stored, Mode::faithful, bm);
      out = &run.act.out, name = "expert_act";
      break;
    case 3:
      ref = oracle::moe_expert_gemm(chain.down, run.down.stored, Mode::faithful, bm, z);
      out = &run.down.out, name = "expert_down";
      break;
    default:
      ref = oracle::moe_combine(chain.combine, run.combine.stored, Mode::faithful, bm);
      out = &run.combine.out, name = "moe_combine_out";
  }
  const auto candidates = written(ref);
  RC_PRE(!candidates.empty());  // every slot a zero expert: nothing to corrupt
  const uint64_t i = *rc::gen::elementOf(candidates);
  (*out)[i] = beyond_bound(ref.value[i], ref.bound[i]);
  const auto report = oracle::judge_expert_chain(chain, in, run, "planted", c.seed);
  RC_LOG() << oracle::format_report(report);
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == name);
  RC_ASSERT(bad->failures == 1u);
  RC_ASSERT(bad->first_bad->row * ref.cols + bad->first_bad->col == i);
}

RC_GTEST_PROP(MoeFfnPlanted, RoutedSlotLeftPoisonedFailsAtItsSlot, ()) {
  const ChainCase c = gen_chain_case();
  const auto chain = oracle::ExpertChain::make(c.config, c.rows, c.hash);
  const auto in = chain_inputs(chain, c);
  std::vector<uint64_t> routed;
  for (uint64_t s = 0; s < in.ids.size(); ++s)
    if (in.ids[s] < chain.gate.shape().experts) routed.push_back(s);
  RC_PRE(!routed.empty());
  const uint64_t s = *rc::gen::elementOf(routed);
  auto run = perfect_chain_run(chain, in);
  const int stage = *rc::gen::inRange(0, 3);  // gate, up, down: slot s's N outputs at s·N
  auto& out = stage == 0 ? run.gate.out : stage == 1 ? run.up.out : run.down.out;
  const uint64_t N = (stage == 2 ? chain.down : chain.gate).shape().N;
  std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(s * N), N, uint16_t{0xFFFF});
  const auto report = oracle::judge_expert_chain(chain, in, run, "planted", c.seed);
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == std::string(stage == 0   ? "expert_gate"
                                     : stage == 1 ? "expert_up"
                                                  : "expert_down"));
  RC_ASSERT(bad->failures == N);
  RC_ASSERT(bad->first_bad->row * bad->cols + bad->first_bad->col == s * N);
  const uint64_t k = chain.gate.shape().top_k;
  const std::string where = "token " + std::to_string(s / k) + ", slot " + std::to_string(s % k) +
                            ", expert " + std::to_string(in.ids[s]) + ", dim 0";
  RC_ASSERT(bad->first_bad->reason.find("unwritten") != std::string::npos);
  RC_ASSERT(bad->first_bad->reason.find(where) != std::string::npos);
}

RC_GTEST_PROP(MoeFfnPlanted, GatherOrderSwappedFails, ()) {
  const ChainCase c = gen_chain_case();
  const auto chain = oracle::ExpertChain::make(c.config, c.rows, c.hash);
  const auto in = chain_inputs(chain, c);
  auto run = perfect_chain_run(chain, in);
  const uint64_t D = chain.gather.shape().width;
  const uint64_t routed = oracle::routed_slots(in.ids, chain.gather.shape().experts);
  RC_PRE(routed >= 2u);
  const uint64_t a = *rc::gen::inRange<uint64_t>(0, routed - 1);
  const uint64_t b = *rc::gen::inRange<uint64_t>(a + 1, routed);
  auto row = [&](uint64_t r) {
    return run.gather.out.begin() + static_cast<std::ptrdiff_t>(r * D);
  };
  RC_PRE(!std::equal(row(a), row(a) + static_cast<std::ptrdiff_t>(D), row(b)));  // a visible swap
  std::swap_ranges(row(a), row(a) + static_cast<std::ptrdiff_t>(D), row(b));
  const auto report = oracle::judge_expert_chain(chain, in, run, "planted", c.seed);
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == std::string("moe_gathered"));
  RC_ASSERT(bad->first_bad->row == a);
}

RC_GTEST_PROP(MoeFfnPlanted, GemmAndLmHeadBeyondBoundFail, ()) {
  const bool lm = *rc::gen::arbitrary<bool>();
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  oracle::OpReference ref;
  std::function<oracle::AgreementReport(const std::vector<uint16_t>&)> judge;
  if (lm) {
    const LmHeadOp op = lm_head_of(*rc::gen::inRange(0, 4), *rc::gen::inRange<uint64_t>(1, 129),
                                   *rc::gen::inRange<uint64_t>(1, 129));
    const uint64_t h = op.shape().hidden;
    oracle::LmHeadRun run{{oracle::seeded_bf16(op.shape().rows * h, seed, {1.0, 6}),
                           oracle::seeded_bf16(op.shape().vocab * h, ~seed, {0.1, 0})},
                          {}};
    ref = oracle::lm_head(op, run.stored, Mode::faithful, oracle::cpu_bounds());
    judge = [=](const std::vector<uint16_t>& out) mutable {
      run.out = out;
      return oracle::judge_lm_head(op, run, "planted", seed);
    };
  } else {
    const auto e =
        *rc::gen::element(GemmEpilogue::store, GemmEpilogue::swiglu, GemmEpilogue::accumulate);
    const uint64_t rows = *rc::gen::inRange<uint64_t>(1, 9),
                   K = *rc::gen::inRange<uint64_t>(1, 257), N = *rc::gen::inRange<uint64_t>(1, 65);
    const GemmOp op = gemm_of(e, rows, K, N);
    oracle::GemmRun run{
        {oracle::seeded_bf16(rows * K, seed, {1.0, 6}), oracle::seeded_bf16(N * K, ~seed, {0.1, 0}),
         e == GemmEpilogue::store ? std::vector<uint16_t>{}
                                  : oracle::seeded_bf16(rows * N, seed + 1, {1.0, 0})},
        {}};
    ref = oracle::gemm(op, run.stored, Mode::faithful, oracle::cpu_bounds());
    judge = [=](const std::vector<uint16_t>& out) mutable {
      run.out = out;
      return oracle::judge_gemm(op, run, "planted", seed);
    };
  }
  auto out = oracle::perfect_bf16_output(ref);
  RC_ASSERT(judge(out).passed());
  const auto candidates = written(ref);
  const uint64_t i = *rc::gen::elementOf(candidates);
  out[i] = beyond_bound(ref.value[i], ref.bound[i]);
  const auto report = judge(out);
  RC_ASSERT(!report.passed());
  RC_ASSERT(report.first_failure()->first_bad->row * ref.cols +
                report.first_failure()->first_bad->col ==
            i);
}

}  // namespace
}  // namespace bufferlab
