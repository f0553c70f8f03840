// Report helpers for RapidCheck properties: a failing oracle report is logged (the judge's
// findings with coordinates) before the property fails, so a shrunk case says why.
#pragma once

#include <rapidcheck.h>

#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/compare.h"

namespace bufferlab::testing {

inline void require_passed(const oracle::AgreementReport& r) {
  if (!r.passed()) RC_LOG() << oracle::format_report(r);
  RC_ASSERT(r.passed());
}

inline void require_passed(const oracle::TensorComparison& c) {
  if (!c.passed() && c.first_bad) RC_LOG() << c.name << ": " << c.first_bad->reason << "\n";
  RC_ASSERT(c.passed());
}

}  // namespace bufferlab::testing
