// RunShape validation.
#include "bufferlab/core/run_shape.h"

#include <string>

#include "bufferlab/core/error.h"

namespace bufferlab {

void RunShape::validate() const {
  if (max_batch_tokens == 0) throw Error("max_batch_tokens = 0: a pass needs at least one token");
  if (max_batch_size == 0) throw Error("max_batch_size = 0: decode needs at least one sequence");
}

}  // namespace bufferlab
