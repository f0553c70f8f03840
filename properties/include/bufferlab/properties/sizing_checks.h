// The sizing and layout properties as plain functions: each returns the violations it finds
// (empty = holds). The property tests and `bufferlab fuzz` call the same bodies, and tests
// feed each check a planted bug to show it can fail.
#pragma once

#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"

namespace bufferlab::checks {

using Violations = std::vector<std::string>;

// Non-null entries are aligned and pairwise disjoint (redzones included) and inside the arena.
Violations layout_disjoint_and_aligned(const std::vector<LayoutEntry>& entries, uint64_t alignment,
                                       uint64_t redzone, uint64_t arena_bytes);

// A field is 0 exactly when it is a "null when 0" field whose feature is off (docs/spec/buffers.md
// §3); every other field is > 0. The expected-null conditions are written here from the spec,
// independently of the sizing code.
Violations null_fields_as_specified(const ModelConfig& c, const Target& t, const BufferSizes& s);

// total_bytes() == Σ every field == Σ allocations, every field in the layout and the JSON.
Violations ledger_complete(const BufferSizes& s, const Layout& layout);

// Every field of `larger` ≥ the same field of `smaller` (run shape grew, nothing else).
Violations sizes_not_decreasing(const BufferSizes& smaller, const BufferSizes& larger);

// Arena bytes are the same for two configs that differ only in num_hidden_layers.
Violations arena_independent_of_layers(const Layout& a, const Layout& b);

// The config with another layer count; a layer_types pattern is cycled to the new length.
ModelConfig with_num_hidden_layers(ModelConfig config, uint64_t layers);

// Every check above on one case (default alignment 256; the layer count doubled plus one;
// m grown by one), each violation prefixed with the check's name. What the corpus replay
// and `fuzz` run per case.
Violations sizing_case(const ModelConfig& config, const RunShape& shape, const Target& target,
                       Sizing sizing);

}  // namespace bufferlab::checks
