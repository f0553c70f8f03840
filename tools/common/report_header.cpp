// The model and run-shape header lines (report_header.h).
#include "common/report_header.h"

#include <fmt/format.h>

namespace bufferlab::cli {

void print_model_and_shape(std::FILE* out, const std::string& model, const RunShape& shape) {
  fmt::print(out, "model:      {}\n", model);
  fmt::print(out,
             "run shape:  max_batch_tokens {}, max_seq_len {}, kv_block_size {}, "
             "max_batch_size {}\n",
             shape.max_batch_tokens, shape.max_seq_len, shape.kv_block_size, shape.max_batch_size);
}

}  // namespace bufferlab::cli
