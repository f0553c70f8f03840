// The outcome of one `fuzz --numeric` case as a family's runner reports it (mHC, GDN / SSD):
// what was drawn, which check ran, and the judge's verdict.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "bufferlab/oracle/agreement_report.h"

namespace bufferlab::cli {

struct NumericCaseOutcome {
  std::string description;  // the case's describe()
  std::string check;        // the family's check name, e.g. "pre", "gdn-chunked"
  std::string check_description;
  bool passed = true;
  std::string what;    // "<check>: <first failing comparison>", or "<check>" when it passed
  std::string report;  // format_report, or the error
  std::optional<oracle::AgreementReport> agreement;

  // Takes the judge's report: the verdict, what failed first and the formatted report.
  void finish(oracle::AgreementReport r) {
    const auto* bad = r.first_failure();
    passed = r.passed();
    what = bad ? check + ": " + bad->name : check;
    report = oracle::format_report(r);
    agreement = std::move(r);
  }
};

}  // namespace bufferlab::cli
