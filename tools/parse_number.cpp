// parse_u64: the one integer parser of the CLI.
#include "parse_number.h"

#include <charconv>

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

}  // namespace bufferlab::cli
