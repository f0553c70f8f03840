// RunShape: the engine's run limits that size the per-pass arena (docs/spec/buffers.md §2).
#pragma once

#include <cstdint>

namespace bufferlab {

struct RunShape {
  uint64_t max_batch_tokens = 8192;  // m ≥ 1
  uint64_t max_seq_len = 32768;      // ≥ 1
  uint64_t kv_block_size = 16;       // 0 = no paged KV (max_blocks = 256)
  uint64_t max_batch_size = 32;      // ≥ 1

  // Throws Error naming the field when max_batch_tokens, max_seq_len or max_batch_size is 0.
  void validate() const;

  friend bool operator==(const RunShape&, const RunShape&) = default;
};

}  // namespace bufferlab
