// The mHC deep-stack property (docs/spec/numerics.md §3, §9; bug-catalogue B13): `layers` layers of
// mhc_pre (backend) → a host block → hc_post in place (backend) on FP32 streams that start as
// mhc_expand of a BF16 embedding, against the faithful FP64 oracle running the same stack
// (streams in FP64; block input and block output rounded to BF16 where the backend stores
// them), under a per-element bound on the final |streams_backend − streams_oracle| derived on
// paper in mhc_deep_stack.cpp and evaluated layer by layer along the oracle's trajectory.
//
// The block is diagonal and linear, block_out[t, d] = bf16(c_l[d]·block_in[t, d]) with c_l[d]
// in (block_gain / hc)·[3/4, 1): every block output has the sign of its block input (≈ the
// streams), so the residual highway GROWS layer after layer — by ≈ 0.15% per layer, ×1.06
// over 40 layers — while each layer's update |post_j·block_out| stays below 2^-9·|x| (post < 2,
// Σ pre ≤ hc, block_gain ≤ 2^-10 with the BF16 roundings' margin), i.e. below half a BF16 ULP
// of the stream: the small per-layer signal a BF16 highway (B13) drops entirely. The pre and
// post biases are shifted by weight_bias (pre ≈ 0.95, post ≈ 1.9) so the updates sit close to
// that limit, and the mix weights are scaled down (s0 = s1 = mix_scale, s2 = comb_scale·L) so
// the pre / post weights and the comb depend on the streams only weakly: the bound's gain on
// stream errors stays near 1 per layer. Measured on the CPU: FP32 error / bound ≤ 0.1 (mostly
// < 0.01), B13 error / bound ≈ 100.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <rapidcheck.h>

#include "bufferlab/core/backend.h"
#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/moe_ffn.h"  // BoundModel

namespace bufferlab::gen {

struct DeepStackCase {
  uint64_t hc = 4, h = 16, rows = 2;
  uint64_t layers = 40;
  uint64_t iters = 20;            // hc_sinkhorn_iters
  double logit_range = 1.0;       // L of every layer's comb logits (oracle MhcInputProfile)
  double block_gain = 0x1.fp-11;  // 31/32 · 2^-10
  double weight_bias = 3.0;
  double mix_scale = 0.25;
  double comb_scale = 0x1p-8;
  uint64_t seed = 1;

  std::string describe() const;  // one line: every field, the seed included
};
void showValue(const DeepStackCase& c, std::ostream& os);

// L stays ≤ a few units: the bound's comb term grows like 1/(1 − κ), κ = tanh(Δ/4) and Δ ≤ 2L
// the comb kernel's projective diameter, and past L ≈ 5 it no longer separates B13.
struct DeepStackRanges {
  uint64_t max_mhc = 4, max_h = 32, max_rows = 4, layers = 40, max_iters = 20;
  double max_logit_range = 2.0;
};
// hc, h, rows, iters and the logit range drawn; the block and mix scales are the defaults.
rc::Gen<DeepStackCase> deep_stack_case(const DeepStackRanges& ranges = {});

// The check that fails for a wrong highway (B13's expected finding).
inline constexpr const char* kDeepStackCheck = "hc_streams (deep stack)";

struct DeepStackResult {
  // op "mhc_deep_stack": checks = {kDeepStackCheck: the final streams against the faithful
  // oracle under the derived per-element bound}; reported = {the faithful oracle against the
  // exact one (no BF16 block storage)}.
  oracle::AgreementReport report;
  double worst_ratio = 0.0;  // max over the final elements of |Δ| / bound (NaN counts as +Inf)
  uint64_t token = 0, stream = 0, dim = 0;  // where
  double backend_value = 0.0, oracle_value = 0.0, bound = 0.0;
  double max_error = 0.0, max_bound = 0.0;    // over the final elements
  double growth_min = 0.0, growth_max = 0.0;  // |x_L| / |x_0| of the oracle, x_0 ≠ 0
  double rms_growth = 0.0;                    // RMS of x_L / RMS of x_0, all tokens
  double block_share_max = 0.0;               // max |post_j·block_out| / |x| of any layer
  bool passed() const { return report.passed(); }
};

// Runs the stack on `backend` (its kernel mutant, if any, included) and judges the final
// streams. `bm`: the judged backend's roundoffs (oracle::cpu_bounds() / device_bounds()).
DeepStackResult run_mhc_deep_stack(Backend& backend, const DeepStackCase& c,
                                   const oracle::BoundModel& bm);

// One line: worst error / bound and where, the growth and the block share.
std::string summarize(const DeepStackResult& r);

// The stack's FP64 pre step (it runs on FP64 streams; oracle::mhc_pre takes FP32 ones) against
// oracle::mhc_pre in faithful mode on the case's first layer, whose streams (the expanded
// embedding) are exact in FP32: the largest |difference| over pre, post, comb and the BF16
// block input. 0 expected — the same formulas in the same order.
double deep_stack_oracle_self_check(const DeepStackCase& c);

}  // namespace bufferlab::gen
