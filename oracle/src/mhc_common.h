// Helpers shared by the mHC oracle sources (private to oracle/src); the ones other families use
// too (require_size, sigmoid, silu, bf16_value, ...) are in oracle_common.h.
#pragma once

#include <cstdint>

#include "oracle_common.h"

namespace bufferlab::oracle {

bool all_finite(const float* x, uint64_t n);
// 1 / sqrt(Σ x² / n + eps) in FP64.
double rms_factor(const float* x, uint64_t n, double eps);

}  // namespace bufferlab::oracle
