// `plan --svg FILE`: the arena drawn to scale as a bar wrapped over a few rows, every buffer
// labelled (inside its block when it fits, else by a numbered call-out with a leader line),
// a legend with sizes, offsets and a bar per buffer, the largest buffers highlighted and the
// null buffers listed apart.
#pragma once

#include <string>

#include "plan/plan_request.h"

namespace bufferlab::cli {

std::string arena_svg(const PlanResult& plan);

}  // namespace bufferlab::cli
