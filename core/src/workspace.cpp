// Workspace: bounds-checked resolution of TensorRefs.
#include "bufferlab/core/workspace.h"

#include <string>
#include <utility>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab {

Workspace::Workspace(Layout layout, std::shared_ptr<std::byte> arena,
                     std::shared_ptr<std::byte> weights, uint64_t weights_bytes, MemorySpace where)
    : layout_(std::move(layout)),
      arena_(std::move(arena)),
      weights_(std::move(weights)),
      weights_bytes_(weights_bytes),
      where_(where) {}

std::byte* Workspace::buffer_base(BufferId id) const {
  const LayoutEntry e = layout_.entry(id);
  if (e.is_null() || !arena_) return nullptr;
  return arena_.get() + e.offset;
}

std::byte* Workspace::resolve(const TensorRef& t) const {
  const uint64_t end = (Size(t.offset) + t.bytes()).value();
  if (t.space == Space::weights) {
    if (end > weights_bytes_ || !weights_)
      throw Error("tensor " + t.to_string() + " ends at byte " + std::to_string(end) +
                  " past the weight pool of " + std::to_string(weights_bytes_) + " bytes");
    return weights_.get() + t.offset;
  }
  const LayoutEntry e = layout_.entry(t.buffer);
  if (e.is_null()) throw Error("tensor " + t.to_string() + " refers to a null buffer");
  if (end > e.bytes)
    throw Error("tensor " + t.to_string() + " ends at byte " + std::to_string(end) +
                " past its buffer of " + std::to_string(e.bytes) + " bytes");
  return arena_.get() + e.offset + t.offset;
}

}  // namespace bufferlab
