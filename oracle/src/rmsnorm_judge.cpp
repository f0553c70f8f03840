// Per-stage judgement of FusedAddRmsNormOp against the faithful oracle.
#include "bufferlab/oracle/rmsnorm_judge.h"

#include "bufferlab/oracle/mode.h"

namespace bufferlab::oracle {
AgreementReport judge_fused_add_rmsnorm(const FusedAddRmsNormOp& op, const RmsNormInputs& in,
                                        const RmsNormOutputs& out, const std::string& backend,
                                        uint64_t seed) {
  const uint64_t width = op.shape().width;
  const RmsNormTolerances tol = fused_add_rmsnorm_tolerances(op);
  AgreementReport r{"rmsnorm", op.params(), backend, seed, {}, {}};

  const RmsNormReference faithful = fused_add_rmsnorm(op, in, Mode::faithful);
  r.checks.push_back(
      compare_bf16("residual", out.residual, faithful.residual, width, tol.residual));

  const RmsNormReference norm = norm_of_stored_residual(op, out.residual, in.weight);
  r.checks.push_back(compare_bf16("norm_output", out.output, norm.output, width, tol.output));
  if (op.variant.write_f32)
    r.checks.push_back(
        compare_f32("moe_router_in_f32", out.output_f32, norm.output, width, tol.output_f32));

  const RmsNormReference exact = fused_add_rmsnorm(op, in, Mode::exact);
  r.reported.push_back(compare_f64("norm_output (exact-faithful)", faithful.output, exact.output,
                                   width, Tolerance{}, /*asserted=*/false));
  return r;
}

}  // namespace bufferlab::oracle
