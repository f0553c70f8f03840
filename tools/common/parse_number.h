// Strict parsing of the CLI's number options. Options are read as text and parsed here
// because CLI11 2.1 converts "-1" into a uint64_t by wrapping it to 2^64 - 1; a size limit
// must reject negative numbers and junk with a message naming the option.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace bufferlab::cli {

// Decimal digits only (no sign, no spaces, no suffix), fitting in 64 bits. Throws
// bufferlab::Error naming `option` and the text otherwise.
uint64_t parse_u64(std::string_view option, const std::string& text);

// A finite number as strtod reads it, the whole text. Throws bufferlab::Error naming `option`
// and the text otherwise ("expected a finite number").
double parse_finite_double(std::string_view option, const std::string& text);

}  // namespace bufferlab::cli
