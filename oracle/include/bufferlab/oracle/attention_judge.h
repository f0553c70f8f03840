// Judges one attention pass (attention_harness.h) stage by stage (docs/spec/attention.md §5,
// docs/spec/numerics.md §9): every stage on the backend's OWN stored inputs against the FP64
// references of attention.h, under the bounds derived in oracle/src/attention_bounds.cpp;
// copies bit for bit.
//
// Check names (each present when the pass has the op):
//   prefill staging  "q (stage)", "k (stage)" (bounded), "q (pass-through)", "k (pass-through)"
//                    (dimensions ≥ rotary_dim without qk_norm: bit-exact), "v (copy)" (exact),
//                    "pad rows (K/V scratch)" (phantom rows: zeros)
//   cache writes     "cache write (decode K)" (bounded: the decode rows' K through the stage
//                    function), "cache write (decode, copies)" (V and every other slot, bits),
//                    "cache write (prefill)" (the scratch rows at their slots, every other slot
//                    unchanged, bits), "cache intact (cores)" (the cores write no cache)
//   cores            "attn (prefill core)", "attn (decode core)" (one split) or "partials
//                    (split-K)" then "merge"; "pad rows (decode)", "pad rows (split-K partials)"
//   gate             "gate", "attn_output rows" (attn_output = the cores' outputs, bits)
// Before each core check, two named diagnoses of its failures (they never fail on their own:
// a (row, head) fails one only when it breaks the core's bound AND agrees, within the bound,
// with the reference of the named bug):
//   "attn (<core>, causal)", "partials (split-K, causal)": the row also attended to position
//       p + 1 (M-CAUSAL);
//   "attn (<core>, GQA map)", "partials (split-K, GQA map)": query head q read KV head q % nkv
//       instead of q / (nq / nkv).
// A first bad element names (sequence, token/position, head, dim) and the report the seed.
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/attention.h"
#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/bounds.h"

namespace bufferlab::oracle {

AgreementReport judge_attention(const AttnCase& c, const AttnRun& run, const std::string& backend,
                                uint64_t seed, const BoundModel& bm = cpu_bounds());

// The checks of judge_attention one group at a time, appended to `r` — for kernel tests that run
// some ops on their own: staging (q_copy, k/v scratch, pads), cache (the writes and the cores'
// cache), core (prefill core, decode core or partials + merge), gate. Only the run fields a group
// names are read.
enum class AttnStageGroup { staging, cache, core, gate };
void judge_attention_stage(AttnStageGroup stage, const AttnCase& c, const AttnRun& run,
                           const BoundModel& bm, AgreementReport& r);

// What a backend computing every stage in FP64 on the previous stage's STORED values, rounding
// exactly where it stores (BF16 staging, cache, outputs; FP32 partials), would read back — the
// judge's self-check and the planted-bug tests start from it.
AttnRun perfect_attn_run(const AttnCase& c);

}  // namespace bufferlab::oracle
