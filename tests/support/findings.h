// A property's own findings — the failed assertions of checks a test makes itself (not the
// oracle's judge): each check's name and where, logged to RapidCheck before the property fails.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <string>
#include <vector>

namespace bufferlab::testing {

// A failed assertion of one of the properties' own checks: the check's name and where.
struct Finding {
  std::string check, where;
};
using Findings = std::vector<Finding>;

inline void log_findings(const Findings& f) {
  for (const Finding& x : f) RC_LOG() << "finding: " << x.check << ": " << x.where << "\n";
}
inline bool has_finding(const Findings& f, const std::string& check) {
  return std::any_of(f.begin(), f.end(), [&](const Finding& x) { return x.check == check; });
}

}  // namespace bufferlab::testing
