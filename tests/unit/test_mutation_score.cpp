// Mutation score of the static verifier and the sizing checks (docs/spec/bug-catalogue.md): every
// catalogued mutant that concerns sizes, layouts or scheduling is re-introduced on top of
// `corrected`, and a bounded fuzz run must find the catalogue's EXPECTED finding (check
// kind + buffer), and still show it after shrinking. The same bounded runs on `corrected`
// itself find nothing, so the mutants — not noise — trigger the findings.
//
// Each run is restricted to what can exhibit its mutant (families, pass kinds, target) so
// that a few hundred cases suffice; the restrictions are listed per mutant below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/plan/pass_plan.h"
#include "bufferlab/properties/fuzz_engine.h"

namespace bufferlab {
namespace {

using plan::PassKind;

struct MutantRun {
  Mutant mutant;
  std::string expected;               // the catalogue's finding, for messages
  std::vector<std::string> kinds;     // failure kinds that count as the finding
  std::vector<std::string> families;  // empty: every family
  std::vector<PassKind> pass_kinds;   // empty: every kind
  bool q2_dequant = false;            // base target switch (B7)
  bool vary_target = true;
  uint64_t max_cases = 1000;
  // Extra conditions on the shrunk case and its result (the catalogue's "needs ..."):
  // returns what does not hold, empty when all do.
  std::function<std::string(const fuzz::FuzzCase&, const fuzz::CaseResult&)> also;
};

bool any_detail(const fuzz::CaseResult& r, const std::string& kind, const std::string& a,
                const std::string& b) {
  for (const auto& f : r.findings)
    if (std::string(verify::to_string(f.check)) + ":" + f.buffer == kind &&
        f.detail.find(a) != std::string::npos && f.detail.find(b) != std::string::npos)
      return true;
  return false;
}

std::string need(bool holds, const std::string& what) {
  return holds ? std::string() : "needs " + what + "; ";
}

// Restrictions per mutant (families, pass kinds, target) only make the search short: without
// them the fuzzer still finds every one of these mutants, B15 after ~500 cases on average.
const std::vector<MutantRun>& runs() {
  static const std::vector<MutantRun> table = {
      {.mutant = Mutant::B1,
       .expected = "overlap or bounds on scratch, co-dispatch, uses_mrope",
       .kinds = {"overlap:scratch", "bounds:scratch"},
       .pass_kinds = {PassKind::codispatch},
       .also =
           [](const fuzz::FuzzCase& c, const fuzz::CaseResult&) {
             return need(c.config.uses_mrope(), "uses_mrope") +
                    need(c.pass.kind == PassKind::codispatch, "a co-dispatch pass");
           }},
      {.mutant = Mutant::B2,
       .expected = "ineligible (or bounds) on scratch",
       .kinds = {"ineligible:scratch", "bounds:scratch"},
       .pass_kinds = {PassKind::codispatch}},
      {.mutant = Mutant::B3,
       .expected = "overlap between cu_seqlens and kv_lens on scratch, every n",
       .kinds = {"overlap:scratch"},
       .pass_kinds = {PassKind::codispatch},
       .also =
           [](const fuzz::FuzzCase& c, const fuzz::CaseResult& r) {
             std::string missing = need(any_detail(r, "overlap:scratch", "cu_seqlens", "kv_lens"),
                                        "cu_seqlens/kv_lens in the finding");
             // Every co-dispatch n, on the shrunk config.
             for (uint64_t n = 2; n <= 8; ++n) {
               fuzz::FuzzCase k = c;
               k.shape.max_batch_tokens = std::max<uint64_t>(k.shape.max_batch_tokens, n);
               k.pass = plan::Pass::codispatch(n, 1);
               missing +=
                   need(any_detail(fuzz::check_case(k, Sizing::mutant_of_corrected(Mutant::B3)),
                                   "overlap:scratch", "cu_seqlens", "kv_lens"),
                        "the overlap at n = " + std::to_string(n));
             }
             return missing;
           }},
      {.mutant = Mutant::B4,
       .expected = "bounds on qkv_output/ssm_qkvz/moe_output/expert_*, m % 16 != 0, FP8",
       .kinds = {"bounds:qkv_output", "bounds:ssm_qkvz", "bounds:moe_output",
                 "bounds:expert_gate_out", "bounds:expert_up_out", "bounds:expert_down_out"},
       .also =
           [](const fuzz::FuzzCase& c, const fuzz::CaseResult&) {
             return need(c.shape.max_batch_tokens % 16 != 0, "m % 16 != 0") +
                    need(c.paths.projection == plan::ProjectionPath::fp8, "the FP8 path");
           }},
      // The base target (h200: auto split-K), not varied: legacy and pinned policies differ.
      {.mutant = Mutant::B5,
       .expected = "bounds on splitk_workspace (auto policy, decode)",
       .kinds = {"bounds:splitk_workspace"},
       .families = {"dense"},
       .pass_kinds = {PassKind::decode},
       .vary_target = false},
      // Dense: MoE models have no ffn_act_* scratch.
      {.mutant = Mutant::B6,
       .expected = "arena depends on num_hidden_layers",
       .kinds = {"sizing:layers"},
       .families = {"dense"}},
      // Q2 dequant forced on in the target (the generators draw it one case in two).
      {.mutant = Mutant::B7,
       .expected = "race on q2_dequant_scratch (co-dispatch, Q2 dequant)",
       .kinds = {"race:q2_dequant_scratch"},
       .families = {"dense"},
       .pass_kinds = {PassKind::codispatch},
       .q2_dequant = true,
       .vary_target = false,
       .also =
           [](const fuzz::FuzzCase& c, const fuzz::CaseResult&) {
             return need(c.paths.q2 == plan::Q2Path::dequant, "the Q2 dequant path");
           }},
      {.mutant = Mutant::B8,
       .expected = "ledger: total_bytes misses a field",
       .kinds = {"sizing:ledger"}},
      {.mutant = Mutant::B9,
       .expected = "overlap on scratch: decode positions run into seq_slot",
       .kinds = {"overlap:scratch"},
       .pass_kinds = {PassKind::decode},
       .also =
           [](const fuzz::FuzzCase&, const fuzz::CaseResult& r) {
             return need(any_detail(r, "overlap:scratch", "positions", "seq_slot"),
                         "positions/seq_slot in the finding");
           }},
      {.mutant = Mutant::B10,
       .expected = "bounds on logits (verify or mixed)",
       .kinds = {"bounds:logits"},
       .pass_kinds = {PassKind::verify, PassKind::mixed}},
      {.mutant = Mutant::B11,
       .expected = "bounds on expert_gate_out, dense layers in an MoE model, wide dense FFN",
       .kinds = {"bounds:expert_gate_out"},
       .families = {"moe"},
       .also =
           [](const fuzz::FuzzCase& c, const fuzz::CaseResult&) {
             // The catalogue's example is first_k_dense > 0; moe_layer_freq and mlp_only_layers
             // make dense layers in an MoE model just the same.
             bool dense_layer = false;
             for (uint64_t i = 0; i < c.config.num_hidden_layers; ++i)
               dense_layer = dense_layer || c.config.ffn_kind(i) == FfnKind::dense;
             const uint64_t routed =
                 (Size(c.config.num_experts_per_tok) * c.config.moe_intermediate_size).value();
             return need(dense_layer, "a dense FFN layer") +
                    need(c.config.intermediate_size > routed,
                         "intermediate_size > top_k * moe_intermediate_size");
           }},
      {.mutant = Mutant::B12,
       .expected = "registry/layout completeness names norm_unit_w",
       .kinds = {"sizing:ledger"},
       .also =
           [](const fuzz::FuzzCase&, const fuzz::CaseResult& r) {
             bool named = false;
             for (const auto& v : r.sizing_failures)
               named = named ||
                       (v.rfind("ledger", 0) == 0 && v.find("norm_unit_w") != std::string::npos);
             return need(named, "a ledger failure naming norm_unit_w");
           }},
      // GDN with the chunked scratch is drawn one GDN config in two.
      {.mutant = Mutant::B15,
       .expected = "bounds on gdn_fla_scratch, co-dispatch, L % 64 != 0",
       .kinds = {"bounds:gdn_fla_scratch"},
       .families = {"gdn"},
       .pass_kinds = {PassKind::codispatch},
       .also =
           [](const fuzz::FuzzCase& c, const fuzz::CaseResult&) {
             return need(c.pass.kind == PassKind::codispatch, "a co-dispatch pass") +
                    need(c.pass.L % 64 != 0, "L % 64 != 0");
           }},
  };
  return table;
}

fuzz::FuzzOptions options_for(const MutantRun& m, Sizing sizing) {
  fuzz::FuzzOptions o;
  o.seed = 20240611;
  o.max_cases = m.max_cases;
  o.families = m.families;
  o.pass_kinds = m.pass_kinds;
  o.target.q2_dequant = m.q2_dequant;
  o.vary_target = m.vary_target;
  o.sizing = sizing;
  o.max_shrink_checks = 400;
  o.shrink_seconds = 3;
  return o;
}

std::string describe(const fuzz::FuzzFailure& f, const Sizing& s) {
  return f.kind + " after " + std::to_string(f.case_index + 1) + " cases, " +
         std::to_string(f.shrink_steps) + " shrink steps; shrunk case " +
         fuzz::case_to_json(f.shrunk, s).dump();
}

TEST(MutationScore, EveryCatalogueMutantIsCaughtWithItsExpectedFinding) {
  size_t caught = 0;
  for (const MutantRun& m : runs()) {
    SCOPED_TRACE(std::string("mutant ") + to_string(m.mutant) + ": " + m.expected);
    const Sizing sizing = Sizing::mutant_of_corrected(m.mutant);
    fuzz::FuzzOptions o = options_for(m, sizing);
    o.accept = [&m](const std::string& kind) {
      return std::find(m.kinds.begin(), m.kinds.end(), kind) != m.kinds.end();
    };
    const fuzz::FuzzResult r = fuzz::run(o);
    if (!r.failure) {
      ADD_FAILURE() << "mutant " << to_string(m.mutant) << " survived " << r.progress.cases
                    << " cases (" << r.progress.other_failures << " failed otherwise)";
      continue;
    }
    const fuzz::FuzzFailure& f = *r.failure;
    std::printf("%-4s caught: %s\n", to_string(m.mutant), describe(f, sizing).c_str());
    // The shrunk case, re-checked from scratch, still shows the expected finding.
    const fuzz::CaseResult again = fuzz::check_case(f.shrunk, sizing);
    const bool still = fuzz::has_failure_kind(again, f.kind);
    EXPECT_TRUE(still) << "the shrunk case lost its finding: " << describe(f, sizing);
    const std::string missing = m.also ? m.also(f.shrunk, again) : std::string();
    EXPECT_EQ(missing, "") << describe(f, sizing);
    if (still && missing.empty()) ++caught;
  }
  const size_t total = runs().size();
  std::printf("mutation score: %zu/%zu = %zu%%\n", caught, total, caught * 100 / total);
  EXPECT_EQ(caught, total);
}

TEST(MutationScore, TheSameBoundedRunsFindNothingUnderCorrected) {
  for (const MutantRun& m : runs()) {
    SCOPED_TRACE(std::string("the run of mutant ") + to_string(m.mutant) + ", on corrected");
    const fuzz::FuzzOptions o = options_for(m, Sizing::corrected());
    const fuzz::FuzzResult r = fuzz::run(o);
    EXPECT_EQ(r.progress.cases, m.max_cases);
    if (r.failure)
      ADD_FAILURE() << "corrected fails: " << describe(*r.failure, Sizing::corrected()) << "\n"
                    << (r.failure->result.findings.empty()
                            ? (r.failure->result.sizing_failures.empty()
                                   ? r.failure->result.errors.front()
                                   : r.failure->result.sizing_failures.front())
                            : r.failure->result.findings.front().to_string());
  }
}

// The catalogue rows this file covers: every mutant of sizes, layouts and scheduling.
TEST(MutationScore, CoversTheSizingLayoutAndSchedulingMutants) {
  std::vector<Mutant> covered;
  for (const auto& m : runs()) covered.push_back(m.mutant);
  for (Mutant m :
       {Mutant::B1, Mutant::B2, Mutant::B3, Mutant::B4, Mutant::B5, Mutant::B6, Mutant::B7,
        Mutant::B8, Mutant::B9, Mutant::B10, Mutant::B11, Mutant::B12, Mutant::B15})
    EXPECT_NE(std::find(covered.begin(), covered.end(), m), covered.end()) << to_string(m);
}

// The engine itself: reproducible cases, shards that split the run, limits, progress.
fuzz::FuzzOptions never_stop(uint64_t max_cases) {
  fuzz::FuzzOptions o;
  o.seed = 99;
  o.max_cases = max_cases;
  o.accept = [](const std::string&) { return false; };  // failures are counted, not stopping
  return o;
}

TEST(FuzzEngine, AFailureReproducesFromItsCaseSeedAndRunsAreDeterministic) {
  fuzz::FuzzOptions o;
  o.seed = 5;
  o.max_cases = 50;
  o.families = {"mamba"};
  o.sizing = Sizing::mutant_of_corrected(Mutant::B6);
  o.accept = [](const std::string& k) { return k == "sizing:layers"; };
  const auto a = fuzz::run(o), b = fuzz::run(o);
  ASSERT_TRUE(a.failure && b.failure);
  EXPECT_EQ(a.failure->case_seed, fuzz::case_seed(o.seed, a.failure->case_index));
  const fuzz::FuzzCase again = fuzz::generate_case(o, a.failure->case_seed);
  EXPECT_TRUE(again.config == a.failure->original.config && again.pass == a.failure->original.pass);
  EXPECT_TRUE(a.failure->shrunk.config == b.failure->shrunk.config);
  EXPECT_EQ(a.failure->shrink_steps, b.failure->shrink_steps);
}

TEST(FuzzEngine, ShardsSplitTheCasesOfOneRun) {
  fuzz::FuzzOptions o = never_stop(21);
  uint64_t total = 0;
  for (uint64_t shard = 0; shard < 3; ++shard) {
    o.shard_index = shard;
    o.shard_count = 3;
    total += fuzz::run(o).progress.cases;
  }
  EXPECT_EQ(total, 21u);
  o.shard_index = 3;
  EXPECT_THROW(fuzz::run(o), Error);
  EXPECT_THROW(fuzz::run(fuzz::FuzzOptions{}), Error);  // no limit at all
}

TEST(FuzzEngine, ReportsProgressAboutEveryHalfSecond) {
  fuzz::FuzzOptions o = never_stop(0);
  o.seconds = 1.2;
  int calls = 0;
  o.on_progress = [&](const fuzz::Progress& p) {
    ++calls;
    EXPECT_GT(p.cases, 0u);
    EXPECT_GT(p.rate, 0);
  };
  const auto r = fuzz::run(o);
  EXPECT_GE(calls, 1);
  EXPECT_LE(calls, 3);
  EXPECT_FALSE(r.failure);
}

}  // namespace
}  // namespace bufferlab
