// FP64 oracle of FusedAddRmsNormOp (docs/spec/numerics.md §1) and the derived agreement bounds of
// its outputs. Host copies of the operands carry BF16 as raw bits.
//
// Defined result for non-finite rows: a row whose normalised values hold a NaN or ±Inf has a
// non-finite sum of squares and normalises to all NaN (every column, BF16 and FP32 outputs);
// the stored residual keeps the non-finite sum itself. Other rows are untouched.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/oracle/compare.h"
#include "bufferlab/oracle/mode.h"

namespace bufferlab::oracle {

struct RmsNormInputs {
  std::vector<uint16_t> input;     // hidden_states bf16 [rows, width]; empty without the add
  std::vector<uint16_t> residual;  // residual bf16 [rows, width] before the op
  std::vector<uint16_t> weight;    // bf16 [width]; empty for the unit weight
};

struct RmsNormOutputs {
  std::vector<uint16_t> residual;  // residual bf16 [rows, width] after the op
  std::vector<uint16_t> output;    // norm_output bf16 [rows, width]
  std::vector<float> output_f32;   // moe_router_in_f32 [rows, width]; empty unless write_f32
};

struct RmsNormReference {
  std::vector<double> residual;  // the row the norm reads: r + x (exact) or bf16(r + x) (faithful)
  std::vector<double> output;    // r · (Σr²/width + eps)^(-1/2) · (1 + w), FP64, not rounded
};

// The op's definition over `in` (extents from op.shape(); sizes checked, Error otherwise).
// The unit-weight variant uses w = 0 by definition, ignoring in.weight.
RmsNormReference fused_add_rmsnorm(const FusedAddRmsNormOp& op, const RmsNormInputs& in, Mode mode);

// The norm stage on its own (§9: fed the backend's STORED residual): the faithful oracle of
// the op without the add over `stored_residual`.
RmsNormReference norm_of_stored_residual(const FusedAddRmsNormOp& op,
                                         const std::vector<uint16_t>& stored_residual,
                                         const std::vector<uint16_t>& weight);

// The derived bounds of the op's outputs against the faithful oracle (see rmsnorm.cpp).
struct RmsNormTolerances {
  double f32_rel = 0.0;  // γ_(width+9): FP32 normed value vs FP64 on the same stored residual
  Tolerance residual;    // the stored residual: exact
  Tolerance output;      // norm_output (BF16)
  Tolerance output_f32;  // moe_router_in_f32 (FP32)
};
RmsNormTolerances fused_add_rmsnorm_tolerances(const FusedAddRmsNormOp& op);

}  // namespace bufferlab::oracle
