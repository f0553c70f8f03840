// Judges one Mamba-2 call per stage (docs/spec/numerics.md §6, §9) on the backend's own stored
// inputs, under bounds derived in oracle/src/mamba2_bounds.cpp; the whole call against the
// faithful reference under a written generous bound; faithful-vs-exact reported.
//
// Check names: "conv1d (xBC)", "conv tail state", "dt (cumsum)", "dA_cumsum (cumsum)",
// "CB (bmm)", "y (scan)", "final state (scan)" — or "y (recurrence)", "final state
// (recurrence)" —, "gated norm (norm_output)", "<array> intact (scan input)", and the reported
// "whole call vs faithful", "faithful vs exact". A first bad element names token, head, dim.
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_harness.h"

namespace bufferlab::oracle {

AgreementReport judge_mamba2(const Mamba2Plan& plan, const Mamba2Inputs& in, const Mamba2Run& run,
                             const std::string& backend, uint64_t seed,
                             const BoundModel& bm = cpu_bounds());

// The checks of judge_mamba2 one stage group at a time, appended to `r` — for kernel tests that
// run some stage ops on their own inputs (tests/kernels/mamba2_*): conv (in → run.xbc,
// conv_state), core (the chunked stages per sequence or the recurrence, per run.path, on the
// stored run.xbc and the run's per-sequence reads; dt from in.zxbcdt, dt_bias; A, D from
// in.a_log, in.D), norm (run.y, in.zxbcdt, norm_w → run.normed). Only the inputs and run fields
// a group names are read.
enum class Mamba2StageGroup { conv, core, norm };
void judge_mamba2_stage(Mamba2StageGroup stage, const Mamba2Dims& dims, const Mamba2Inputs& in,
                        const Mamba2Run& run, const BoundModel& bm, AgreementReport& r);

// What a backend computing every stage in FP64 on the previous stage's STORED values, and
// rounding exactly where it stores (BF16 xBC, y, normed; FP32 dt, dA_cumsum, CB, state), would
// read back — the judge's self-check and the planted-bug tests start from it.
Mamba2Run perfect_mamba2_run(const Mamba2Plan& plan, const Mamba2Inputs& in);

}  // namespace bufferlab::oracle
