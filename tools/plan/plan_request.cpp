// evaluate(): BufferSizes::from_config → Layout::build → plan_json, capacity_of.
#include "plan/plan_request.h"

namespace bufferlab::cli {

PlanResult evaluate(const PlanRequest& request) {
  PlanResult result{request.context, {}, {}, {}, {}};
  result.sizes = BufferSizes::from_config(request.config, request.context.shape,
                                          request.context.target, request.sizing);
  result.layout = Layout::build(result.sizes, request.alignment, request.redzone);
  result.json = plan_json(result.sizes, result.layout, result.context);
  result.capacity = capacity_of(result.layout.arena_bytes(), request.context.target);
  return result;
}

}  // namespace bufferlab::cli
