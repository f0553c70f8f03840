// A BF16 GemmOp of one epilogue (store, swiglu, accumulate) as the FFN paths build it: x
// [rows, K] BF16 at norm_output, out [rows, N] BF16 in the caller's buffer, which the swiglu
// and accumulate epilogues also read ("old"). Shared by the CPU no-allocation test and the
// MoE FFN properties. Free of gtest.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/ops/projection.h"
#include "bufferlab/core/tensor_ref.h"

namespace bufferlab::testing {

inline const char* bf16_gemm_kind(GemmEpilogue e) {
  return e == GemmEpilogue::store    ? "bf16"
         : e == GemmEpilogue::swiglu ? "bf16+swiglu-epilogue"
                                     : "bf16+accumulate";
}

inline GemmOp bf16_gemm_op(GemmEpilogue e, uint64_t rows, uint64_t K, uint64_t N, BufferId out,
                           const char* label, const char* out_name) {
  const TensorRef x = arena_tensor(BufferId::norm_output, 0, {rows, K}, DType::bf16);
  std::vector<Access> inputs = {{x, AccessKind::read, "norm"}};
  if (e != GemmEpilogue::store)
    inputs.push_back({arena_tensor(out, 0, {rows, N}, DType::bf16), AccessKind::read, "old"});
  return GemmOp::make(label, bf16_gemm_kind(e), inputs, rows, rows, K, N, out, 0, DType::bf16,
                      out_name);
}

}  // namespace bufferlab::testing
