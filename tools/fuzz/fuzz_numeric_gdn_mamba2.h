// `bufferlab fuzz --numeric gdn|ssd` (fuzz_numeric.h): one full-range case of Gated DeltaNet or
// Mamba-2 SSD — config, sequences, length, path and input profile drawn by
// properties/gdn_mamba2_generators.h at gen::full_gdn_ranges() / full_mamba2_ranges() (up to 16
// co-dispatched sequences, L up to 4096 with the chunk edges favoured, 2^30 oracle
// multiply-adds per case) — run on a backend over its footprint layout and judged stage by
// stage by the oracle's judge.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/oracle/agreement_report.h"
#include "fuzz/fuzz_outcome.h"

namespace bufferlab::cli {

// check: gdn-chunked, gdn-recurrent, ssd-chunked, ssd-recurrent; what e.g. "gdn-chunked: final
// state (state)"; description: every field, the seed included.
struct GdnMamba2FuzzOutcome : NumericCaseOutcome {
  // The case without the fuzz: its model in the normalized (preset-free) config form, and the
  // `bufferlab compare` options that re-run it from a file holding that config (empty when
  // compare cannot express the case: an input scale other than 1).
  nlohmann::json config;
  std::string compare_options;
};

// Case `case_seed` drawn at RapidCheck size `size`. Under a kernel mutant only the cases that
// run the kernel it changes are drawn (redrawn from seeds derived from case_seed): the chunked
// path for M-GDNCARRY, the chunked path with more than one chunk per sequence and typical dt
// (a state that survives from one chunk to the next) for M-SSDSTATE.
// An error while running or judging is the case's failure ("<check>: error"); an error
// drawing it propagates.
GdnMamba2FuzzOutcome run_gdn_fuzz_case(Backend& backend, uint64_t case_seed, int size,
                                       Mutant mutant);
GdnMamba2FuzzOutcome run_mamba2_fuzz_case(Backend& backend, uint64_t case_seed, int size,
                                          Mutant mutant);

}  // namespace bufferlab::cli
