// contains(s, part): the substring test the tests search outputs, reasons and findings with
// (no GoogleTest or RapidCheck inside, so every test target may include it).
#pragma once

#include <string>

namespace bufferlab::testing {

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace bufferlab::testing
