// Report checks: for GoogleTest bodies (expect_passed) and RapidCheck properties
// (require_passed), a failing oracle report or comparison is printed (the judge's findings with
// coordinates) with the failure, so a failing case says why.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/compare.h"

namespace bufferlab::testing {

inline void expect_passed(const oracle::AgreementReport& r) {
  EXPECT_TRUE(r.passed()) << oracle::format_report(r);
}

inline void expect_passed(const oracle::TensorComparison& c) {
  EXPECT_TRUE(c.passed()) << c.name << ": " << c.failures << " failures, max |Δ| " << c.max_abs
                          << ", max ULP " << c.max_ulp.value_or(0) << ", first bad "
                          << (c.first_bad ? c.first_bad->reason : "");
}

inline void require_passed(const oracle::AgreementReport& r) {
  if (!r.passed()) RC_LOG() << oracle::format_report(r);
  RC_ASSERT(r.passed());
}

inline void require_passed(const oracle::TensorComparison& c) {
  if (!c.passed() && c.first_bad) RC_LOG() << c.name << ": " << c.first_bad->reason << "\n";
  RC_ASSERT(c.passed());
}

}  // namespace bufferlab::testing
