// A minimal reader of NumPy .npy files (format versions 1.0–3.0): little-endian float32,
// float64 and int64 arrays in C order — what scripts/golden/make_golden.py writes. Every value
// is widened to double (exact for all three: the int64 files hold small ids). Anything else
// (Fortran order, another dtype, a truncated file) is an Error naming the file.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bufferlab/core/error.h"

namespace bufferlab::testing {

struct NpyArray {
  std::string dtype;  // "<f4", "<f8" or "<i8"
  std::vector<uint64_t> shape;
  std::vector<double> values;  // C order

  uint64_t size() const { return values.size(); }
  std::vector<float> as_f32() const { return {values.begin(), values.end()}; }
};

namespace npy_detail {

// The value of `key` in the header dict: the text after "'key':" up to the next ',' outside
// parentheses (or the closing brace).
inline std::string header_field(const std::string& header, const std::string& key,
                                const std::string& file) {
  const std::string tag = "'" + key + "':";
  const size_t at = header.find(tag);
  if (at == std::string::npos) throw Error(file + ": .npy header has no '" + key + "'");
  size_t i = at + tag.size();
  int depth = 0;
  std::string out;
  for (; i < header.size(); ++i) {
    const char c = header[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    out += c;
  }
  return out;
}

inline std::string trim(std::string s) {
  const char* ws = " '\"";
  s.erase(0, s.find_first_not_of(ws));
  s.erase(s.find_last_not_of(ws) + 1);
  return s;
}

}  // namespace npy_detail

inline NpyArray read_npy(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file + ": cannot open");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw Error(file + ": not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_at = 10;
  } else {
    if (bytes.size() < 12) throw Error(file + ": truncated .npy header");
    for (int b = 3; b >= 0; --b)
      header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + b]);
    header_at = 12;
  }
  if (header_at + header_len > bytes.size()) throw Error(file + ": truncated .npy header");
  const std::string header = bytes.substr(header_at, header_len);
  NpyArray a;
  a.dtype = npy_detail::trim(npy_detail::header_field(header, "descr", file));
  if (npy_detail::trim(npy_detail::header_field(header, "fortran_order", file)) != "False")
    throw Error(file + ": Fortran order is not supported");
  // 'shape': (a, b, ), read up to the closing parenthesis.
  const size_t s = header.find("'shape':");
  const size_t open = header.find('(', s), close = header.find(')', open);
  if (s == std::string::npos || open == std::string::npos || close == std::string::npos)
    throw Error(file + ": .npy header has no shape");
  uint64_t count = 1;
  std::string dims = header.substr(open + 1, close - open - 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    const size_t comma = dims.find(',', pos);
    const std::string d = npy_detail::trim(dims.substr(pos, comma - pos));
    if (!d.empty()) {
      a.shape.push_back(std::stoull(d));
      count *= a.shape.back();
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  const size_t width = a.dtype == "<f4" ? 4 : (a.dtype == "<f8" || a.dtype == "<i8") ? 8 : 0;
  if (width == 0) throw Error(file + ": unsupported dtype " + a.dtype);
  const size_t data_at = header_at + header_len;
  if (bytes.size() - data_at != count * width)
    throw Error(file + ": holds " + std::to_string(bytes.size() - data_at) + " data bytes, the " +
                "shape needs " + std::to_string(count * width));
  a.values.resize(count);
  const char* p = bytes.data() + data_at;
  for (uint64_t i = 0; i < count; ++i, p += width) {
    if (a.dtype == "<f4") {
      float v;
      std::memcpy(&v, p, 4);
      a.values[i] = v;
    } else if (a.dtype == "<f8") {
      std::memcpy(&a.values[i], p, 8);
    } else {
      int64_t v;
      std::memcpy(&v, p, 8);
      a.values[i] = static_cast<double>(v);
    }
  }
  return a;
}

}  // namespace bufferlab::testing
