// `bufferlab fuzz --numeric routing|experts|mhc|gdn|ssd|attention`: the numerical properties of the
// MoE routing chain (router → top-k, and the top-k alone on stored logits with ±Inf / NaN), of the
// routed-expert chain (gather → gate → up → SwiGLU → down → combine), of the mHC ops (pre,
// post, head, expand, the low-rank split and slab paths, and the deep stack) and of the SSM
// mixers (Gated DeltaNet chunked / recurrent, Mamba-2 SSD chunked / recurrent) and of
// grouped-query attention (prefill, decode, verify and mixed passes) at their FULL
// ranges, each case run on a backend and judged against the FP64 oracle, until a limit or the
// first failure, which is written as JSON with the command line that re-runs it alone.
//
// Case i of a run is a pure function of (seed, i): no shrinking beyond what the generators
// do (they halve dimensions until a case fits its cost cap).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace bufferlab::cli {

struct NumericFuzzOptions {
  std::string family;           // "routing", "experts", "mhc", "gdn", "ssd" or "attention"
  std::string backend = "cpu";  // "cpu" or "cuda"
  // A kernel mutant on the backend ("" none): B14 or M-TIE with routing, B13, M-SKCOL or
  // M-SKORDER with mhc, M-GDNCARRY with gdn, M-SSDSTATE with ssd; any other pairing is an Error.
  std::string mutant;
  uint64_t seed = 1;
  uint64_t max_cases = 0;  // cases skip ≤ i < skip + max_cases (all shards); 0: no limit
  double seconds = 0;      // 0: no limit (at least one of the two)
  uint64_t skip = 0;       // the first case index
  uint64_t shard_index = 0, shard_count = 1;
  std::string out_dir = "fuzz-out";
};

struct NumericProgress {
  uint64_t cases = 0;
  uint64_t failures = 0;
  double elapsed_s = 0;
  double rate = 0;    // cases per second
  bool done = false;  // the last call: the summary or the failure follows on stdout
};

// The families --numeric accepts, and a check that throws Error for anything else.
std::string numeric_families_list();  // "routing, experts, mhc, gdn, ssd, attention"
void check_numeric_family(const std::string& family);

// Runs the fuzz; prints the summary or the failure on stdout. Returns the exit code: 0 no
// failure, 1 a failure (written under out_dir), 77 the backend cannot run here (the reason
// printed). Throws Error for bad input (exit 2). `on_progress` is called about every 0.5 s.
int run_numeric_fuzz(const NumericFuzzOptions& opts,
                     const std::function<void(const NumericProgress&)>& on_progress);

}  // namespace bufferlab::cli
