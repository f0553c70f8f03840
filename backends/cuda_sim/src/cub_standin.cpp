// The simulator's cub::DeviceRadixSort::SortPairs for 32-bit keys and values (the MoE
// grouping's sort): CUB's documented contract — the temporary-storage query, a stable LSD
// radix sort of key bits [begin_bit, end_bit), the sorted pairs in the buffers the
// DoubleBuffer selectors name afterwards — with every range reported through library_access
// before it is touched.
//
// Behaviour the backend must not rely on beyond CUB's contract:
//  - Temporary storage: the query answers 1024 + 4·n bytes (256 digit counters and one
//    destination index per item). That is the stand-in's own number, not CUB's; the backend
//    must size its buffer from the query only.
//  - Where the result lands: each pass of 8 key bits sorts from the Current() buffers into the
//    Alternate() ones and flips both selectors, so after ceil((end_bit − begin_bit) / 8)
//    passes the result is in the original Alternate() buffers when that count is odd and back
//    in the original Current() ones when it is even. CUB may end in either; the backend must
//    read keys.Current() / values.Current(). Both buffers' contents may change, as CUB allows.
//  - The stream is not used: the simulator runs the sort synchronously when it is called.
#include <cstdint>
#include <cstring>

#include "bufferlab/cuda_sim/cub_shim.h"
#include "memory_checks.h"

namespace bufferlab::sim::device::cub {
namespace {

constexpr int kDigitBits = 8;
constexpr uint32_t kBuckets = 1u << kDigitBits;
constexpr size_t kCounterBytes = kBuckets * sizeof(uint32_t);

size_t temp_bytes_for(int n) { return kCounterBytes + static_cast<size_t>(n) * sizeof(uint32_t); }

int pass_count(int begin_bit, int end_bit) {
  return (end_bit - begin_bit + kDigitBits - 1) / kDigitBits;
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

// The four item buffers and the temporary storage must be disjoint: a pass reads one pair
// while it writes the other, and CUB's buffers are distinct by contract.
bool disjoint_buffers(const DoubleBuffer<uint32_t>& keys, const DoubleBuffer<uint32_t>& values,
                      const void* temp, size_t temp_bytes, int n) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(uint32_t);
  const void* items[4] = {keys.d_buffers[0], keys.d_buffers[1], values.d_buffers[0],
                          values.d_buffers[1]};
  for (int i = 0; i < 4; ++i) {
    if (overlaps(items[i], bytes, temp, temp_bytes)) return false;
    for (int j = i + 1; j < 4; ++j)
      if (overlaps(items[i], bytes, items[j], bytes)) return false;
  }
  return true;
}

// Reports the ranges of every pass in the order the passes touch them (a later pass reads
// what an earlier one wrote), before any memory is touched.
bool report_passes(const DoubleBuffer<uint32_t>& keys, const DoubleBuffer<uint32_t>& values,
                   void* temp, int n, int passes) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(uint32_t);
  bool ok = true;
  for (int p = 0; p < passes; ++p) {
    const int src = (keys.selector + p) & 1, vsrc = (values.selector + p) & 1;
    ok &= library_access("cub::DeviceRadixSort keys", keys.d_buffers[src], bytes, Touch::read);
    ok &= library_access("cub::DeviceRadixSort values", values.d_buffers[vsrc], bytes, Touch::read);
    ok &= library_access("cub::DeviceRadixSort temp", temp, temp_bytes_for(n), Touch::write);
    ok &= library_access("cub::DeviceRadixSort keys", keys.d_buffers[src ^ 1], bytes, Touch::write);
    ok &= library_access("cub::DeviceRadixSort values", values.d_buffers[vsrc ^ 1], bytes,
                         Touch::write);
  }
  return ok;
}

// One stable counting-sort pass on the digit (key >> shift) & mask: count each digit, turn
// the counts into each digit's first output slot, give every item (in input order, which is
// what keeps equal digits in their input order) the next slot of its digit, then scatter.
void sort_pass(DoubleBuffer<uint32_t>& keys, DoubleBuffer<uint32_t>& values, int n, int shift,
               int bits, void* temp) {
  auto* counts = static_cast<uint32_t*>(temp);
  uint32_t* dest = counts + kBuckets;
  const uint32_t mask = (1u << bits) - 1u;
  const uint32_t* kin = keys.Current();
  const uint32_t* vin = values.Current();
  std::memset(counts, 0, kCounterBytes);
  for (int i = 0; i < n; ++i) ++counts[(kin[i] >> shift) & mask];
  uint32_t next = 0;
  for (uint32_t d = 0; d < kBuckets; ++d) {
    const uint32_t c = counts[d];
    counts[d] = next;
    next += c;
  }
  for (int i = 0; i < n; ++i) dest[i] = counts[(kin[i] >> shift) & mask]++;
  uint32_t* kout = keys.Alternate();
  uint32_t* vout = values.Alternate();
  for (int i = 0; i < n; ++i) {
    kout[dest[i]] = kin[i];
    vout[dest[i]] = vin[i];
  }
  keys.selector ^= 1;
  values.selector ^= 1;
}

}  // namespace

cudaError_t sort_pairs_u32(void* temp, size_t& temp_bytes, DoubleBuffer<uint32_t>& keys,
                           DoubleBuffer<uint32_t>& values, int n, int begin_bit, int end_bit,
                           cudaStream_t /*stream: see the file comment*/) {
  if (n < 0 || begin_bit < 0 || begin_bit >= end_bit || end_bit > 32) return cudaErrorInvalidValue;
  const size_t need = temp_bytes_for(n);
  if (temp == nullptr) {
    temp_bytes = need;
    return cudaSuccess;
  }
  if (temp_bytes < need) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;  // nothing to order; no buffer is touched
  if (!disjoint_buffers(keys, values, temp, need, n)) return cudaErrorInvalidValue;
  const int passes = pass_count(begin_bit, end_bit);
  // A range outside the live allocations is what the sort's kernels would fault on.
  if (!report_passes(keys, values, temp, n, passes)) return cudaErrorIllegalAddress;
  for (int p = 0; p < passes; ++p) {
    const int shift = begin_bit + p * kDigitBits;
    const int bits = end_bit - shift < kDigitBits ? end_bit - shift : kDigitBits;
    sort_pass(keys, values, n, shift, bits, temp);
  }
  return cudaSuccess;
}

}  // namespace bufferlab::sim::device::cub
