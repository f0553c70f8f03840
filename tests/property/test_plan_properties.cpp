// Property tests of the pass plans and the static verifier (issue 3): generated configs of
// every family with odd sizes, run shapes, targets, launchable passes and paths. Under the
// `corrected` sizing the verifier must report nothing. Counterexamples print as case JSON
// (fuzz::case_to_json), loadable with fuzz::case_from_json; save them in tests/corpus/plans/.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/plan/pass_plan.h"
#include "bufferlab/properties/fuzz_engine.h"
#include "bufferlab/properties/generators.h"
#include "bufferlab/properties/plan_generators.h"
#include "bufferlab/properties/sizing_checks.h"

namespace bufferlab {
namespace {

// One generated case of `family` verifies clean: no verifier finding, no failed sizing
// check, nothing thrown.
void clean_case(const std::string& family, const Sizing& sizing = Sizing::corrected()) {
  gen::CaseSpace space;
  space.families = {family};
  const fuzz::FuzzCase c = *gen::fuzz_case(space);
  RC_TAG(plan::to_string(c.pass.kind));
  const fuzz::CaseResult r = fuzz::check_case(c, sizing);
  for (const auto& f : r.findings) RC_LOG() << f.to_string() << "\n";
  for (const auto& v : r.sizing_failures) RC_LOG() << "sizing: " << v << "\n";
  for (const auto& e : r.errors) RC_LOG() << "error: " << e << "\n";
  RC_ASSERT(!r.refused);  // the generators draw launchable passes only
  RC_ASSERT(!r.failed());
}

// One property per family of docs/spec/buffers.md §1.2 (100 cases each), so every family is
// covered.
#define BUFFERLAB_CLEAN_PROP(Name, family) \
  RC_GTEST_PROP(PlanProperty, CorrectedSizingVerifiesClean##Name, ()) { clean_case(family); }
BUFFERLAB_CLEAN_PROP(Dense, "dense")
BUFFERLAB_CLEAN_PROP(Moe, "moe")
BUFFERLAB_CLEAN_PROP(Gdn, "gdn")
BUFFERLAB_CLEAN_PROP(Mamba, "mamba")
BUFFERLAB_CLEAN_PROP(Mla, "mla")
BUFFERLAB_CLEAN_PROP(Mhc, "mhc")
BUFFERLAB_CLEAN_PROP(MhcLowrank, "mhc-lowrank")
BUFFERLAB_CLEAN_PROP(Qsa, "qsa")
BUFFERLAB_CLEAN_PROP(Lora, "lora")
#undef BUFFERLAB_CLEAN_PROP

// The same property body fails under planted bugs the verifier (not the sizing checks) must
// see: split-K slots from a literal SM count (B5) and GEMM rows m instead of m_pad (B4).
TEST(PlanProperty, TheCleanPropertyFailsUnderPlantedBugs) {
  for (const Mutant m : {Mutant::B4, Mutant::B5}) {
    const bool holds = rc::check(std::string("clean under ") + to_string(m),
                                 [m] { clean_case("dense", Sizing::mutant_of_corrected(m)); });
    EXPECT_FALSE(holds) << "mutant " << to_string(m) << " survived the clean property";
  }
}

TEST(PlanProperty, EveryFamilyHasACleanProperty) {
  EXPECT_EQ(gen::family_names().size(), 9u) << "add a BUFFERLAB_CLEAN_PROP for the new family";
}

// Spec §2: every co-dispatch pass with n·L ≤ m is eligible under the layout under test.
RC_GTEST_PROP(PlanProperty, EveryLaunchableCodispatchPassIsEligible, ()) {
  const auto [family, config] = *gen::family_and_config();
  RC_TAG(family);
  RunShape shape = *gen::plan_run_shape();
  shape.max_batch_tokens = std::max<uint64_t>(shape.max_batch_tokens, 2);
  const Target target = *gen::target();
  const plan::Pass pass = *gen::codispatch_pass(shape);
  const auto sizes = BufferSizes::from_config(config, shape, target, Sizing::corrected());
  const auto p = plan::build(config, sizes, target, shape, pass, *gen::paths(config, target));
  RC_ASSERT(!p.refused);
  if (p.ineligible) RC_LOG() << *p.ineligible << "\n";
  RC_ASSERT(!p.ineligible);
}

// The same property catches mutant B2 (scratch without the q12 term).
TEST(PlanProperty, CodispatchEligibilityFailsUnderMutantB2) {
  const bool holds = rc::check("co-dispatch eligible under B2", [] {
    const auto config = *gen::valid_config();
    RunShape shape = *gen::plan_run_shape();
    shape.max_batch_tokens = std::max<uint64_t>(shape.max_batch_tokens, 2);
    const Target target = *gen::target();
    const auto sizes =
        BufferSizes::from_config(config, shape, target, Sizing::mutant_of_corrected(Mutant::B2));
    const auto pass = *gen::codispatch_pass(shape);
    RC_ASSERT(!plan::build(config, sizes, target, shape, pass, plan::Paths{}).ineligible);
  });
  EXPECT_FALSE(holds) << "mutant B2 survived the eligibility property";
}

// Arena bytes do not depend on num_hidden_layers (the sizing property body, on every
// family and on the run shapes of the plan generators).
RC_GTEST_PROP(PlanProperty, ArenaBytesDoNotDependOnNumHiddenLayers, ()) {
  const auto [family, config] = *gen::family_and_config();
  RC_TAG(family);
  const auto shape = *gen::plan_run_shape();
  const auto target = *gen::target();
  const auto other = checks::with_num_hidden_layers(config, *rc::gen::inRange<uint64_t>(1, 200));
  const auto v = checks::arena_independent_of_layers(
      Layout::build(BufferSizes::from_config(config, shape, target, Sizing::corrected())),
      Layout::build(BufferSizes::from_config(other, shape, target, Sizing::corrected())));
  for (const auto& line : v) RC_LOG() << line << "\n";
  RC_ASSERT(v.empty());
}

// The generators themselves: every drawn pass launches and is well formed, every drawn
// paths value is one plan::all_paths enumerates, and a case survives its JSON round trip.
RC_GTEST_PROP(PlanProperty, GeneratedCasesAreLaunchableAndRoundTripThroughJson, ()) {
  const fuzz::FuzzCase c = *gen::fuzz_case({});
  RC_TAG(plan::to_string(c.pass.kind));
  c.pass.validate();
  RC_ASSERT(!c.pass.refusal(c.shape));
  const auto all = plan::all_paths(c.config, c.target);
  RC_ASSERT(std::find(all.begin(), all.end(), c.paths) != all.end());
  const auto j = fuzz::case_to_json(c, Sizing::corrected());
  const fuzz::FuzzCase back = fuzz::case_from_json(nlohmann::json::parse(j.dump()));
  RC_ASSERT(back.config == c.config);
  RC_ASSERT(back.shape == c.shape);
  RC_ASSERT(back.target == c.target);
  RC_ASSERT(back.pass == c.pass);
  RC_ASSERT(back.paths == c.paths);
  RC_ASSERT(fuzz::case_sizing_from_json(j) == Sizing::corrected());
}

// Every kind of pass is drawn for a roomy shape (a generator that lost a kind would make
// the properties above vacuous for it).
TEST(PlanProperty, EveryPassKindIsGenerated) {
  RunShape shape;  // docs/spec/buffers.md §2 defaults
  for (plan::PassKind k : plan::all_pass_kinds()) {
    ASSERT_TRUE(gen::can_launch(k, shape)) << plan::to_string(k);
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const plan::Pass p = gen::launchable_pass(shape, {k})(rc::Random(seed)).value();
      EXPECT_EQ(p.kind, k);
      EXPECT_FALSE(p.refusal(shape)) << p.to_string();
    }
  }
  RunShape one;
  one.max_batch_tokens = 1;
  EXPECT_FALSE(gen::can_launch(plan::PassKind::decode, one));
  EXPECT_FALSE(gen::can_launch(plan::PassKind::codispatch, one));
  const plan::Pass fallback =
      gen::launchable_pass(one, {plan::PassKind::codispatch})(rc::Random(1)).value();
  EXPECT_EQ(fallback, plan::Pass::prefill(1));
}

}  // namespace
}  // namespace bufferlab
