// Layout: where each buffer lives in the one per-pass arena (docs/spec/buffers.md §3 "Layout").
// The same Layout is used on host and device. Null (zero-byte) buffers get no storage.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"

namespace bufferlab {

struct LayoutEntry {
  BufferId id;
  uint64_t offset = 0;  // meaningless when bytes == 0
  uint64_t bytes = 0;
  bool is_null() const { return bytes == 0; }
  uint64_t end() const { return offset + bytes; }
};

class Layout {
 public:
  // alignment: a power of two ≥ 1; redzone: bytes left unused after each buffer (tests fill
  // them with a canary). Throws Error on a bad alignment or an arena overflowing 64 bits.
  static Layout build(const BufferSizes& sizes, uint64_t alignment = 256, uint64_t redzone = 0);

  // One entry per buffer the layout placed, in layout order.
  const std::vector<LayoutEntry>& entries() const { return entries_; }
  // The entry of `id`; a null entry if the layout did not place it.
  LayoutEntry entry(BufferId id) const;
  uint64_t arena_bytes() const { return arena_bytes_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t redzone() const { return redzone_; }
  // Σ of the placed buffers' bytes (excludes padding and redzones).
  uint64_t allocated_bytes() const;

 private:
  std::vector<LayoutEntry> entries_;
  uint64_t arena_bytes_ = 0;
  uint64_t alignment_ = 256;
  uint64_t redzone_ = 0;
};

}  // namespace bufferlab
