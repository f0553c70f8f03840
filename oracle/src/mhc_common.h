// Helpers shared by the mHC oracle sources (private to oracle/src).
#pragma once

#include <cstdint>
#include <string>

namespace bufferlab::oracle::mhc_detail {

// Error naming the op when a host copy does not hold the elements the op needs.
void require_size(const std::string& params, const char* what, uint64_t got, uint64_t want);
// Checked product.
uint64_t mul(uint64_t a, uint64_t b);
bool all_finite(const float* x, uint64_t n);
// 1 / sqrt(Σ x² / n + eps) in FP64.
double rms_factor(const float* x, uint64_t n, double eps);
double sigmoid(double z);
double silu(double z);
double bf16_value(uint16_t bits);

}  // namespace bufferlab::oracle::mhc_detail
