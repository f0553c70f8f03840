// Bound-based attention properties (properties/attention_bound_checks.h, where the bounds are
// derived) on the CPU backend, over decode passes of properties/attention_generators.h:
//   1. split-K (S = 2..4, then the merge) vs one split of the same pass;
//   2. a sliding layer vs full attention over the window's keys only;
//   3. with sinks and V = 1, the output is 1 − the sink's share.
// Each has a planted twin (suite AttnBoundPlanted) that must break its bound: the merge with one
// part's rescale dropped; the reference one key wider; the sink ignored. Every property records
// its largest |diff| / bound (printed by AttnBoundProperty.Report).
//
// Cost: decode-only cases of gen::ci_attn_ranges (attn_case_cost ≤ 2^17), two runs per case
// for (1), one for (2) and (3), plus the FP64 references.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "bufferlab/oracle/attention_inputs.h"
#include "bufferlab/properties/attention_bound_checks.h"
#include "bufferlab/properties/attention_generators.h"
#include "cpu_backend.h"

namespace bufferlab::attention_bound_properties {
namespace {

using gen::AttnBoundResult;
using gen::AttnGenCase;
using gen::AttnParts;
using oracle::AttnCase;
using U = uint64_t;

Backend& cpu() { return testing::cpu_backend(); }

// What each property saw over its runs.
struct Worst {
  double ratio = 0.0;
  U cases = 0, elements = 0, differing = 0;
  double bound_ulps = 0.0;
};
Worst g_split, g_sliding, g_sink;

void check(const AttnBoundResult& r, bool plant, Worst& w, const char* what) {
  if (plant) {
    RC_PRE(r.applicable);
    RC_ASSERT(r.worst > 1.0);
    return;
  }
  w.ratio = std::max(w.ratio, r.worst);
  ++w.cases;
  w.elements += r.elements;
  w.differing += r.differing;
  w.bound_ulps += r.bound_ulps;
  if (r.worst > 1.0) RC_FAIL(std::string(what) + " " + r.where);
}

AttnGenCase gpt_oss_decode() {
  return *gen::attn_case_of(gen::AttnFlavour::gpt_oss, gen::ci_attn_ranges(), AttnParts::decode);
}

// ---- 1. split-K merge vs one split ----
void split_vs_one(bool plant) {
  AttnGenCase g = *gen::attn_case(gen::ci_attn_ranges(), AttnParts::decode);
  g.spec.splits = *rc::gen::inRange<U>(2, 5);
  const AttnCase c = oracle::make_attn_case(g.spec, g.seed);
  check(gen::attn_split_vs_one_split(cpu(), c, plant), plant, g_split, "split-K vs one split");
}
RC_GTEST_PROP(AttnBoundProperty, SplitKMergeAgreesWithOneSplitUnderDerivedBound, ()) {
  split_vs_one(false);
}
RC_GTEST_PROP(AttnBoundPlanted, MergeWithAPartsRescaleDroppedBreaksTheBound, ()) {
  split_vs_one(true);
}

// ---- 2. sliding vs full attention over the window's keys ----
void sliding_vs_full(bool plant) {
  AttnGenCase g = gpt_oss_decode();
  g.spec.sliding = true;
  g.spec.splits = 1;
  const AttnCase c = oracle::make_attn_case(g.spec, g.seed);
  check(gen::attn_sliding_vs_window(cpu(), c, plant), plant, g_sliding,
        "sliding vs full over the window");
}
RC_GTEST_PROP(AttnBoundProperty, SlidingEqualsFullAttentionOverTheWindowsKeys, ()) {
  sliding_vs_full(false);
}
RC_GTEST_PROP(AttnBoundPlanted, FullAttentionOverOneKeyMoreDiffers, ()) { sliding_vs_full(true); }

// ---- 3. sinks: V = 1 gives 1 − the sink's share ----
void sink_share(bool plant) {
  AttnGenCase g = gpt_oss_decode();
  g.spec.splits = 1;
  const AttnCase c = oracle::make_attn_case(g.spec, g.seed);
  check(gen::attn_sink_share(cpu(), c, plant), plant, g_sink, "sink share");
}
RC_GTEST_PROP(AttnBoundProperty, WithSinksWeightsSumToOneMinusTheSinksShare, ()) {
  sink_share(false);
}
RC_GTEST_PROP(AttnBoundPlanted, SinkIgnoredBreaksTheShare, ()) { sink_share(true); }

void print(const char* what, const Worst& w) {
  std::printf(
      "%s: max |diff|/bound %.4g over %llu cases, %llu elements (%llu differ), mean bound "
      "%.3g BF16 ulps\n",
      what, w.ratio, static_cast<unsigned long long>(w.cases),
      static_cast<unsigned long long>(w.elements), static_cast<unsigned long long>(w.differing),
      w.elements ? w.bound_ulps / static_cast<double>(w.elements) : 0.0);
}

TEST(AttnBoundProperty, Report) {
  // Run after the properties (declaration order): what each one saw.
  print("split-K vs one split", g_split);
  print("sliding vs full over the window", g_sliding);
  print("sink share (V = 1)", g_sink);
}

}  // namespace
}  // namespace bufferlab::attention_bound_properties
