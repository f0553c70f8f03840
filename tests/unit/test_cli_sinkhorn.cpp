// End-to-end tests of `bufferlab sinkhorn`: a clean trace exits 0, a NaN trace exits 1 naming
// the case, iteration, error and bound, bad options exit 2 with a message naming the option,
// --json parses, --svg writes the plot, and --frontier runs (small, to keep the suite fast).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "svg_checks.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// `bufferlab sinkhorn`; run and expect_error come from CliCommandTest.
class CliSinkhorn : public bufferlab::testing::CliCommandTest {
 protected:
  CliSinkhorn() : CliCommandTest("sinkhorn") {}
};

TEST_F(CliSinkhorn, CleanTraceExitsZeroWithTheTable) {
  const auto r = run({"--range", "4", "--iters", "25", "--cases", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("comb logits uniform in [0, 4]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("median error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS: every case within its Birkhoff-Hopf bound"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("NO ("), std::string::npos) << r.out;
}

TEST_F(CliSinkhorn, JsonParses) {
  const auto r = run({"--range", "8", "--iters", "30", "--cases", "3", "--seed", "7", "--hc", "5",
                      "--eps", "0", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("mode"), "trace");
  EXPECT_EQ(j.at("range"), 8.0);
  EXPECT_EQ(j.at("iters"), 30);
  EXPECT_EQ(j.at("hc"), 5);
  EXPECT_EQ(j.at("seed"), 7);
  EXPECT_EQ(j.at("eps"), 0.0);
  EXPECT_TRUE(j.at("holds").get<bool>());
  EXPECT_TRUE(j.at("first_violation").is_null());
  ASSERT_EQ(j.at("iterations").size(), 30u);
  EXPECT_EQ(j.at("iterations")[0].at("iter"), 1);
  ASSERT_EQ(j.at("case_traces").size(), 3u);
  for (const auto& c : j.at("case_traces")) {
    EXPECT_EQ(c.at("logits").size(), 25u);
    ASSERT_EQ(c.at("error").size(), 30u);
    ASSERT_EQ(c.at("bound").size(), 30u);
    for (size_t t = 0; t < 30; ++t)
      EXPECT_LE(c.at("error")[t].get<double>(), c.at("bound")[t].get<double>());
  }
}

TEST_F(CliSinkhorn, SvgIsWritten) {
  const fs::path svg = dir_ / "sinkhorn.svg";
  const auto r = run({"--range", "16", "--iters", "40", "--cases", "3", "--svg", svg.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_TRUE(fs::exists(svg));
  const std::string text = bufferlab::testing::read_file(svg);
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
  EXPECT_NE(text.find("<polyline"), std::string::npos);
  EXPECT_NE(text.find("case 2 bound"), std::string::npos);
  EXPECT_NE(r.out.find("wrote " + svg.string()), std::string::npos) << r.out;
}

TEST_F(CliSinkhorn, SvgLabelsStayOffTheCurvesAndMarkersInsideThePlot) {
  const fs::path clean = dir_ / "clean.svg";
  ASSERT_EQ(
      run({"--range", "60", "--iters", "100", "--cases", "3", "--svg", clean.string()}).exit_code,
      0);
  const std::string clean_svg = bufferlab::testing::read_file(clean);
  EXPECT_GT(bufferlab::testing::expect_labels_outside_frame(clean_svg), 20u);
  bufferlab::testing::expect_markers_inside_frame(clean_svg);
  // Violations at the first and last iteration, with errors above the axis: the red circles.
  const fs::path nan = dir_ / "nan.svg";
  ASSERT_EQ(
      run({"--range", "1e300", "--eps", "0", "--iters", "3", "--cases", "2", "--svg", nan.string()})
          .exit_code,
      1);
  const std::string nan_svg = bufferlab::testing::read_file(nan);
  bufferlab::testing::expect_labels_outside_frame(nan_svg);
  EXPECT_EQ(bufferlab::testing::expect_markers_inside_frame(nan_svg), 2u);  // one per case
}

// eps = 0 and logits so far apart that exp underflows: whole columns of K are 0 and the
// spec's normalisation divides 0 by 0. The run reports it as a failure (exit 1), not a pass.
TEST_F(CliSinkhorn, NanTraceExitsOneNamingTheCase) {
  const auto r = run({"--range", "1e300", "--eps", "0", "--iters", "3", "--cases", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL: case 0, iteration 1: row-sum error is NaN (bound"), std::string::npos)
      << r.out;
  // With --json the verdict goes to stderr and stdout stays parseable.
  const auto j = run({"--range", "1e300", "--eps", "0", "--iters", "3", "--cases", "2", "--json"});
  EXPECT_EQ(j.exit_code, 1) << j.err;
  EXPECT_FALSE(json::parse(j.out).at("holds").get<bool>());
  EXPECT_NE(j.err.find("FAIL: case 0, iteration 1"), std::string::npos) << j.err;
}

TEST_F(CliSinkhorn, BadOptionsExitTwo) {
  in_process_ = true;
  expect_error({"--range", "0", "--iters", "5"}, "--range = 0");
  expect_error({"--range", "-1", "--iters", "5"}, "--range = -1");
  expect_error({"--range", "inf", "--iters", "5"}, "--range = inf");
  expect_error({"--range", "nan", "--iters", "5"}, "--range");
  expect_error({"--range", "abc", "--iters", "5"}, "--range = 'abc'");
  expect_error({"--range", "1", "--iters", "0"}, "--iters = 0");
  expect_error({"--range", "1", "--iters", "10001"}, "--iters = 10001");
  expect_error({"--range", "1", "--iters", "-3"}, "--iters");
  expect_error({"--range", "1", "--iters", "5", "--hc", "0"}, "--hc = 0");
  expect_error({"--range", "1", "--iters", "5", "--hc", "17"}, "--hc = 17");
  expect_error({"--range", "1", "--iters", "5", "--eps", "-1e-9"}, "--eps");
  expect_error({"--range", "1", "--iters", "5", "--cases", "0"}, "--cases = 0");
  expect_error({"--iters", "5"}, "--range is required");
  expect_error({"--range", "1"}, "--iters is required");
  expect_error({"--frontier", "--range", "4"}, "--range applies to the per-range trace");
  expect_error({"--frontier", "--svg", (dir_ / "x.svg").string()}, "--svg");
  expect_error({"--range", "1", "--iters", "5", "--svg", (dir_ / "no" / "x.svg").string()},
               "--svg");
}

TEST_F(CliSinkhorn, FrontierRunsAndParses) {
  const auto r = run({"--frontier", "--cases", "6", "--iters", "60", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("mode"), "frontier");
  EXPECT_TRUE(j.at("holds").get<bool>());
  ASSERT_EQ(j.at("rows").size(), 16u);  // 8 ranges x eps {1e-6, 0}
  EXPECT_EQ(j.at("rows")[0].at("range"), 0.01);
  EXPECT_EQ(j.at("rows")[0].at("targets")[1].at("target"), 1e-6);
  EXPECT_EQ(j.at("rows")[0].at("targets")[1].at("reached_at_model_iters"), 6);

  const auto t = run({"--frontier", "--cases", "4", "--iters", "30", "--eps", "0"});
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
  EXPECT_NE(t.out.find("sinkhorn --frontier: hc 4, 4 cases per row"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("PASS"), std::string::npos) << t.out;
}

}  // namespace
