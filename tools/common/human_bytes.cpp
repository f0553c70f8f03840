// human_bytes: binary units with three significant digits.
#include "common/human_bytes.h"

#include <iterator>

#include <fmt/format.h>

namespace bufferlab::cli {

std::string human_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  int unit = 0;
  // 1023.9 KiB would print as "1024 KiB"; step up one unit early enough to print "1.00 MiB".
  while (value >= 1023.995 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    value /= 1024.0;
    ++unit;
  }
  if (value < 9.995) return fmt::format("{:.2f} {}", value, kUnits[unit]);
  if (value < 99.95) return fmt::format("{:.1f} {}", value, kUnits[unit]);
  return fmt::format("{:.0f} {}", value, kUnits[unit]);
}

std::string group_digits(uint64_t value) {
  const std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace bufferlab::cli
