// The human-readable `plan` output: a header (model, run shape, target, sizing, sub-layout
// parameters), one row per registry buffer, and the totals.
#pragma once

#include <cstdio>

#include "plan/plan_request.h"

namespace bufferlab::cli {

void print_plan_table(std::FILE* out, const PlanResult& plan);

}  // namespace bufferlab::cli
