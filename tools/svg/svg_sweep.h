// `plan --sweep ... --svg FILE`: a line plot of the workspace against max_batch_tokens
// (log2 x axis, log2 y axis): total and arena bytes plus the buffers that dominate it.
#pragma once

#include <string>
#include <vector>

#include "plan/plan_request.h"

namespace bufferlab::cli {

std::string sweep_svg(const std::vector<PlanResult>& sweep);

}  // namespace bufferlab::cli
