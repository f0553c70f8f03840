// One `plan` evaluation: the inputs the command line chose (model, run shape, target,
// sizing, layout parameters) and what they produce (BufferSizes, Layout, the plan JSON, the
// arena's share of the target's memory).
// Shared by the table, the sweep and the SVG writers so they all see the same numbers.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/capacity.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/plan_report.h"

namespace bufferlab::cli {

struct PlanRequest {
  ModelConfig config;
  PlanContext context;  // model label, run shape, target
  Sizing sizing = Sizing::spec();
  // --sizing tight: `sizing` is corrected (the sub-layout parameters) and every buffer is cut
  // to its high-water mark over verify's grid (verify::tight_sizing).
  bool tight = false;
  uint64_t alignment = 256;
  uint64_t redzone = 0;
};

struct PlanResult {
  PlanContext context;
  BufferSizes sizes;
  Layout layout;
  // plan_json(sizes, layout, context) and "capacity" (capacity_json); for tight, "sizing" says
  // "tight" and "tight" says how the bytes were found.
  nlohmann::json json;
  std::string sizing;        // "spec", "corrected+B8", "tight"
  uint64_t tight_plans = 0;  // tight: the plans the high-water marks came from
  Capacity capacity;         // the arena against the target's device memory
};

// What `plan --sizing tight` promises, said in the table and the JSON.
extern const char* const kTightNote;

// Sizes and lays out the arena; throws bufferlab::Error for invalid input or overflow.
PlanResult evaluate(const PlanRequest& request);

}  // namespace bufferlab::cli
