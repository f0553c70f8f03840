// A RapidCheck property run from inside a GoogleTest TEST with its own number of cases (the
// full-range runs of label slow, the CUDA properties): rc::detail::checkGTest with `cases`
// successes instead of the configured count. RC_PARAMS="seed=..." still picks the seed.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <sstream>
#include <string>
#include <utility>

namespace bufferlab::testing {

template <class Testable>
void check_many(Testable&& testable, int cases) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(info->test_suite_name()) + "/" + info->name();
  metadata.description = info->name();
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = cases;
  const auto result = rc::detail::checkTestable(std::forward<Testable>(testable), metadata, params);
  if (!result.template is<rc::detail::SuccessResult>()) {
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << ss.str();
  }
}

}  // namespace bufferlab::testing
