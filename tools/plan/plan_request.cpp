// evaluate(): BufferSizes::from_config (or verify::tight_sizing) → Layout::build → plan_json,
// capacity_of.
#include "plan/plan_request.h"

#include "bufferlab/core/verify/high_water.h"
#include "common/capacity_text.h"

namespace bufferlab::cli {

const char* const kTightNote =
    "corrected's sub-layout parameters, every buffer at its high-water mark over the passes "
    "and paths `verify` walks (never below 256 B when non-null): clean over that grid by "
    "construction, and any buffer cut below its mark is a `verify --sizes` finding";

PlanResult evaluate(const PlanRequest& request) {
  PlanResult result{request.context, {}, {}, {}, request.sizing.to_string(), 0, {}};
  const PlanContext& c = request.context;
  if (request.tight) {
    result.sizes = verify::tight_sizing(request.config, c.shape, c.target, &result.tight_plans);
    result.sizing = "tight";
  } else {
    result.sizes = BufferSizes::from_config(request.config, c.shape, c.target, request.sizing);
  }
  result.layout = Layout::build(result.sizes, request.alignment, request.redzone);
  result.json = plan_json(result.sizes, result.layout, result.context);
  if (request.tight) {
    result.json["sizing"] = result.sizing;
    result.json["tight"] = {{"sub_layout_from", request.sizing.to_string()},
                            {"plans", result.tight_plans},
                            {"note", kTightNote}};
  }
  result.capacity = capacity_of(result.layout.arena_bytes(), c.target);
  result.json["capacity"] = capacity_json(result.capacity);
  return result;
}

}  // namespace bufferlab::cli
