// Judges one GDN call per stage (spec/numerics.md §5, §9): every stage's stored outputs
// against the faithful oracle fed the backend's OWN stored inputs, under bounds derived next to
// each stage (γ terms + one storage ULP, written in oracle/src/gdn_bounds.cpp); the whole call
// against the faithful reference under a written generous bound; the exact-vs-faithful
// difference reported, never asserted. A first bad element names token, head and dim.
//
// Check names:
//   "conv1d (ssm_conv_out_f32)", "conv tail state", "gates (beta, alpha)",
//   "gc (wu)", "W (wu)", "U (wu)", "S snapshots (state)", "uc (state)", "final state (state)",
//   "core output (output)" — or "core output (recurrence)", "final state (recurrence)" —,
//   "gated norm (attn_output)", "<array> intact (<stage> input)", and the reported
//   "whole call vs faithful", "faithful vs exact".
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/moe_ffn.h"

namespace bufferlab::oracle {

AgreementReport judge_gdn(const GdnPlan& plan, const GdnInputs& in, const GdnRun& run,
                          const std::string& backend, uint64_t seed,
                          const BoundModel& bm = cpu_bounds());

}  // namespace bufferlab::oracle
