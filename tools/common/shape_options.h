// The run-shape options shared by `plan` and `verify` (--max-batch-tokens, --max-seq-len,
// --kv-block-size, --max-batch-size) with the defaults of docs/spec/buffers.md §2, kept as text
// and parsed by parse_u64 (see parse_number.h for why) into a validated RunShape.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "bufferlab/core/run_shape.h"

namespace bufferlab::cli {

class ShapeOptions {
 public:
  void add_options(CLI::App& command);
  // Parses the four options in order, then RunShape::validate; throws Error naming the bad one.
  RunShape shape() const;
  bool max_batch_tokens_given() const { return max_batch_tokens_option_->count() > 0; }

 private:
  std::string max_batch_tokens_ = "8192";
  std::string max_seq_len_ = "32768";
  std::string kv_block_size_ = "16";
  std::string max_batch_size_ = "32";
  CLI::Option* max_batch_tokens_option_ = nullptr;
};

}  // namespace bufferlab::cli
