// Byte counts for people: "256 B", "4.00 KiB", "288 KiB", "1.25 GiB" (binary units, three
// significant digits), used by the plan table, the sweep table and the SVG labels.
#pragma once

#include <cstdint>
#include <string>

namespace bufferlab::cli {

std::string human_bytes(uint64_t bytes);

// Decimal digits in groups of three: 1234567 → "1,234,567" (for figures, not for machines).
std::string group_digits(uint64_t value);

}  // namespace bufferlab::cli
