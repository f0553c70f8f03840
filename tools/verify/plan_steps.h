// `bufferlab verify --pass PASS [--paths PATHS]`: one plan printed step by step — every
// access with its byte range and value — followed by that plan's findings.
#pragma once

#include <cstdio>
#include <string>

#include "bufferlab/core/layout.h"
#include "bufferlab/core/plan/pass_plan.h"

namespace bufferlab::cli {

// Prints the plan and its findings; returns the exit code (0 clean, 1 findings).
int print_plan_steps(std::FILE* out, const plan::PassPlan& plan, const Layout& layout);

}  // namespace bufferlab::cli
