// NPY v1.0 files (NumPy's array format), written without NumPy: a magic string, a Python-dict
// header naming dtype and shape, padded to a multiple of 64 bytes, then the raw little-endian
// data in C order. NumPy has no BF16: BF16 tensors are written as their raw bits ('<u2') and
// the dump's manifest names the format.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bufferlab::cli {

// The header block (magic, version, length, dict, padding) for `descr` ('<u2', '<f4', '<f8')
// and `shape`. Throws bufferlab::Error if the dict does not fit the v1.0 16-bit length.
std::string npy_header(const std::string& descr, const std::vector<uint64_t>& shape);

// Writes `path`; the element count must equal the product of `shape`. Throws bufferlab::Error
// naming the path when it cannot be written.
void write_npy(const std::string& path, std::span<const uint16_t> data,
               const std::vector<uint64_t>& shape);
void write_npy(const std::string& path, std::span<const float> data,
               const std::vector<uint64_t>& shape);
void write_npy(const std::string& path, std::span<const double> data,
               const std::vector<uint64_t>& shape);
void write_npy(const std::string& path, std::span<const uint32_t> data,
               const std::vector<uint64_t>& shape);

}  // namespace bufferlab::cli
