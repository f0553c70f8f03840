// Row-major GEMMs on cuBLAS: Y[rows, N] = X[rows, K] · W[N, K]ᵀ, FP32 accumulate
// (CUBLAS_COMPUTE_32F), through the backend's one handle. Private to the CUDA backend.
#pragma once

#include "cuda_libraries.h"

#include <cstdint>

#include "cublas_context.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

// Row-major operands; ld* are row strides in elements. cuBLAS is column-major, so the call
// computes Yᵀ[N, rows] = op(W)[N, K] · Xᵀ[K, rows]: A = W (column-major [K, N], ld ldw,
// CUBLAS_OP_T), B = X (column-major [K, rows], ld ldx, CUBLAS_OP_N), C = Y (column-major
// [N, rows], ld ldy): cublasGemmEx(T, N, m = N, n = rows, k = K, α = 1, W, ldw, X, ldx,
// β = 0, Y, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT).
struct RowGemm {
  const void* x = nullptr;
  cudaDataType_t x_type = CUDA_R_16BF;
  uint64_t ldx = 0;
  const void* w = nullptr;
  cudaDataType_t w_type = CUDA_R_16BF;
  uint64_t ldw = 0;
  void* y = nullptr;
  cudaDataType_t y_type = CUDA_R_16BF;
  uint64_t ldy = 0;
  uint64_t rows = 0, N = 0, K = 0;
};

// Math mode per call: FP32 inputs run CUBLAS_PEDANTIC_MATH (no TF32, no tensor-core
// shortcuts); BF16 inputs CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION.
// Extents beyond cuBLAS's int range are an Error. Enqueued on the default stream.
void row_gemm(LibraryContext& ctx, const RowGemm& g);

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
