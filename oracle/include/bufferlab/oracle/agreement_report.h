// AgreementReport: the verdict of one op run judged against the oracle — the asserted
// comparisons (backend vs faithful oracle, one per output tensor and stage) and the reported
// ones (exact vs faithful oracle), with everything needed to re-run it: the op's parameter
// string, the backend and the seed (docs/spec/numerics.md §9).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/oracle/compare.h"

namespace bufferlab::oracle {

struct AgreementReport {
  std::string op;       // "rmsnorm"
  std::string params;   // the op descriptor's params() string
  std::string backend;  // "cpu", "cuda"
  uint64_t seed = 0;
  std::vector<TensorComparison> checks;    // asserted
  std::vector<TensorComparison> reported;  // not asserted

  bool passed() const;
  // The first failing asserted comparison, or nullptr.
  const TensorComparison* first_failure() const;
};

// A human-readable table, one line per comparison, then the first bad element of each failing
// one with its coordinates, both values and the reason, and a last line AGREE / DISAGREE:
// format_report_body(report) + format_outcome(report).
std::string format_report(const AgreementReport& report);
// The table and the first bad elements, without the verdict line: a caller that explains the
// result further (tie checks, the first differing token) prints those lines, then the verdict.
std::string format_report_body(const AgreementReport& report);
// The verdict line: "AGREE" or "DISAGREE (seed N)", with its newline.
std::string format_outcome(const AgreementReport& report);

}  // namespace bufferlab::oracle
