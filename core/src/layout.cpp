// Layout::build: buffers in registry order, each non-null one at an aligned offset, with an
// optional redzone after each (docs/spec/buffers.md §3 "Layout").
#include "bufferlab/core/layout.h"

#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab {

Layout Layout::build(const BufferSizes& sizes, uint64_t alignment, uint64_t redzone) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw Error("alignment = " + std::to_string(alignment) + ": must be a power of two >= 1");
  Layout layout;
  layout.alignment_ = alignment;
  layout.redzone_ = redzone;
  Size cursor = 0;
  for (const auto& info : kBufferRegistry) {
    // B12: a buffer added to the arena but left out of an enumeration.
    if (sizes.sizing.is(Mutant::B12) && info.id == BufferId::norm_unit_w) continue;
    LayoutEntry e{info.id, 0, sizes.bytes(info.id)};
    if (!e.is_null()) {
      try {
        e.offset = align_up(cursor, alignment).value();
        cursor = Size(e.offset) + e.bytes + redzone;
      } catch (const OverflowError& err) {
        throw Error("arena offset of " + std::string(info.name) +
                    " overflows 64 bits: " + err.what());
      }
    }
    layout.entries_.push_back(e);
  }
  layout.arena_bytes_ = cursor.value();
  return layout;
}

LayoutEntry Layout::entry(BufferId id) const {
  for (const auto& e : entries_)
    if (e.id == id) return e;
  return LayoutEntry{id, 0, 0};
}

uint64_t Layout::allocated_bytes() const {
  Size total = 0;
  for (const auto& e : entries_) total += e.bytes;
  return total.value();
}

}  // namespace bufferlab
