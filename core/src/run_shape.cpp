// RunShape validation: every limit that counts tokens or sequences is at least 1 (a 0 would
// size nothing yet let the verifier "pass" plans of a shape no engine runs);
// docs/spec/buffers.md §2.1.
#include "bufferlab/core/run_shape.h"

#include <string>

#include "bufferlab/core/error.h"

namespace bufferlab {

void RunShape::validate() const {
  if (max_batch_tokens == 0) throw Error("max_batch_tokens = 0: a pass needs at least one token");
  if (max_seq_len == 0) throw Error("max_seq_len = 0: a sequence needs at least one token");
  if (max_batch_size == 0) throw Error("max_batch_size = 0: decode needs at least one sequence");
  // kv_block_size 0 is legal: the KV cache is not paged (max_blocks = 256).
}

}  // namespace bufferlab
