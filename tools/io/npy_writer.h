// NPY v1.0 files (NumPy's array format), written without NumPy: a magic string, a Python-dict
// header naming dtype and shape, padded to a multiple of 64 bytes, then the raw little-endian
// data in C order. NumPy has no BF16: BF16 tensors are written as their raw bits ('<u2') and
// the dump's manifest names the format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace bufferlab::cli {

// The header block (magic, version, length, dict, padding) for `descr` ('<u2', '<f4', '<f8')
// and `shape`. Throws bufferlab::Error if the dict does not fit the v1.0 16-bit length.
std::string npy_header(const std::string& descr, const std::vector<uint64_t>& shape);

// The descriptor of the element types written: '<u2' (also BF16 bits), '<u4', '<f4', '<f8'.
template <class T>
constexpr const char* npy_descr() {
  static_assert(std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t> ||
                    std::is_same_v<T, float> || std::is_same_v<T, double>,
                "no NPY descriptor for this element type");
  if constexpr (std::is_same_v<T, uint16_t>) return "<u2";
  if constexpr (std::is_same_v<T, uint32_t>) return "<u4";
  if constexpr (std::is_same_v<T, float>) return "<f4";
  return "<f8";
}

// Writes `path`: the header for `descr` and `shape`, then `bytes`, which hold `elements`
// elements; the element count must equal the product of `shape`. Throws bufferlab::Error
// naming the path when it cannot be written.
void write_npy_bytes(const std::string& path, const std::string& descr,
                     std::span<const std::byte> bytes, size_t elements,
                     const std::vector<uint64_t>& shape);

// write_npy_bytes for the elements of `data`, with their descriptor.
template <class T>
void write_npy(const std::string& path, std::span<const T> data,
               const std::vector<uint64_t>& shape) {
  write_npy_bytes(path, npy_descr<T>(), std::as_bytes(data), data.size(), shape);
}

}  // namespace bufferlab::cli
