// The simulator's cuBLAS: the handle calls and cublasGemmEx for the type combinations the
// backend uses, with cuBLAS's documented argument checks and one stated summation order, so a
// GEMM result is a pure function of its inputs. Every operand range is reported through
// library_access before the memory is touched, so an out-of-allocation operand becomes a
// finding and CUBLAS_STATUS_INVALID_VALUE instead of a host crash.
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_set>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/cuda_sim/cublas_shim.h"
#include "memory_checks.h"

// The sums below are specified operation by operation; a fused multiply-add would round once
// where the stated order rounds twice. The build passes -ffp-contract=off; Clang also honours
// the pragma, and the product goes through a volatile so no compiler can fuse it.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace bufferlab::sim::device {

// The handle: what cuBLAS keeps per handle and the backend sets. The stream, workspace and
// atomics mode change nothing in the stand-in's arithmetic (it runs synchronously, needs no
// workspace and never uses atomics); they are kept so the calls behave as documented.
struct cublasContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;  // null: cuBLAS's own pool
  size_t workspace_bytes = 0;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasAtomicsMode_t atomics_mode = CUBLAS_ATOMICS_NOT_ALLOWED;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
};

namespace {

// Live handles, so a destroyed or made-up handle is reported as cuBLAS reports an
// uninitialised one instead of being dereferenced.
std::mutex handles_mutex;
std::unordered_set<const cublasContext*>& live_handles() {
  static std::unordered_set<const cublasContext*> handles;
  return handles;
}

bool is_live(const cublasContext* h) {
  if (h == nullptr) return false;
  std::lock_guard<std::mutex> lock(handles_mutex);
  return live_handles().count(h) != 0;
}

// ---- Operands ----

size_t element_bytes(cudaDataType t) { return t == CUDA_R_16BF ? 2 : 4; }

// One matrix as stored: `rows` × `cols` column-major with leading dimension `ld`.
struct Stored {
  const void* p = nullptr;
  cudaDataType type = CUDA_R_32F;
  int64_t rows = 0, cols = 0, ld = 1;

