// Launchable passes (docs/spec/buffers.md §2): geometry, the engine's refusal rule, the boundary
// grid, and the representative layers a plan covers. Expected values are worked out by hand from
// the spec.
#include <gtest/gtest.h>

#include <algorithm>

#include "bufferlab/core/plan/pass_plan.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/core/verify/driver.h"

namespace bufferlab {
namespace {

using plan::Pass;
using plan::PassKind;

TEST(Passes, RowsOfEachKind) {
  EXPECT_EQ(Pass::prefill(100).tokens(), 100u);
  EXPECT_EQ(Pass::prefill(100).logits_rows(), 1u);
  EXPECT_EQ(Pass::decode(33).tokens(), 48u);  // rung(33) = 48
  EXPECT_EQ(Pass::decode(33).logits_rows(), 48u);
  EXPECT_EQ(Pass::verify(160).tokens(), 160u);
  EXPECT_EQ(Pass::mixed(3, 10).tokens(), 14u);        // rung(3) = 4, + 10
  EXPECT_EQ(Pass::mixed(3, 10).logits_rows(), 5u);    // decode rows + the parked prefill row
  EXPECT_EQ(Pass::codispatch(3, 65).tokens(), 195u);  // 3 · 65
  EXPECT_EQ(Pass::codispatch(3, 65).logits_rows(), 3u);
}

TEST(Passes, RefusalDependsOnTheRunShapeOnly) {
  RunShape s;
  s.max_batch_tokens = 40;
  s.max_batch_size = 36;
  EXPECT_FALSE(Pass::prefill(40).refusal(s));
  EXPECT_TRUE(Pass::prefill(41).refusal(s));
  EXPECT_FALSE(Pass::decode(24).refusal(s));  // rung 24 ≤ 40
  EXPECT_FALSE(Pass::decode(25).refusal(s));  // rung 32 ≤ 40 — launches
  EXPECT_TRUE(Pass::decode(33).refusal(s));   // rung 48 > 40
  EXPECT_TRUE(Pass::decode(37).refusal(s));   // n > max_batch_size
  EXPECT_FALSE(Pass::verify(40).refusal(s));
  EXPECT_TRUE(Pass::verify(41).refusal(s));
  EXPECT_FALSE(Pass::mixed(3, 36).refusal(s));  // 4 + 36 = 40
  EXPECT_TRUE(Pass::mixed(3, 37).refusal(s));
  EXPECT_FALSE(Pass::codispatch(4, 10).refusal(s));
  EXPECT_TRUE(Pass::codispatch(4, 11).refusal(s));
}

TEST(Passes, MalformedPassesAreErrors) {
  EXPECT_THROW(Pass::prefill(0).validate(), Error);
  EXPECT_THROW(Pass::verify(161).validate(), Error);
  EXPECT_THROW(Pass::codispatch(1, 5).validate(), Error);
  EXPECT_THROW(Pass::codispatch(9, 5).validate(), Error);
}

TEST(Passes, PrintedFormsParseBack) {
  for (const Pass& p : {Pass::prefill(5), Pass::decode(33), Pass::verify(160), Pass::mixed(3, 20),
                        Pass::codispatch(8, 1024)})
    EXPECT_EQ(Pass::from_string(p.to_string()), p) << p.to_string();
  EXPECT_THROW(Pass::from_string("prefill"), Error);
  EXPECT_THROW(Pass::from_string("prefill(t=0)"), Error);  // validated
  EXPECT_THROW(Pass::from_string("decode(x=3)"), Error);
  EXPECT_THROW(Pass::from_string("verify(rows=-1)"), Error);
  const plan::Paths paths{plan::ProjectionPath::fp8, plan::RouterPath::fp32_routing,
                          plan::FfnActPath::q8_1, plan::Q2Path::mmq, true};
  EXPECT_EQ(plan::Paths::from_string(paths.to_string()), paths);
  EXPECT_EQ(plan::Paths::from_string(""), plan::Paths{});
  EXPECT_THROW(plan::Paths::from_string("proj=fp16"), Error);
  EXPECT_THROW(plan::Paths::from_string("turbo=on"), Error);
}

TEST(PassGrid, CoversTheBoundariesOfEveryKind) {
  RunShape s;
  s.max_batch_tokens = 1193;
  s.max_batch_size = 36;
  const auto grid = verify::pass_grid(s);
  auto contains = [&](const Pass& p) {
    return std::find(grid.begin(), grid.end(), p) != grid.end();
  };
  for (uint64_t t : {1, 15, 16, 17, 63, 64, 65, 1192, 1193, 1194})
    EXPECT_TRUE(contains(Pass::prefill(t))) << t;
  for (uint64_t n = 1; n <= 37; ++n) EXPECT_TRUE(contains(Pass::decode(n))) << n;
  for (uint64_t v : {1, 16, 17, 159, 160}) EXPECT_TRUE(contains(Pass::verify(v))) << v;
  // Largest n of the last rung (36 → rung 48) with the largest t that fits: 1193 − 48.
  EXPECT_TRUE(contains(Pass::mixed(36, 1145)));
  EXPECT_TRUE(contains(Pass::mixed(36, 1146)));  // one more: refused
  for (uint64_t n = 2; n <= 8; ++n) {
    EXPECT_TRUE(contains(Pass::codispatch(n, 1193 / n))) << n;
    EXPECT_TRUE(contains(Pass::codispatch(n, 65))) << n;
  }
}

TEST(RepresentativeLayers, EveryAdjacentPairOfLayerKinds) {
  // qwen3-next-80b: 48 layers, full attention every 4th, GDN otherwise, all MoE. Pairs:
  // (gdn,gdn) at 0–1, (gdn,full) at 2–3, (full,gdn) at 3–4; plus the last layer.
  EXPECT_EQ(plan::representative_layers(preset("qwen3-next-80b")),
            (std::vector<uint64_t>{0, 1, 2, 3, 4, 47}));
}

}  // namespace
}  // namespace bufferlab
