// FusedAddRmsNormOp: residual = bf16(residual + x); norm_output = bf16(RMSNorm(residual))
// in the offset-from-1 convention y = r · rsqrt(mean(r²) + eps) · (1 + w), FP32 math
// (docs/spec/numerics.md §1). The FP32 variant also writes the FP32 normed row, before BF16
// rounding, into moe_router_in_f32. An unweighted norm reads the zero `norm_unit_w`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

struct RmsNormVariant {
  bool add_residual = true;  // false: plain RMSNorm of `residual` (no add, residual untouched)
  bool write_f32 = false;    // also write moe_router_in_f32 (FP32-routing path)
  bool unit_weight = false;  // read the zero norm_unit_w instead of a weight tensor
};

// Where the op's operands live. The defaults are the standalone op's; a pass plan feeds the
// previous sub-block's output (moe_output) into the add, and normalises an mHC block input
// in place in norm_output.
struct RmsNormBuffers {
  BufferId input = BufferId::hidden_states;
  BufferId residual = BufferId::residual;
  BufferId output = BufferId::norm_output;
};

// The data an access carries, for the verifier's liveness check (Access::value).
struct RmsNormValues {
  std::string input = "@block_out";
  std::string residual_in = "@residual";
  std::string residual_out = "@residual";
  std::string output = "norm";
  std::string output_f32 = "norm_f32";
};

struct FusedAddRmsNormOp {
  struct Shape {
    uint64_t rows = 0;   // tokens of the pass
    uint64_t width = 0;  // hidden_size
  };

  Shape dims;
  double eps = 1e-6;
  RmsNormVariant variant;

  // Operands, all derived from `dims` by make(): the ONE source of their extents.
  TensorRef input;       // hidden_states bf16 [rows, width] (read when add_residual)
  TensorRef residual;    // residual bf16 [rows, width] (read, then written when add_residual)
  TensorRef weight;      // weights pool bf16 [width], or norm_unit_w bf16 [width]
  TensorRef output;      // norm_output bf16 [rows, width]
  TensorRef output_f32;  // moe_router_in_f32 f32 [rows, width] (write_f32 only)

  // Builds the op for `rows` tokens of `config`; the weight (when not unit) sits at offset 0
  // of the weight pool.
  static FusedAddRmsNormOp make(const ModelConfig& config, uint64_t rows, RmsNormVariant variant);
  static FusedAddRmsNormOp make(const ModelConfig& config, uint64_t rows, RmsNormVariant variant,
                                const RmsNormBuffers& buffers, RmsNormValues values);

  RmsNormValues values;

  // The operands' addresses in `ws` (host or device), each checked to lie inside its buffer
  // and to hold exactly the elements shape() says; operands the variant does not use are
  // null. Every backend launches from these, so no backend re-derives an extent.
  struct Bound {
    const uint16_t* input = nullptr;  // null without add_residual
    uint16_t* residual = nullptr;
    const uint16_t* weight = nullptr;
    uint16_t* output = nullptr;
    float* output_f32 = nullptr;  // null without write_f32
  };
  Bound bind(const Workspace& ws) const;

  const Shape& shape() const { return dims; }
  std::string name() const { return "rmsnorm"; }
  // Bytes of the weight pool this op needs (0 for a unit weight).
  uint64_t weight_pool_bytes() const;
  std::vector<Access> accesses() const;
  // A printable parameter string that says exactly what to re-run.
  std::string params() const;
};

}  // namespace bufferlab
