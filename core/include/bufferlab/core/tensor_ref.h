// TensorRef and Access: a typed view into the workspace (arena buffer or weight pool) and
// how a step touches it. Op descriptors describe their operands with these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/buffer_registry.h"
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

enum class AccessKind { read, write, phantom_write };
const char* to_string(AccessKind k);

struct Access {
  TensorRef tensor;
  AccessKind kind = AccessKind::read;
};

}  // namespace bufferlab
