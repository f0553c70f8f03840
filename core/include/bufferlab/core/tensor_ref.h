// TensorRef and Access: a typed view into the workspace (arena buffer or weight pool) and
// how a step touches it. Op descriptors describe their operands with these.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bufferlab/core/buffer_registry.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/dtype.h"

namespace bufferlab {

// arena: a per-pass workspace buffer; weights: the backend's weight pool (outside the
// per-pass arena, like model weights in the engine).
enum class Space { arena, weights };

struct TensorRef {
  Space space = Space::arena;
  BufferId buffer = BufferId::hidden_states;  // ignored for Space::weights
  uint64_t offset = 0;                        // bytes from the buffer (or pool) start
  std::vector<uint64_t> shape;
  DType dtype = DType::u8;

  uint64_t elements() const;      // product of shape (checked)
  uint64_t bytes() const;         // elements · dtype size (packed FP4: two per byte)
  std::string to_string() const;  // "norm_output+0 bf16[7,2048]"
};

// phantom_write: padding rows a GEMM writes that nobody may read (docs/spec/buffers.md §5 "Phantom
// rows"). An arena tensor `offset` bytes into `buffer`, and a weight-pool tensor (weights, KV
// cache, recurrent state: storage outside the per-pass arena). Every op descriptor builds its
// operands with these.
TensorRef arena_tensor(BufferId buffer, uint64_t offset, std::vector<uint64_t> shape, DType t);
TensorRef pool_tensor(std::vector<uint64_t> shape, DType t);
// With an offset computed in checked arithmetic (throws Error on overflow).
inline TensorRef arena_tensor(BufferId buffer, Size offset, std::vector<uint64_t> shape, DType t) {
  return arena_tensor(buffer, offset.value(), std::move(shape), t);
}

enum class AccessKind { read, write, phantom_write };
const char* to_string(AccessKind k);
bool is_write(AccessKind k);  // write or phantom_write

struct Access {
  TensorRef tensor;
  AccessKind kind = AccessKind::read;
  // The datum this access reads or writes, for the verifier's liveness check: a read of
  // value V must find, in every byte, the last write to have been a write of V. Names
  // starting with '@' are pass-wide (the residual stream, uploaded metadata); the plan
  // builder scopes every other name to its layer. Empty: not tracked by value (bounds,
  // overlap, races and read-before-write still apply).
  std::string value = {};

  uint64_t begin() const { return tensor.offset; }
  uint64_t end() const { return tensor.offset + tensor.bytes(); }
};

}  // namespace bufferlab
