// The transfers every harness makes (rmsnorm, routing, MoE/FFN, mHC): a footprint layout that
// holds the arena tensors an op touches, uploads that must match a tensor's element count
// exactly, and downloads of a whole tensor. Private to the oracle library.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"

namespace bufferlab::oracle::detail {

// Grows the tensor's buffer in `sizes` to hold it (weight-pool and empty tensors: nothing).
inline void grow_to_hold(BufferSizes& sizes, const TensorRef& t) {
  if (t.space != Space::arena || t.elements() == 0) return;
  uint64_t& bytes = sizes.bytes(t.buffer);
  bytes = std::max(bytes, (Size(t.offset) + t.bytes()).value());
}

// A layout whose buffers hold exactly the arena tensors of `accesses`.
inline Layout footprint_of(const std::vector<Access>& accesses) {
  BufferSizes sizes;
  for (const Access& a : accesses) grow_to_hold(sizes, a.tensor);
  return Layout::build(sizes);
}

// Uploads `host` into `t`; its element count must match the tensor's (no over-read).
template <class T>
void upload_exact(Backend& backend, const Workspace& ws, const TensorRef& t,
                  const std::vector<T>& host, const std::string& what = {}) {
  if (host.size() != t.elements())
    throw Error("upload " + (what.empty() ? std::string() : what + " ") + t.to_string() +
                ": host copy holds " + std::to_string(host.size()) + " elements, the tensor " +
                std::to_string(t.elements()));
  backend.upload(ws, t, host.data());
}

template <class T>
std::vector<T> read_back(Backend& backend, const Workspace& ws, const TensorRef& t) {
  std::vector<T> out(t.elements());
  backend.download(ws, t, out.data());
  return out;
}

}  // namespace bufferlab::oracle::detail
