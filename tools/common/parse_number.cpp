// parse_u64 and parse_finite_double: the number parsers of the CLI.
#include "common/parse_number.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "bufferlab/core/error.h"

namespace bufferlab::cli {

uint64_t parse_u64(std::string_view option, const std::string& text) {
  const std::string where = std::string(option) + " = '" + text + "'";
  if (text.empty()) throw Error(where + ": expected a non-negative integer, got nothing");
  if (text.front() == '-') throw Error(where + ": must not be negative");
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) throw Error(where + ": does not fit in 64 bits");
  if (ec != std::errc() || ptr != end)
    throw Error(where + ": expected a non-negative decimal integer");
  return value;
}

double parse_finite_double(std::string_view option, const std::string& text) {
  const std::string where = std::string(option) + " = '" + text + "'";
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
    throw Error(where + ": expected a finite number");
  return v;
}

}  // namespace bufferlab::cli
