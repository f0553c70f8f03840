// The ops of one projection y[T, N] = x[T, K] · Wᵀ on each path of docs/spec/buffers.md §5
// "Paths": FP8 block-scaled activation quantization, the GEMM itself (BF16, FP8, Q2
// dequantized or MMQ), Q2 weight dequantization, q8_1 activation quantization, and the LoRA
// shrink / expand / add. Extents follow docs/spec/numerics.md §7; every kernel launches from
// shape().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

// FP8 E4M3 block-scaled quantization (groups of 128 along K): act [P, K] fp8 → fp8_act and
// scales f32 [P, cdiv(K,128)] → fp8_act_scale, P = ceil16(rows); the padding rows are
// written as zeros (the block-scaled GEMM reads them).
struct Fp8QuantOp {
  struct Shape {
    uint64_t rows = 0, padded_rows = 0, K = 0, groups = 0;
  };
  Shape dims;
  TensorRef input, act, scale;
  std::string input_value;

  static Fp8QuantOp make(const TensorRef& input, std::string input_value, uint64_t rows,
                         uint64_t K);
  const Shape& shape() const { return dims; }
  std::string name() const { return "fp8_quant"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// q8_1 blocks of 32 (int8 + two halves: 36 bytes per 32 elements), K padded to 256, one row
// per token — the MMQ activation format (ffn_act_q8 / q2_act_q8).
struct Q8QuantOp {
  struct Shape {
    uint64_t rows = 0, K = 0, K_pad = 0, row_bytes = 0;
  };
  Shape dims;
  TensorRef input, output;
  std::string input_value, output_value;

  static Q8QuantOp make(const TensorRef& input, std::string input_value, BufferId out,
                        std::string output_value, uint64_t rows, uint64_t K);
  const Shape& shape() const { return dims; }
  std::string name() const { return "q8_1_quant"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Q2_0 weights (blocks of 128 in 34 bytes) dequantized to BF16 [N, K] in q2_dequant_scratch.
struct Q2DequantOp {
  struct Shape {
    uint64_t N = 0, K = 0;
  };
  Shape dims;
  TensorRef packed, output;
  std::string output_value;

  static Q2DequantOp make(uint64_t N, uint64_t K, std::string output_value);
  const Shape& shape() const { return dims; }
  std::string name() const { return "q2_dequant"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// What a BF16 GEMM does with its FP32 result (the `kind` strings the plans use):
//   store      "bf16"                 out = bf16(x·Wᵀ)
//   swiglu     "bf16+swiglu-epilogue" out = bf16(silu(x·Wᵀ) · up), up = inputs[1] = the output
//              tensor itself, read and rewritten in place (the MoE shared expert)
//   accumulate "bf16+accumulate"      out = bf16(out + x·Wᵀ), out = inputs[1] (β = 1)
// FP32 math throughout (docs/spec/numerics.md §2: BF16 in, FP32 accumulate).
enum class GemmEpilogue { store, swiglu, accumulate };

// A GEMM writing out_rows rows of [*, N]: rows [0, rows) are the result, rows
// [rows, out_rows) phantom (the FP8 block-scaled path hands the library ceil16(rows) rows).
struct GemmOp {
  struct Shape {
    uint64_t rows = 0, out_rows = 0, K = 0, N = 0;
  };
  std::string label;  // "qkv_proj", ...
  std::string kind;   // "bf16", "fp8", "q2-dequant", "q2-mmq", "int8", ...
  Shape dims;
  std::vector<Access> inputs;  // activation (and scale) reads, with values
  TensorRef weight;            // weights pool, or q2_dequant_scratch
  std::string weight_value;    // value of an arena weight (Q2 dequant)
  TensorRef output;            // [rows, N]
  TensorRef phantom_rows;      // [out_rows - rows, N] right after output (empty when equal)
  std::string output_value;

  // `output` at out_offset of out_buffer; out_rows ≥ rows.
  static GemmOp make(std::string label, std::string kind, std::vector<Access> inputs, uint64_t rows,
                     uint64_t out_rows, uint64_t K, uint64_t N, BufferId out_buffer,
                     uint64_t out_offset, DType out_dtype, std::string output_value);
  // The BF16 kinds above have kernels on every backend; whether this op is one of them.
  bool is_bf16_kind() const;
  GemmEpilogue epilogue() const;  // throws Error for a kind that is not a BF16 kind

  // A BF16 kind's operands (Error for another kind): x = inputs[0] bf16 [rows, K], weight
  // bf16 [N, K], out bf16 [rows, N] (also read for swiglu / accumulate).
  struct Bound {
    const uint16_t* x = nullptr;
    const uint16_t* weight = nullptr;
    uint16_t* out = nullptr;
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return label; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// LoRA (docs/spec/numerics.md §7): shrink xa = x·Aᵀ → lora_xa [T, rank]; expand delta = xa·Bᵀ →
// lora_delta [T, N]; add y += scale·delta in place. Each token picks its adapter from
// lora_seq_slot.
struct LoraOp {
  enum class Stage { shrink, expand, add };
  struct Shape {
    uint64_t rows = 0, K = 0, N = 0, rank = 0;
  };
  Stage stage = Stage::shrink;
  std::string label;
  Shape dims;
  std::vector<Access> io;

  static LoraOp shrink(std::string label, const TensorRef& x, std::string x_value, uint64_t rows,
                       uint64_t K, uint64_t rank);
  static LoraOp expand(std::string label, uint64_t rows, uint64_t N, uint64_t rank);
  static LoraOp add(std::string label, const TensorRef& y, std::string y_value, uint64_t rows,
                    uint64_t N);
  const Shape& shape() const { return dims; }
  std::string name() const;
  std::string params() const;
  std::vector<Access> accesses() const { return io; }
};

}  // namespace bufferlab
