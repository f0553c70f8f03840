// The machine-readable plan (docs/spec/buffers.md §3): every registry buffer in layout order —
// null ones with "bytes": 0 and "offset": null — plus total_bytes and arena_bytes. The CLI's
// `plan --json` prints exactly this; the registry-completeness check reads it back.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"

namespace bufferlab {

struct PlanContext {
  std::string model;  // preset name or config file
  RunShape shape;
  Target target;
};

// The plan JSON's "sub_layout" object as (key, value) pairs: one per SubLayoutParams field.
// `--sizes` compares a file's sub_layout against these same pairs.
std::vector<std::pair<const char*, uint64_t>> sub_layout_entries(const SubLayoutParams& p);

nlohmann::json plan_json(const BufferSizes& sizes, const Layout& layout, const PlanContext& ctx);

// Registry completeness (bug catalogue B12): every registry field must appear in the
// layout's entries and in the plan JSON, with the same byte count as BufferSizes; and the
// ledger must add up: total_bytes == Σ fields == Σ allocations (B8). Returns one line per
// gap, naming the field; empty when complete.
std::vector<std::string> registry_gaps(const BufferSizes& sizes, const Layout& layout,
                                       const nlohmann::json& plan);

}  // namespace bufferlab
