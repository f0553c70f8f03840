// `bufferlab fuzz --numeric mhc` (fuzz_numeric.h): one full-range mHC case — an op drawn from
// the case seed, its dimensions and inputs from properties/mhc_generators.h at
// gen::full_mhc_ranges() (hc up to 16, low-rank r up to 512, hidden up to 7168 and rows up to
// 4097 with the T = 2049 slab boundary, 2^30 oracle multiply-adds per case), or a deep stack
// (properties/mhc_deep_stack.h) — run on a backend and judged by the oracle's mHC judges.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/oracle/agreement_report.h"
#include "fuzz/fuzz_outcome.h"

namespace bufferlab::cli {

// check: pre, post, head, expand, lowrank-split, lowrank-slab, deep-stack; what e.g.
// "pre: hc_comb column sums".
struct MhcFuzzOutcome : NumericCaseOutcome {};

// Case `case_seed` drawn at RapidCheck size `size`. Without a mutant every op comes up (pre,
// post in place or out of place, head, expand, low-rank on its split or slab path, the deep
// stack); under B13 only the deep stack, under M-SKCOL and M-SKORDER only mhc_pre — where the
// bug catalogue expects each to be caught (the deep-stack stream check; judge_mhc_pre's column
// sums, and its element-wise comb comparison for M-SKORDER). An
// error while running or judging the drawn case is its failure ("<check>: error"); an error
// drawing it propagates.
MhcFuzzOutcome run_mhc_fuzz_case(Backend& backend, uint64_t case_seed, int size, Mutant mutant);

}  // namespace bufferlab::cli
