// Projection ops: extents from op semantics (rows, K, N), docs/spec/numerics.md §7.
#include "bufferlab/core/ops/projection.h"

#include <string>

#include "bind_check.h"
#include "bufferlab/core/checked.h"
#include "params_text.h"

namespace bufferlab {
namespace {

using detail::u;

}  // namespace

Fp8QuantOp Fp8QuantOp::make(const TensorRef& input, std::string input_value, uint64_t rows,
                            uint64_t K) {
  Fp8QuantOp op;
  op.dims = {rows, ceil16(Size(rows)).value(), K, cdiv(K, 128)};
  op.input = input;
  op.input_value = std::move(input_value);
  op.act = arena_tensor(BufferId::fp8_act, 0, {op.dims.padded_rows, K}, DType::fp8_e4m3);
  op.scale =
      arena_tensor(BufferId::fp8_act_scale, 0, {op.dims.padded_rows, op.dims.groups}, DType::f32);
  return op;
}

std::string Fp8QuantOp::params() const {
  return "fp8_quant(rows=" + u(dims.rows) + ",padded=" + u(dims.padded_rows) + ",K=" + u(dims.K) +
         ")";
}

std::vector<Access> Fp8QuantOp::accesses() const {
  return {{input, AccessKind::read, input_value},
          {act, AccessKind::write, "fp8_act"},
          {scale, AccessKind::write, "fp8_act_scale"}};
}

Q8QuantOp Q8QuantOp::make(const TensorRef& input, std::string input_value, BufferId out,
                          std::string output_value, uint64_t rows, uint64_t K) {
  Q8QuantOp op;
  const uint64_t k_pad = ceil256(Size(K)).value();
  op.dims = {rows, K, k_pad, (Size(k_pad / 32) * 36).value()};
  op.input = input;
  op.input_value = std::move(input_value);
  op.output = arena_tensor(out, 0, {rows, op.dims.row_bytes}, DType::u8);
  op.output_value = std::move(output_value);
  return op;
}

std::string Q8QuantOp::params() const {
  return "q8_1_quant(rows=" + u(dims.rows) + ",K=" + u(dims.K) + ",K_pad=" + u(dims.K_pad) +
         ",out=" + std::string(buffer_name(output.buffer)) + ")";
}

std::vector<Access> Q8QuantOp::accesses() const {
  return {{input, AccessKind::read, input_value}, {output, AccessKind::write, output_value}};
}

Q2DequantOp Q2DequantOp::make(uint64_t N, uint64_t K, std::string output_value) {
  Q2DequantOp op;
  op.dims = {N, K};
  const uint64_t blocks = (Size(N) * cdiv(K, 128)).value();
  op.packed = TensorRef{Space::weights, BufferId::hidden_states, 0, {blocks, 34}, DType::u8};
  op.output = arena_tensor(BufferId::q2_dequant_scratch, 0, {N, K}, DType::bf16);
  op.output_value = std::move(output_value);
  return op;
}

std::string Q2DequantOp::params() const {
  return "q2_dequant(N=" + u(dims.N) + ",K=" + u(dims.K) + ")";
}

std::vector<Access> Q2DequantOp::accesses() const {
  return {{packed, AccessKind::read, {}}, {output, AccessKind::write, output_value}};
}

GemmOp GemmOp::make(std::string label, std::string kind, std::vector<Access> inputs, uint64_t rows,
                    uint64_t out_rows, uint64_t K, uint64_t N, BufferId out_buffer,
                    uint64_t out_offset, DType out_dtype, std::string output_value) {
  GemmOp op;
  op.label = std::move(label);
  op.kind = std::move(kind);
  op.dims = {rows, out_rows, K, N};
  op.inputs = std::move(inputs);
  op.weight = TensorRef{Space::weights, BufferId::hidden_states, 0, {N, K}, DType::bf16};
  op.output = arena_tensor(out_buffer, out_offset, {rows, N}, out_dtype);
  if (out_rows > rows)
    op.phantom_rows =
        arena_tensor(out_buffer, out_offset + op.output.bytes(), {out_rows - rows, N}, out_dtype);
  op.output_value = std::move(output_value);
  return op;
}

std::string GemmOp::params() const {
  return label + "(" + kind + ",rows=" + u(dims.rows) + ",out_rows=" + u(dims.out_rows) +
         ",K=" + u(dims.K) + ",N=" + u(dims.N) + ",out=" + output.to_string() + ")";
}

bool GemmOp::is_bf16_kind() const {
  return kind == "bf16" || kind == "bf16+swiglu-epilogue" || kind == "bf16+accumulate";
}

GemmEpilogue GemmOp::epilogue() const {
  if (kind == "bf16") return GemmEpilogue::store;
  if (kind == "bf16+swiglu-epilogue") return GemmEpilogue::swiglu;
  if (kind == "bf16+accumulate") return GemmEpilogue::accumulate;
  throw Error(params() + ": GEMM kind '" + kind +
              "' has no backend kernel (BF16 kinds only: bf16, bf16+swiglu-epilogue, "
              "bf16+accumulate)");
}

GemmOp::Bound GemmOp::bind(const Workspace& ws) const {
  const GemmEpilogue e = epilogue();
  const detail::LazyParams p(*this);
  if (inputs.empty()) throw Error(p.str() + ": no activation input");
  const TensorRef& x = inputs[0].tensor;
  detail::require_dtype(x, DType::bf16, p);
  detail::require_elements(x, (Size(dims.rows) * dims.K).value(), p);
  detail::require_dtype(weight, DType::bf16, p);
  detail::require_elements(weight, (Size(dims.N) * dims.K).value(), p);
  detail::require_dtype(output, DType::bf16, p);
  detail::require_elements(output, (Size(dims.rows) * dims.N).value(), p);
  if (e != GemmEpilogue::store) {
    // The in-place operand (up, or the accumulator) must be the output tensor itself.
    if (inputs.size() < 2 || inputs[1].tensor.buffer != output.buffer ||
        inputs[1].tensor.offset != output.offset || inputs[1].tensor.space != output.space)
      throw Error(p.str() + ": the " + kind +
                  " epilogue reads its output tensor in place as inputs[1]");
  }
  return {ws.data<const uint16_t>(x), ws.data<const uint16_t>(weight), ws.data<uint16_t>(output)};
}

std::vector<Access> GemmOp::accesses() const {
  std::vector<Access> out = inputs;
  out.push_back({weight, AccessKind::read, weight_value});
  out.push_back({output, AccessKind::write, output_value});
  if (dims.out_rows > dims.rows) out.push_back({phantom_rows, AccessKind::phantom_write, {}});
  return out;
}

LoraOp LoraOp::shrink(std::string label, const TensorRef& x, std::string x_value, uint64_t rows,
                      uint64_t K, uint64_t rank) {
  LoraOp op;
  op.stage = Stage::shrink;
  op.label = std::move(label);
  op.dims = {rows, K, 0, rank};
  op.io = {{x, AccessKind::read, std::move(x_value)},
           {arena_tensor(BufferId::lora_seq_slot, 0, {rows}, DType::i32), AccessKind::read,
            "@lora_slot"},
           {TensorRef{Space::weights, BufferId::hidden_states, 0, {rank, K}, DType::bf16},
            AccessKind::read,
            {}},
           {arena_tensor(BufferId::lora_xa, 0, {rows, rank}, DType::bf16), AccessKind::write,
            "lora_xa"}};
  return op;
}

LoraOp LoraOp::expand(std::string label, uint64_t rows, uint64_t N, uint64_t rank) {
  LoraOp op;
  op.stage = Stage::expand;
  op.label = std::move(label);
  op.dims = {rows, rank, N, rank};
  op.io = {
      {arena_tensor(BufferId::lora_xa, 0, {rows, rank}, DType::bf16), AccessKind::read, "lora_xa"},
      {arena_tensor(BufferId::lora_seq_slot, 0, {rows}, DType::i32), AccessKind::read,
       "@lora_slot"},
      {TensorRef{Space::weights, BufferId::hidden_states, 0, {N, rank}, DType::bf16},
       AccessKind::read,
       {}},
      {arena_tensor(BufferId::lora_delta, 0, {rows, N}, DType::bf16), AccessKind::write,
       "lora_delta"}};
  return op;
}

LoraOp LoraOp::add(std::string label, const TensorRef& y, std::string y_value, uint64_t rows,
                   uint64_t N) {
  LoraOp op;
  op.stage = Stage::add;
  op.label = std::move(label);
  op.dims = {rows, 0, N, 0};
  op.io = {{arena_tensor(BufferId::lora_delta, 0, {rows, N}, DType::bf16), AccessKind::read,
            "lora_delta"},
           {y, AccessKind::read, y_value},
           {y, AccessKind::write, y_value}};
  return op;
}

std::string LoraOp::name() const {
  switch (stage) {
    case Stage::shrink:
      return label + ".lora_shrink";
    case Stage::expand:
      return label + ".lora_expand";
    case Stage::add:
      return label + ".lora_add";
  }
  return label;
}

std::string LoraOp::params() const {
  return name() + "(rows=" + u(dims.rows) + ",K=" + u(dims.K) + ",N=" + u(dims.N) +
         ",rank=" + u(dims.rank) + ")";
}

}  // namespace bufferlab
