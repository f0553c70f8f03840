// ShapeOptions: the four run-shape option declarations and their parsing.
#include "common/shape_options.h"

#include "common/parse_number.h"

namespace bufferlab::cli {

void ShapeOptions::add_options(CLI::App& command) {
  const auto add = [&command](const std::string& name, std::string& text, const std::string& help) {
    return command.add_option(name, text, help)->type_name("N")->capture_default_str();
  };
  max_batch_tokens_option_ =
      add("--max-batch-tokens", max_batch_tokens_, "m: tokens per pass (>= 1)");
  add("--max-seq-len", max_seq_len_, "longest sequence (>= 1)");
  add("--kv-block-size", kv_block_size_, "paged-KV block size (0 = not paged)");
  add("--max-batch-size", max_batch_size_, "decode sequences per step (>= 1)");
}

RunShape ShapeOptions::shape() const {
  RunShape s;
  s.max_batch_tokens = parse_u64("--max-batch-tokens", max_batch_tokens_);
  s.max_seq_len = parse_u64("--max-seq-len", max_seq_len_);
  s.kv_block_size = parse_u64("--kv-block-size", kv_block_size_);
  s.max_batch_size = parse_u64("--max-batch-size", max_batch_size_);
  s.validate();
  return s;
}

}  // namespace bufferlab::cli
