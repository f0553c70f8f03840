// Replays the saved plan cases of tests/corpus/plans/ (fuzz::case_to_json files: shrunk
// counterexamples of the plan properties, the fuzzer and the mutation test) before any
// random case: each must verify clean under `corrected`, and a case saved with an
// "expect" kind must still show that finding under the sizing it was saved with (the
// mutant it caught), so the replay itself is shown to fail when the bug is back.
#include <gtest/gtest.h>

#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/properties/fuzz_engine.h"

namespace bufferlab {
namespace {

const std::string kPlanCorpus = std::string(BUFFERLAB_CORPUS_DIR) + "/plans";

std::string explain(const fuzz::CaseResult& r) {
  std::string s;
  for (const auto& f : r.findings) s += "\n  " + f.to_string();
  for (const auto& v : r.sizing_failures) s += "\n  sizing: " + v;
  for (const auto& e : r.errors) s += "\n  error: " + e;
  return s;
}

TEST(PlanCorpus, HasCases) { EXPECT_GE(fuzz::load_corpus(kPlanCorpus).size(), 10u); }

TEST(PlanCorpus, EverySavedCaseVerifiesCleanUnderCorrected) {
  for (const auto& [file, j] : fuzz::load_corpus(kPlanCorpus)) {
    SCOPED_TRACE(file);
    const fuzz::FuzzCase c = fuzz::case_from_json(j);
    const fuzz::CaseResult r = fuzz::check_case(c, Sizing::corrected());
    EXPECT_FALSE(r.refused) << file << ": the saved pass is refused";
    EXPECT_FALSE(r.failed()) << file << " (" << c.pass.to_string() << ", " << c.paths.to_string()
                             << "):" << explain(r);
  }
}

TEST(PlanCorpus, SavedMutantCasesStillShowTheirFinding) {
  int with_expect = 0;
  for (const auto& [file, j] : fuzz::load_corpus(kPlanCorpus)) {
    if (!j.contains("expect")) continue;
    SCOPED_TRACE(file);
    ++with_expect;
    const Sizing sizing = fuzz::case_sizing_from_json(j);
    const fuzz::CaseResult r = fuzz::check_case(fuzz::case_from_json(j), sizing);
    EXPECT_TRUE(fuzz::has_failure_kind(r, j.at("expect").get<std::string>()))
        << file << " under " << sizing.to_string() << ":" << explain(r);
  }
  EXPECT_GT(with_expect, 0);
}

// The fuzzer replays the corpus first: under a mutant it stops at a saved case, unshrunk.
TEST(PlanCorpus, FuzzRunReplaysTheCorpusFirst) {
  fuzz::FuzzOptions o;
  o.corpus_dir = kPlanCorpus;
  o.max_cases = 1;
  o.sizing = Sizing::mutant_of_corrected(Mutant::B8);  // the ledger fails on every case
  const fuzz::FuzzResult r = fuzz::run(o);
  ASSERT_TRUE(r.failure);
  EXPECT_FALSE(r.failure->corpus_file.empty());
  EXPECT_EQ(r.failure->kind, "sizing:ledger");
  EXPECT_EQ(r.failure->shrink_steps, 0u);
}

TEST(PlanCorpus, CaseJsonRoundTripsAndRejectsOtherDocuments) {
  for (const auto& [file, j] : fuzz::load_corpus(kPlanCorpus)) {
    const fuzz::FuzzCase c = fuzz::case_from_json(j);
    const auto again = fuzz::case_to_json(c, fuzz::case_sizing_from_json(j));
    const fuzz::FuzzCase d = fuzz::case_from_json(again);
    EXPECT_TRUE(d.config == c.config && d.shape == c.shape && d.target == c.target &&
                d.pass == c.pass && d.paths == c.paths)
        << file;
  }
  EXPECT_THROW(fuzz::case_from_json(nlohmann::json::object()), Error);
  EXPECT_THROW(fuzz::case_sizing_from_json(nlohmann::json{{"sizing", "spec+B8"}}), Error);
}

}  // namespace
}  // namespace bufferlab
