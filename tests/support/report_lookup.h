// One check of an oracle report by its name: the comparison itself (check_named), or whether it
// failed (check_failed, a test failure of its own when the report has no such check).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/compare.h"

namespace bufferlab::testing {

inline const oracle::TensorComparison* check_named(const oracle::AgreementReport& r,
                                                   const std::string& name) {
  for (const auto& c : r.checks)
    if (c.name == name) return &c;
  return nullptr;
}

inline bool check_failed(const oracle::AgreementReport& r, const std::string& name) {
  if (const oracle::TensorComparison* c = check_named(r, name)) return !c->passed();
  ADD_FAILURE() << "no check named " << name;
  return false;
}

}  // namespace bufferlab::testing
