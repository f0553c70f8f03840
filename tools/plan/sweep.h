// `plan --sweep max-batch-tokens=A:B`: the plan evaluated at A, B and every power of two
// between them, printed as one row per point (totals and the three largest buffers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "plan/plan_request.h"

namespace bufferlab::cli {

struct SweepRange {
  uint64_t first = 0;
  uint64_t last = 0;
};

// Parses "max-batch-tokens=A:B" with 1 ≤ A ≤ B; throws bufferlab::Error otherwise.
SweepRange parse_sweep(const std::string& spec);

// A, B and the powers of two strictly between them, ascending, without duplicates.
std::vector<uint64_t> sweep_points(const SweepRange& range);

// `base` evaluated at each point's max_batch_tokens.
std::vector<PlanResult> run_sweep(const PlanRequest& base, const std::vector<uint64_t>& points);

// The `n` largest non-null buffers of a plan, largest first (ties in layout order).
std::vector<BufferId> largest_buffers(const PlanResult& plan, size_t n);

void print_sweep_table(std::FILE* out, const std::vector<PlanResult>& sweep);

}  // namespace bufferlab::cli
