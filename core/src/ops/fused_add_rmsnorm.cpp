// FusedAddRmsNormOp: operands and footprint from op semantics (rows, width), never from
// BufferSizes — the verifier compares the two.
#include "bufferlab/core/ops/fused_add_rmsnorm.h"

#include <cstdio>
#include <string>
#include <utility>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"

namespace bufferlab {
namespace {

TensorRef arena(BufferId id, std::vector<uint64_t> shape, DType t) {
  return TensorRef{Space::arena, id, 0, std::move(shape), t};
}

// An operand must hold exactly the elements the op's shape says, or a kernel's row loop would
// leave the tensor that Workspace::resolve checked.
void require_elements(const TensorRef& t, uint64_t elements, const FusedAddRmsNormOp& op) {
  if (t.elements() != elements)
    throw Error(op.params() + ": operand " + t.to_string() + " does not hold the " +
                std::to_string(elements) + " elements of the op's shape");
}

}  // namespace

FusedAddRmsNormOp::Bound FusedAddRmsNormOp::bind(const Workspace& ws) const {
  const uint64_t n = (Size(dims.rows) * dims.width).value();
  Bound b;
  require_elements(residual, n, *this);
  b.residual = ws.data<uint16_t>(residual);
  if (variant.add_residual) {
    require_elements(input, n, *this);
    b.input = ws.data<const uint16_t>(input);
  }
  require_elements(weight, dims.width, *this);
  b.weight = ws.data<const uint16_t>(weight);
  require_elements(output, n, *this);
  b.output = ws.data<uint16_t>(output);
  if (variant.write_f32) {
    require_elements(output_f32, n, *this);
    b.output_f32 = ws.data<float>(output_f32);
  }
  return b;
}

FusedAddRmsNormOp FusedAddRmsNormOp::make(const ModelConfig& config, uint64_t rows,
                                          RmsNormVariant variant) {
  return make(config, rows, variant, RmsNormBuffers{}, RmsNormValues{});
}

FusedAddRmsNormOp FusedAddRmsNormOp::make(const ModelConfig& config, uint64_t rows,
                                          RmsNormVariant variant, const RmsNormBuffers& buffers,
                                          RmsNormValues values) {
  FusedAddRmsNormOp op;
  op.values = std::move(values);
  op.dims = Shape{rows, config.hidden_size};
  op.eps = config.rms_norm_eps;
  op.variant = variant;
  const uint64_t w = op.dims.width;
  op.input = arena(buffers.input, {rows, w}, DType::bf16);
  op.residual = arena(buffers.residual, {rows, w}, DType::bf16);
  op.weight = variant.unit_weight
                  ? arena(BufferId::norm_unit_w, {w}, DType::bf16)
                  : TensorRef{Space::weights, BufferId::hidden_states, 0, {w}, DType::bf16};
  op.output = arena(buffers.output, {rows, w}, DType::bf16);
  op.output_f32 = arena(BufferId::moe_router_in_f32, {rows, w}, DType::f32);
  return op;
}

uint64_t FusedAddRmsNormOp::weight_pool_bytes() const {
  return variant.unit_weight ? 0 : weight.bytes();
}

std::vector<Access> FusedAddRmsNormOp::accesses() const {
  std::vector<Access> out;
  if (variant.add_residual) out.push_back({input, AccessKind::read, values.input});
  out.push_back({residual, AccessKind::read, values.residual_in});
  if (variant.add_residual) out.push_back({residual, AccessKind::write, values.residual_out});
  out.push_back({weight, AccessKind::read, {}});
  out.push_back({output, AccessKind::write, values.output});
  if (variant.write_f32) out.push_back({output_f32, AccessKind::write, values.output_f32});
  return out;
}

std::string FusedAddRmsNormOp::params() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "rmsnorm(rows=%llu,width=%llu,eps=%g,add=%d,f32=%d,unit_w=%d)",
                static_cast<unsigned long long>(dims.rows),
                static_cast<unsigned long long>(dims.width), eps, variant.add_residual ? 1 : 0,
                variant.write_f32 ? 1 : 0, variant.unit_weight ? 1 : 0);
  return buf;
}

}  // namespace bufferlab