  // Bytes from p to the last element touched: ld·(cols − 1) + rows elements.
  size_t span_bytes() const {
    if (rows == 0 || cols == 0) return 0;
    return static_cast<size_t>(ld * (cols - 1) + rows) * element_bytes(type);
  }
  // Element (r, c) widened to FP32; BF16 → FP32 is exact.
  float at(int64_t r, int64_t c) const {
    const int64_t i = r + c * ld;
    if (type == CUDA_R_16BF) {
      uint16_t b;
      std::memcpy(&b, static_cast<const char*>(p) + i * 2, 2);
      return bf16_bits_to_f32(b);
    }
    float f;
    std::memcpy(&f, static_cast<const char*>(p) + i * 4, 4);
    return f;
  }
};

// op(X) as an m-like × k-like view: element (r, c) of op(X) is X(r, c) or X(c, r).
struct OpView {
  Stored s;
  bool trans = false;
  float at(int64_t r, int64_t c) const { return trans ? s.at(c, r) : s.at(r, c); }
};

// op(X) of shape op_rows × op_cols, stored as op_rows × op_cols (N) or op_cols × op_rows
// (T, and C, which is T for real types).
OpView make_view(const void* p, cudaDataType type, int ld, cublasOperation_t op, int op_rows,
                 int op_cols) {
  OpView v;
  v.trans = op != CUBLAS_OP_N;
  v.s.p = p;
  v.s.type = type;
  v.s.ld = ld;
  v.s.rows = v.trans ? op_cols : op_rows;
  v.s.cols = v.trans ? op_rows : op_cols;
  return v;
}

bool valid_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// lda ≥ max(1, rows of A as stored), and likewise for B (the BLAS rule cuBLAS documents).
bool valid_ld(int ld, cublasOperation_t op, int op_rows, int op_cols) {
  const int stored_rows = op == CUBLAS_OP_N ? op_rows : op_cols;
  return ld >= (stored_rows > 1 ? stored_rows : 1);
}

// cuBLAS's table for CUBLAS_COMPUTE_32F and _PEDANTIC (scale type FP32) lists, among the real
// types the backend can use: BF16·BF16 → BF16, BF16·BF16 → FP32 and FP32·FP32 → FP32. There
// is no FP32·FP32 → BF16 row and no mixed A/B row, so those are NOT_SUPPORTED as on the GPU.
// The backend uses exactly these three; FP16, INT8, FP64 and complex rows are left out.
bool supported_types(cudaDataType a, cudaDataType b, cudaDataType c, cublasComputeType_t ct) {
  if (ct != CUBLAS_COMPUTE_32F && ct != CUBLAS_COMPUTE_32F_PEDANTIC) return false;
  if (a != b) return false;
  if (a == CUDA_R_16BF) return c == CUDA_R_16BF || c == CUDA_R_32F;
  return a == CUDA_R_32F && c == CUDA_R_32F;
}

// Reads a scalar: a host float, or in device pointer mode a float in device memory, checked
// like any operand.
bool read_scalar(const cublasContext& h, const void* p, const char* who, float& out) {
  if (p == nullptr) return false;
  if (h.pointer_mode == CUBLAS_POINTER_MODE_DEVICE &&
      !library_access(who, p, sizeof(float), Touch::read))
    return false;
  std::memcpy(&out, p, sizeof(float));
  return true;
}

// Reports one operand range; a range of no bytes touches nothing and is not reported.
bool report(const char* who, const void* p, size_t bytes, Touch touch) {
  return bytes == 0 || library_access(who, p, bytes, touch);
}

float product(float a, float b) {
  const volatile float p = a * b;  // rounded to FP32 here: never fused with the add
  return p;
}

// The summation order, the stand-in's one definition of a GEMM result: for each C element,
// acc starts at 0.0f and adds the FP32 product of the widened operands op(A)(i, p)·op(B)(p, j)
// for p = 0, 1, …, k − 1 in increasing order, each product and each sum rounded to FP32
// (round to nearest even, no FMA). Then result = alpha·acc, plus beta·C(i, j) when beta ≠ 0
// (beta == 0: C is not read, so NaN or garbage there does not propagate, as cuBLAS documents).
// result is stored as FP32 or rounded to BF16 (nearest even). alpha == 0 or k == 0 skips the
// products and does not read A or B (the reference BLAS rule: they need not be set).
struct Gemm {
  OpView a, b;
  void* c = nullptr;
  cudaDataType c_type = CUDA_R_32F;
  int64_t m = 0, n = 0, k = 0, ldc = 1;
  float alpha = 1.0f, beta = 0.0f;
  bool uses_ab() const { return k > 0 && alpha != 0.0f; }
  size_t c_span_bytes() const {
    return static_cast<size_t>(ldc * (n - 1) + m) * element_bytes(c_type);
  }
};

float dot(const Gemm& g, int64_t i, int64_t j) {
  float acc = 0.0f;
  for (int64_t p = 0; p < g.k; ++p) acc = acc + product(g.a.at(i, p), g.b.at(p, j));
  return acc;
}

void store_c(const Gemm& g, int64_t i, int64_t j, float v) {
  char* at = static_cast<char*>(g.c) + (i + j * g.ldc) * element_bytes(g.c_type);
  if (g.c_type == CUDA_R_16BF) {
    const uint16_t b = f32_to_bf16_bits(v);
    std::memcpy(at, &b, 2);
  } else {
    std::memcpy(at, &v, 4);
  }
}

float load_c(const Gemm& g, int64_t i, int64_t j) {
  Stored s{g.c, g.c_type, g.m, g.n, g.ldc};
  return s.at(i, j);
}

void run_gemm(const Gemm& g) {
  for (int64_t j = 0; j < g.n; ++j) {
    for (int64_t i = 0; i < g.m; ++i) {
      const float acc = g.uses_ab() ? dot(g, i, j) : 0.0f;
      float result = product(g.alpha, acc);
      if (g.beta != 0.0f) result = result + product(g.beta, load_c(g, i, j));
      store_c(g, i, j, result);
    }
  }
}

// Every range the GEMM touches, in the order it touches them; all are reported (each bad one
// is a finding) before any is used.
bool report_gemm_ranges(const Gemm& g) {
  bool ok = true;
  if (g.uses_ab()) {
    ok &= report("cublasGemmEx A", g.a.s.p, g.a.s.span_bytes(), Touch::read);
    ok &= report("cublasGemmEx B", g.b.s.p, g.b.s.span_bytes(), Touch::read);
  }
  if (g.beta != 0.0f) ok &= report("cublasGemmEx C (read)", g.c, g.c_span_bytes(), Touch::read);
  ok &= report("cublasGemmEx C", g.c, g.c_span_bytes(), Touch::write);
  return ok;
}

cublasStatus_t check_gemm_args(cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                               int k, int lda, int ldb, int ldc) {
  if (!valid_op(transa) || !valid_op(transb)) return CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (!valid_ld(lda, transa, m, k) || !valid_ld(ldb, transb, k, n))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (ldc < (m > 1 ? m : 1)) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

// ---- Handle ----

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* h = new (std::nothrow) cublasContext;
  if (h == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  std::lock_guard<std::mutex> lock(handles_mutex);
  live_handles().insert(h);
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  {
    std::lock_guard<std::mutex> lock(handles_mutex);
    if (handle == nullptr || live_handles().erase(handle) == 0)
      return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS documents that setting the stream also resets the workspace to its own pool (the
// backend binds the stream first for that reason); the stand-in does the same so a backend
// that set them in the other order is seen running without its workspace.
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  handle->workspace = nullptr;
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

// The workspace must be device memory the handle may use: the whole range inside one live
// allocation (checked without a read or write: cuBLAS only keeps the pointer here), and
// aligned to 256 bytes, which cuBLAS documents as required.
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0) {
    if (workspace == nullptr || !is_device_range(workspace, bytes))
      return CUBLAS_STATUS_INVALID_VALUE;
    if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
  }
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_ATOMICS_NOT_ALLOWED && mode != CUBLAS_ATOMICS_ALLOWED)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->atomics_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

// A mode is one base (default, the legacy tensor-op value 1, pedantic, TF32) optionally with
// the disallow-reduced-precision-reduction flag. The stand-in's arithmetic is already the
// strictest (exact FP32 products, FP32 sums), so every mode computes the same result; on the
// GPU, TF32 or reduced-precision modes may differ from it.
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  if (base < CUBLAS_DEFAULT_MATH || base > CUBLAS_TF32_TENSOR_OP_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

// ---- GEMM ----

// Checks in this order: handle, argument values (ops, sizes, leading dimensions), the type
// combination and algorithm, the scalars, then every operand range; only then is memory
// written. m == 0 or n == 0 returns before anything is read.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const cublasStatus_t args = check_gemm_args(transa, transb, m, n, k, lda, ldb, ldc);
  if (args != CUBLAS_STATUS_SUCCESS) return args;
  if (!supported_types(Atype, Btype, Ctype, computeType)) return CUBLAS_STATUS_NOT_SUPPORTED;
  // Only the default algorithm, the one the backend passes, is modelled.
  if (algo != CUBLAS_GEMM_DEFAULT) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  Gemm g;
  if (!read_scalar(*handle, alpha, "cublasGemmEx alpha", g.alpha) ||
      !read_scalar(*handle, beta, "cublasGemmEx beta", g.beta))
    return CUBLAS_STATUS_INVALID_VALUE;
  g.a = make_view(A, Atype, lda, transa, m, k);
  g.b = make_view(B, Btype, ldb, transb, k, n);
  g.c = C;
  g.c_type = Ctype;
  g.m = m;
  g.n = n;
  g.k = k;
  g.ldc = ldc;
  if (!report_gemm_ranges(g)) return CUBLAS_STATUS_INVALID_VALUE;
  run_gemm(g);
  return CUBLAS_STATUS_SUCCESS;
}

// ---- Status text ----

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library or the handle was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "a resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an unsupported value or parameter was passed";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "the device lacks a required architectural feature";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal cuBLAS operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the requested functionality is not supported";
  }
  return "unknown cuBLAS status";
}

}  // namespace bufferlab::sim::device
