// One FusedAddRmsNormOp run on a backend, through the core interface only.
#include "bufferlab/oracle/rmsnorm_harness.h"

#include <algorithm>
#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "harness_io.h"

namespace bufferlab::oracle {
namespace {

using detail::grow_to_hold;
using detail::upload_exact;

}  // namespace

Layout footprint_layout(const FusedAddRmsNormOp& op) {
  BufferSizes sizes;
  for (const Access& a : op.accesses()) grow_to_hold(sizes, a.tensor);
  grow_to_hold(sizes, op.output_f32);
  return Layout::build(sizes);
}

RmsNormOutputs run_fused_add_rmsnorm(Backend& backend, const Workspace& ws,
                                     const FusedAddRmsNormOp& op, const RmsNormInputs& in) {
  backend.poison(ws);
  if (op.variant.add_residual) upload_exact(backend, ws, op.input, in.input);
  upload_exact(backend, ws, op.residual, in.residual);
  if (!op.variant.unit_weight) upload_exact(backend, ws, op.weight, in.weight);
  backend.execute(ws, op);
  backend.synchronize();

  RmsNormOutputs out;
  out.residual.resize(op.residual.elements());
  out.output.resize(op.output.elements());
  backend.download(ws, op.residual, out.residual.data());
  backend.download(ws, op.output, out.output.data());
  if (op.variant.write_f32) {
    out.output_f32.resize(op.output_f32.elements());
    backend.download(ws, op.output_f32, out.output_f32.data());
  }
  return out;
}

}  // namespace bufferlab::oracle
