// The ops of a SwiGLU FFN beyond its GEMMs (docs/spec/numerics.md §2, §7;
// docs/spec/buffers.md §4.9): the SiLU-gated product a = silu(g) · u (optional clamp) computed in
// place of g, and the dense-FFN activation quantizers of the FP8 / int8 / NVFP4 paths into
// ffn_act_a / ffn_act_scale. (The q8_1 path uses Q8QuantOp of projection.h into ffn_act_q8.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

// a = silu(g) · u over [rows, width] bf16, FP32 math; with limit > 0 the gate is clamped to
// ≤ limit and the up value to [−limit, limit] before the product (swiglu_limit). `a`
// overwrites g in expert_gate_out (a declared in-place access: the same TensorRef is read
// and written); u is read from expert_up_out. Both at offset 0, rows token-major.
struct SwigluOp {
  struct Shape {
    uint64_t rows = 0, width = 0;
  };
  Shape dims;
  double limit = 0.0;
  TensorRef gate, up;  // `gate` is also the output
  std::string gate_value, up_value, output_value;

  static SwigluOp make(uint64_t rows, uint64_t width, double limit, std::string gate_value,
                       std::string up_value, std::string output_value);

  struct Bound {
    uint16_t* gate = nullptr;  // [rows, width], read then overwritten by a
    const uint16_t* up = nullptr;
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "swiglu"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Activation formats of the dense-FFN activation path (docs/spec/buffers.md §4.9,
// docs/spec/numerics.md §7).
enum class FfnActFormat { fp8, int8, nvfp4 };
const char* to_string(FfnActFormat f);

// Per-token group quantization of x [rows, K] bf16 for the quantized dense-FFN GEMM, over
// P = ceil16(rows) rows (the padding rows are written as zeros: the GEMM reads P rows):
//   fp8:   act e4m3 [P, K]            scale f32  [P, cdiv(K,128)]
//   int8:  act i8   [P, K]            scale f32  [P, cdiv(K,32)]
//   nvfp4: act e2m1 [P, 2·cdiv(K,2)]  scale e4m3 [P, cdiv(K,16)], then the FP32 global
//          scale g (amax over the rows, docs/spec/numerics.md §7) right after the group scales.
// act at offset 0 of ffn_act_a, scales at offset 0 of ffn_act_scale.
struct FfnActQuantOp {
  struct Shape {
    uint64_t rows = 0, padded_rows = 0, K = 0;
    uint64_t act_cols = 0;    // elements per act row (K; NVFP4 rounds up to whole bytes)
    uint64_t group_size = 0;  // 128 / 32 / 16
    uint64_t groups = 0;      // cdiv(K, group_size)
  };
  Shape dims;
  FfnActFormat format = FfnActFormat::fp8;
  TensorRef input, act, scale, global_scale;  // global_scale: NVFP4 only
  std::string input_value, act_value = "ffn_act_q", scale_value = "ffn_act_scale",
                           global_value = "ffn_act_gscale";

  static FfnActQuantOp make(const TensorRef& input, std::string input_value, uint64_t rows,
                            uint64_t K, FfnActFormat format);
  const Shape& shape() const { return dims; }
  std::string name() const { return "ffn_act_quant"; }
  std::string params() const;
  std::vector<Access> accesses() const;
  // The reads of the quantized GEMM that consumes this activation (act, scales, g): P rows.
  std::vector<Access> gemm_reads() const;
  // The dtype of the weights the quantized GEMM multiplies with, for its weight-pool operand.
  DType weight_dtype() const;
};

}  // namespace bufferlab
