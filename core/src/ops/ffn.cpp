// FFN ops (SwiGLU product, dense-FFN activation quantizers): extents from op semantics,
// docs/spec/numerics.md §2 and §7.
#include "bufferlab/core/ops/ffn.h"

#include <sstream>
#include <string>

#include "bind_check.h"
#include "bufferlab/core/checked.h"

namespace bufferlab {
namespace {}  // namespace

SwigluOp SwigluOp::make(uint64_t rows, uint64_t width, double limit, std::string gate_value,
                        std::string up_value, std::string output_value) {
  SwigluOp op;
  op.dims = {rows, width};
  op.limit = limit;
  op.gate = arena_tensor(BufferId::expert_gate_out, 0, {rows, width}, DType::bf16);
  op.up = arena_tensor(BufferId::expert_up_out, 0, {rows, width}, DType::bf16);
  op.gate_value = std::move(gate_value);
  op.up_value = std::move(up_value);
  op.output_value = std::move(output_value);
  return op;
}

std::string SwigluOp::params() const {
  std::ostringstream s;
  s << "swiglu(rows=" << dims.rows << ",width=" << dims.width << ",limit=" << limit << ")";
  return s.str();
}

SwigluOp::Bound SwigluOp::bind(const Workspace& ws) const {
  const uint64_t n = (Size(dims.rows) * dims.width).value();
  const detail::LazyParams p(*this);
  detail::require_elements(gate, n, p);
  detail::require_elements(up, n, p);
  return {ws.data<uint16_t>(gate), ws.data<const uint16_t>(up)};
}

std::vector<Access> SwigluOp::accesses() const {
  return {{gate, AccessKind::read, gate_value},
          {up, AccessKind::read, up_value},
          {gate, AccessKind::write, output_value}};
}

const char* to_string(FfnActFormat f) {
  switch (f) {
    case FfnActFormat::fp8:
      return "fp8";
    case FfnActFormat::int8:
      return "int8";
    case FfnActFormat::nvfp4:
      return "nvfp4";
  }
  return "?";
}

FfnActQuantOp FfnActQuantOp::make(const TensorRef& input, std::string input_value, uint64_t rows,
                                  uint64_t K, FfnActFormat format) {
  FfnActQuantOp op;
  op.format = format;
  op.input = input;
  op.input_value = std::move(input_value);
  const uint64_t P = ceil16(Size(rows)).value();
  const uint64_t group = format == FfnActFormat::fp8 ? 128 : format == FfnActFormat::int8 ? 32 : 16;
  // NVFP4 packs two values per byte along a row: an odd K gets a zero tail nibble.
  const uint64_t cols = format == FfnActFormat::nvfp4 ? (Size(2) * cdiv(K, 2)).value() : K;
  op.dims = {rows, P, K, cols, group, cdiv(K, group)};
  const DType act_t = format == FfnActFormat::fp8    ? DType::fp8_e4m3
                      : format == FfnActFormat::int8 ? DType::i8
                                                     : DType::fp4_e2m1x2;
  const DType scale_t = format == FfnActFormat::nvfp4 ? DType::fp8_e4m3 : DType::f32;
  op.act = arena_tensor(BufferId::ffn_act_a, 0, {P, cols}, act_t);
  op.scale = arena_tensor(BufferId::ffn_act_scale, 0, {P, op.dims.groups}, scale_t);
  // The NVFP4 global scale follows the E4M3 group scales. P is a multiple of 16, so the
  // offset is 4-aligned, and it fits: P·cdiv(K,16) + 4 ≤ m_pad·cdiv(kmax,32)·4 whenever
  // P ≤ m_pad and K ≤ kmax (cdiv(K,16) ≤ 2·cdiv(K,32), and the other half is ≥ 32 bytes).
  op.global_scale = arena_tensor(BufferId::ffn_act_scale, op.scale.bytes(), {1}, DType::f32);
  return op;
}

std::string FfnActQuantOp::params() const {
  std::ostringstream s;
  s << "ffn_act_quant(format=" << to_string(format) << ",rows=" << dims.rows
    << ",padded=" << dims.padded_rows << ",K=" << dims.K << ",group=" << dims.group_size << ")";
  return s.str();
}

std::vector<Access> FfnActQuantOp::accesses() const {
  std::vector<Access> out = {{input, AccessKind::read, input_value},
                             {act, AccessKind::write, act_value},
                             {scale, AccessKind::write, scale_value}};
  if (format == FfnActFormat::nvfp4) out.push_back({global_scale, AccessKind::write, global_value});
  return out;
}

std::vector<Access> FfnActQuantOp::gemm_reads() const {
  std::vector<Access> out = {{act, AccessKind::read, act_value},
                             {scale, AccessKind::read, scale_value}};
  if (format == FfnActFormat::nvfp4) out.push_back({global_scale, AccessKind::read, global_value});
  return out;
}

DType FfnActQuantOp::weight_dtype() const {
  switch (format) {
    case FfnActFormat::fp8:
      return DType::fp8_e4m3;
    case FfnActFormat::int8:
      return DType::i8;
    case FfnActFormat::nvfp4:
      return DType::fp4_e2m1x2;
  }
  return DType::bf16;
}

}  // namespace bufferlab
