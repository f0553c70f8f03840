// The cuBLAS row-major GEMM, the BF16 GemmOp kinds and the LM head.
//   store:      cuBLAS writes BF16 directly (FP32 accumulate, one rounding).
//   swiglu /
//   accumulate: cuBLAS writes the FP32 result into the staging area in row chunks of
//               kStagingBytes / (4·N) rows; an epilogue kernel reads `out` (up / the
//               accumulator) and stores bf16(silu(acc)·out) or bf16(out + acc).
//   lm_head:    the affine row rule needs no gather: the direct rows are one GEMM with row
//               stride `hidden`, the tail rows one GEMM with row stride tail_stride·hidden
//               (a stride of 0 falls back to one GEMM per tail row).
#include "gemm.h"

#include <algorithm>
#include <climits>
#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "cublas_api.h"
#include "cuda_check.h"
#include "moe_kernels.h"
#include "moe_ops.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

int as_int(uint64_t v, const char* what) {
  if (v > static_cast<uint64_t>(INT_MAX))
    throw Error(std::string("cuBLAS GEMM: ") + what + " = " + std::to_string(v) +
                " exceeds the int range of cuBLAS");
  return static_cast<int>(v);
}

uint64_t mul(uint64_t a, uint64_t b) { return (Size(a) * b).value(); }

}  // namespace

void row_gemm(LibraryContext& ctx, const RowGemm& g) {
  if (g.rows == 0 || g.N == 0) return;
  const int m = as_int(g.N, "N"), n = as_int(g.rows, "rows"), k = as_int(g.K, "K");
  const int lda = as_int(std::max<uint64_t>(g.ldw, 1), "ldw");
  const int ldb = as_int(std::max<uint64_t>(g.ldx, 1), "ldx");
  const int ldc = as_int(g.ldy, "ldy");
  const bool fp32_inputs = g.x_type == CUDA_R_32F || g.w_type == CUDA_R_32F;
  const auto math =
      fp32_inputs ? CUBLAS_PEDANTIC_MATH
                  : static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  BUFFERLAB_CUBLAS_CHECK(cublas_api().set_math_mode(ctx.handle(), math));
  const float alpha = 1.0f, beta = 0.0f;
  BUFFERLAB_CUBLAS_CHECK(cublas_api().gemm_ex(
      ctx.handle(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, g.w, g.w_type, lda, g.x, g.x_type,
      ldb, &beta, g.y, g.y_type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm(LibraryContext& ctx, const Workspace& ws, const GemmOp& op) {
  const GemmEpilogue epilogue = op.epilogue();  // Error for a kind without a kernel
  const GemmOp::Bound b = op.bind(ws);
  const auto& d = op.shape();
  if (d.rows == 0 || d.N == 0) return;
  RowGemm g;
  g.x = b.x;
  g.ldx = d.K;
  g.w = b.weight;
  g.ldw = d.K;
  g.N = d.N;
  g.K = d.K;
  if (epilogue == GemmEpilogue::store) {
    g.y = b.out;
    g.ldy = d.N;
    g.rows = d.rows;
    row_gemm(ctx, g);
    return;
  }
  const uint64_t chunk = LibraryContext::kStagingBytes / mul(d.N, sizeof(float));
  if (chunk == 0) throw Error(op.params() + ": N too large for the fixed GEMM staging area");
  auto* acc = static_cast<float*>(ctx.staging());
  for (uint64_t r0 = 0; r0 < d.rows; r0 += chunk) {
    const uint64_t rows = std::min(chunk, d.rows - r0);
    g.x = b.x + r0 * d.K;
    g.y = acc;
    g.y_type = CUDA_R_32F;
    g.ldy = d.N;
    g.rows = rows;
    row_gemm(ctx, g);
    launch_gemm_epilogue(acc, b.out + r0 * d.N, rows, d.N, d.N, epilogue == GemmEpilogue::swiglu,
                         nullptr);
  }
}

void lm_head(LibraryContext& ctx, const Workspace& ws, const LmHeadOp& op) {
  const LmHeadOp::Bound b = op.bind(ws);
  const auto& d = op.shape();
  if (d.logits_rows == 0 || d.vocab == 0) return;
  const LmHeadRows& src = op.source_rows;
  const uint64_t direct = std::min(src.direct, d.logits_rows);
  // make() checked the rows; the op is a plain struct, so check again before any pointer
  // arithmetic: the rule is affine, so the last row of each part bounds the part.
  for (uint64_t r : {direct, d.logits_rows}) {
    if (r == 0) continue;
    if (src.source(r - 1) >= d.rows)
      throw Error(op.params() + ": logits row " + std::to_string(r - 1) + " reads input row " +
                  std::to_string(src.source(r - 1)) + " of " + std::to_string(d.rows));
  }
  RowGemm g;
  g.w = b.table;
  g.ldw = d.hidden;
  g.ldy = d.vocab;
  g.N = d.vocab;
  g.K = d.hidden;
  if (direct > 0) {
    g.x = b.input;
    g.ldx = d.hidden;
    g.y = b.output;
    g.rows = direct;
    row_gemm(ctx, g);
  }
  const uint64_t tail = d.logits_rows - direct;
  if (tail == 0) return;
  const uint64_t stride = mul(src.tail_stride, d.hidden);
  if (src.tail_stride > 0 && stride <= static_cast<uint64_t>(INT_MAX)) {
    g.x = b.input + mul(src.tail_base, d.hidden);
    g.ldx = stride;
    g.y = b.output + mul(direct, d.vocab);
    g.rows = tail;
    row_gemm(ctx, g);
    return;
  }
  for (uint64_t i = 0; i < tail; ++i) {
    g.x = b.input + mul(src.source(direct + i), d.hidden);
    g.ldx = d.hidden;
    g.y = b.output + mul(direct + i, d.vocab);
    g.rows = 1;
    row_gemm(ctx, g);
  }
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
