// The Sinkhorn normalisation in FP32, the backends' arithmetic, on an hc × hc row-major matrix
// whose rows are already softmax-normalised: a column pass with eps, iters − 1 rounds of a row
// pass and a column pass with eps, and a last column pass without eps. Free of gtest, so the
// oracle's unit tests and the benchmarks' naive reference can share it.
#pragma once

#include <cstdint>

namespace bufferlab::testing {

// Divides column j of c by (e + its sum), for every j.
inline void fp32_sinkhorn_cols(float* c, uint64_t hc, float e) {
  for (uint64_t j = 0; j < hc; ++j) {
    float sum = 0.0f;
    for (uint64_t i = 0; i < hc; ++i) sum += c[i * hc + j];
    for (uint64_t i = 0; i < hc; ++i) c[i * hc + j] /= e + sum;
  }
}

// Divides row i of c by (e + its sum), for every i.
inline void fp32_sinkhorn_rows(float* c, uint64_t hc, float e) {
  for (uint64_t i = 0; i < hc; ++i) {
    float sum = 0.0f;
    for (uint64_t j = 0; j < hc; ++j) sum += c[i * hc + j];
    for (uint64_t j = 0; j < hc; ++j) c[i * hc + j] /= e + sum;
  }
}

inline void fp32_sinkhorn_iterations(float* c, uint64_t hc, uint64_t iters, float eps) {
  fp32_sinkhorn_cols(c, hc, eps);
  for (uint64_t t = 1; t < iters; ++t) {
    fp32_sinkhorn_rows(c, hc, eps);
    fp32_sinkhorn_cols(c, hc, eps);
  }
  fp32_sinkhorn_cols(c, hc, 0.0f);
}

}  // namespace bufferlab::testing
