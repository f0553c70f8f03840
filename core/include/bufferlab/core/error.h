// bufferlab::Error — the one exception type for invalid input: bad configs, overflowing
// sizes, malformed JSON, unknown presets. Its message names the field and the value.
#pragma once

#include <stdexcept>
#include <string>

namespace bufferlab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace bufferlab
