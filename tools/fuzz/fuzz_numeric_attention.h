// `bufferlab fuzz --numeric attention` (fuzz_numeric.h): one grouped-query attention pass drawn
// by properties/attention_fuzz_cases.h — geometry (GQA and MQA, hd 16–256, partial rotary,
// interleaved RoPE, qk_norm, gated, sinks, MRoPE), the RoPE type, sliding windows, the paged
// cache's block size, prefill streams and contexts, decode rows / live / splits, verify — under
// a cost cap chosen per backend, run through the oracle's attention harness and judged stage by
// stage by judge_attention.
#pragma once

#include <cstdint>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/sizing.h"
#include "fuzz/fuzz_outcome.h"

namespace bufferlab::cli {

struct AttentionFuzzOutcome : NumericCaseOutcome {};

// The cost cap of a case on `backend_name` (gen::attn_fuzz_cost): a case takes well under a
// second on the CPU backend and on the kernel simulator.
uint64_t attention_fuzz_cost_cap(const std::string& backend_name);

// Case `case_seed` drawn at RapidCheck size `size`; check "attn-<parts>" (attn-prefill,
// attn-decode, attn-verify, attn-mixed). No attention kernel mutant exists yet: a mutant is
// only passed on to the backend (fuzz_numeric.cpp checks it belongs to this family). An error
// while running or judging is the case's failure ("<check>: error").
AttentionFuzzOutcome run_attention_fuzz_case(Backend& backend, uint64_t case_seed, int size);

}  // namespace bufferlab::cli
