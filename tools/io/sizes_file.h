// `verify --sizes FILE`: verify a given set of buffer byte counts — the JSON `plan --json`
// prints — instead of the ones BufferLab computes. The sub-layout parameters (offsets inside
// scratch, m_pad, R, ...) still come from the sizing chosen on the command line: the file
// gives byte counts only.
#pragma once

#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/run_shape.h"
#include "bufferlab/core/target.h"

namespace bufferlab::cli {

struct SizesFile {
  std::string path;
  std::string sizing;  // the file's "sizing" field ("unknown" when absent)
  // Sub-layout parameters the file lists with a value other than the one verified with,
  // as "name file=X verified=Y".
  std::vector<std::string> sub_layout_differences;
};

// Replaces the byte count of every registry buffer in `sizes` with the file's. Throws Error
// naming the file and the field when the file is unreadable or malformed, a buffer is
// missing or its "bytes" is not a non-negative integer, or the file's run_shape / target
// disagree with the ones being verified.
SizesFile apply_sizes_file(const std::string& path, const RunShape& shape, const Target& target,
                           BufferSizes& sizes);

}  // namespace bufferlab::cli
