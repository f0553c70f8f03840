// NPY v1.0 writer.
#include "io/npy_writer.h"

#include <bit>
#include <fstream>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab::cli {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the NPY descriptors below say little-endian ('<'); raw data is written as is");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr size_t kPreambleBytes = kMagicBytes + 2 + 2;  // magic, version 1.0, header length
constexpr size_t kHeaderAlignment = 64;

std::string shape_tuple(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");  // a 1-tuple needs its comma in Python
}

}  // namespace

std::string npy_header(const std::string& descr, const std::vector<uint64_t>& shape) {
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_tuple(shape) + ", }";
  // Spaces, then a newline, so that preamble + dict ends on a 64-byte boundary.
  const size_t unpadded = kPreambleBytes + dict.size() + 1;
  dict.append((kHeaderAlignment - unpadded % kHeaderAlignment) % kHeaderAlignment, ' ');
  dict += '\n';
  if (dict.size() > 0xFFFF) throw Error("npy header of " + std::to_string(dict.size()) + " bytes");
  std::string header(kMagic, kMagicBytes);
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xFF);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

void write_npy_bytes(const std::string& path, const std::string& descr,
                     std::span<const std::byte> bytes, size_t elements,
                     const std::vector<uint64_t>& shape) {
  Size expected = 1;
  for (uint64_t d : shape) expected = expected * d;
  if (expected.value() != elements)
    throw Error("npy " + path + ": " + std::to_string(elements) + " elements for shape " +
                shape_tuple(shape));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string header = npy_header(descr, shape);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error("cannot write " + path);
}

}  // namespace bufferlab::cli
