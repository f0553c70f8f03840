// Workspace: an allocated arena (host or device) with its Layout, plus the weight pool.
// Resolving a TensorRef checks it lies inside its buffer, so a view can never silently
// address a neighbour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "bufferlab/core/layout.h"
#include "bufferlab/core/tensor_ref.h"

namespace bufferlab {

enum class MemorySpace { host, device };

class Workspace {
 public:
  Workspace() = default;
  // `arena` holds layout.arena_bytes() bytes, `weights` holds weights_bytes bytes; both are
  // owned through their deleters.
  Workspace(Layout layout, std::shared_ptr<std::byte> arena, std::shared_ptr<std::byte> weights,
            uint64_t weights_bytes, MemorySpace where);

  const Layout& layout() const { return layout_; }
  MemorySpace where() const { return where_; }
  std::byte* arena_base() const { return arena_.get(); }
  uint64_t weights_bytes() const { return weights_bytes_; }

  // Base of a buffer; nullptr for a null buffer.
  std::byte* buffer_base(BufferId id) const;
  // Address of a tensor; throws Error if it lies outside its buffer / the weight pool or
  // refers to a null buffer.
  std::byte* resolve(const TensorRef& t) const;
  template <class T>
  T* data(const TensorRef& t) const {
    return reinterpret_cast<T*>(resolve(t));
  }

 private:
  Layout layout_;
  std::shared_ptr<std::byte> arena_;
  std::shared_ptr<std::byte> weights_;
  uint64_t weights_bytes_ = 0;
  MemorySpace where_ = MemorySpace::host;
};

}  // namespace bufferlab
