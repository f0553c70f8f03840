// Judges one GDN call per stage (docs/spec/numerics.md §5, §9): every stage's stored outputs
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
#include <vector>

#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"

namespace bufferlab::oracle {

AgreementReport judge_gdn(const GdnPlan& plan, const GdnInputs& in, const GdnRun& run,
                          const std::string& backend, uint64_t seed,
                          const BoundModel& bm = cpu_bounds());

// The checks of judge_gdn one stage group at a time, appended to `r` — for kernel tests that run
// some stage ops on their own inputs (tests/kernels/gdn_*): conv (in.deint, conv_w, conv_state
// → run.conv, conv_state), gates (in.ba, a_log, dt_bias → run.gates), core (the chunk stages
// or the recurrence, per run.path, from the stored run.conv, gates, state_in; the chunked
// path's *_before_* copies are judged "intact"), norm (run.core, in.deint, norm_w →
// run.normed). Only the inputs and run fields a group names are read.
enum class GdnStageGroup { conv, gates, core, norm };
void judge_gdn_stage(GdnStageGroup stage, const GdnDims& dims, const GdnInputs& in,
                     const GdnRun& run, const BoundModel& bm, AgreementReport& r);

// How close a bounded check came to its bound: over the compared elements, the smallest
// bound / |backend − oracle| (elements with a zero difference skipped; +Inf when all agree
// exactly), the largest difference and the largest bound. For reporting the slack of each
// stage's derived bound on a typical case.
struct GdnCheckSlack {
  std::string check;
  double min_ratio = 0.0;
  double max_err = 0.0;
  double max_bound = 0.0;
};
// What a backend computing every stage in FP64 from its OWN stored inputs, and storing FP32 /
// BF16 exactly where ops/gdn.h pins it, reads back (each stage from the previous stage's stored
// values, so the run is consistent with itself): the judge's self-check and the planted-bug
// tests start from it.
GdnRun oracle_gdn_run(const GdnPlan& plan, const GdnInputs& in);

// judge_gdn, also filling `slack` (one entry per per-element-bounded check).
AgreementReport judge_gdn(const GdnPlan& plan, const GdnInputs& in, const GdnRun& run,
                          const std::string& backend, uint64_t seed, const BoundModel& bm,
                          std::vector<GdnCheckSlack>* slack);

}  // namespace bufferlab::oracle
