// One case of `bufferlab fuzz --numeric attention` (fuzz_numeric_attention.h): the pass from
// the attention fuzz generator, run on its own footprint workspace by the oracle's harness and
// judged by judge_attention.
#include "fuzz/fuzz_numeric_attention.h"

#include <rapidcheck.h>

#include <exception>
#include <string>

#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/attention_inputs.h"
#include "bufferlab/oracle/attention_judge.h"
#include "bufferlab/properties/attention_fuzz_cases.h"
#include "common/backend_bounds.h"

namespace bufferlab::cli {
namespace {

const char* description_of(gen::AttnFuzzParts p) {
  switch (p) {
    case gen::AttnFuzzParts::prefill:
      return "Q copy, K, V scratch (qk_norm + RoPE) -> cache write -> varlen prefill core -> "
             "gate, judge_attention";
    case gen::AttnFuzzParts::decode:
      return "decode rows' cache write (qk_norm + RoPE) -> decode core (split-K + merge, or one "
             "split) -> gate, judge_attention";
    case gen::AttnFuzzParts::verify:
      return "verify rows' cache write -> verify core (one split) -> gate, judge_attention";
    case gen::AttnFuzzParts::mixed:
      return "decode rows and a prefill part in one pass: both cache writes, both cores, the "
             "gate over all rows, judge_attention";
  }
  return "?";
}

}  // namespace

// Measured on the 2-core development machine under a load of ~9 (other builds), 100 cases
// each: the CPU backend at 2^22 takes ~80 ms of CPU per case (4.8 cases/s wall), the kernel
// simulator at 2^18 ~115 ms (3.6 cases/s wall; every launch runs twice there). A real GPU's
// cases are judged on the host, as the CPU's: the CPU cap.
uint64_t attention_fuzz_cost_cap(const std::string& backend_name) {
  return backend_name == "cuda-sim" ? uint64_t{1} << 18 : uint64_t{1} << 22;
}

AttentionFuzzOutcome run_attention_fuzz_case(Backend& backend, uint64_t cs, int size) {
  const rc::Random random(cs);
  const gen::AttnFuzzCase a =
      gen::attn_fuzz_case(attention_fuzz_cost_cap(backend.name()))(random, size).value();
  AttentionFuzzOutcome o;
  o.description = a.describe();
  o.check = std::string("attn-") + gen::to_string(a.parts);
  o.check_description = description_of(a.parts);
  try {
    const oracle::AttnCase c = oracle::make_attn_case(a.spec, a.seed);
    const oracle::AttnPlan plan = oracle::plan_attention(c);
    const Workspace ws = oracle::allocate_attention_footprint(backend, plan);
    const oracle::AttnRun run = oracle::run_attention(backend, ws, plan, c);
    o.finish(oracle::judge_attention(c, run, backend.name(), a.seed, bounds_of(backend)));
  } catch (const std::exception& e) {
    o.passed = false;
    o.what = o.check + ": error";
    o.report = std::string("error: ") + e.what() + "\n";
  }
  return o;
}

}  // namespace bufferlab::cli
