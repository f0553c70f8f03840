// The cases of `bufferlab fuzz --numeric attention`: one grouped-query attention pass
// (oracle/attention_inputs.h's AttnCaseSpec and a seed) with every feature drawn on its own,
// not from a model-shaped flavour (attention_generators.h has those for the properties):
//   geometry   hd ∈ {16, 32, 64, 128, 256}; nkv ∈ {1 (MQA), 2, 4, 8}, nq = nkv · group with
//              group ∈ [1, 8]; partial rotary factor ∈ {1, 3/4, 1/2, 1/4}; rope_interleaved;
//              qk_norm; gated; sinks
//   RoPE       rope_type default, linear, llama3 or yarn (truncate on or off) with their
//              ModelConfig fields, theta from the shipped configs'; MRoPE in a quarter of the
//              cases (three sections summing to rotary_dim / 2, interleaved or not), positions
//              t ≠ h ≠ w in three cases of four, t = h = w otherwise; a position offset
//   window     a sliding layer in a third of the cases, W ∈ [1, 160]
//   cache      block size ∈ {1, 3, 5, 7, 16, 32, 64}, 0–2 spare blocks, shuffled physical
//              numbering in seven cases of eight
//   parts      prefill (streams ∈ [1, 8], L ∈ [1, 300], per-stream context ∈ [0, 700], often
//              at a block edge; K/V scratch padded to 16 rows sometimes), decode (R ∈ [1, 16]
//              rows, live ∈ [0, R], splits ∈ [1, 8], context ∈ [0, 2000]), verify (one split)
//              or mixed (decode rows and a prefill part in one pass)
//   values     Q and K scales 1 or 4 (peaked softmax), sink scale 1 or 4
// Booleans and ranges follow RapidCheck's size (small sizes draw small, plain cases). The case
// is then reduced — contexts above 32 and L above 16 halved first (a case keeps its GQA shape
// where it can), then fewer query heads per KV head, shorter contexts, fewer tokens, streams
// and rows, fewer KV heads, narrower heads — until attn_fuzz_cost fits the cap the caller
// gives: the cost is what the backend and the FP64 judge do, so the cap sets a case's time
// (the fuzz picks it per backend).
#pragma once

#include <cstdint>
#include <string>

#include <rapidcheck.h>

#include "bufferlab/oracle/attention_inputs.h"

namespace bufferlab::gen {

enum class AttnFuzzParts { prefill, decode, verify, mixed };
const char* to_string(AttnFuzzParts p);

struct AttnFuzzCase {
  AttnFuzzParts parts = AttnFuzzParts::prefill;
  oracle::AttnCaseSpec spec;
  uint64_t seed = 0;  // make_attn_case's
  // Every drawn field, the seed included: enough to rebuild the spec by hand.
  std::string describe() const;
};

// Σ over query rows of the keys it may see · nq · hd (scores and V sums), plus the staging
// (rows · (nq + nkv) · hd) and the cache the harness uploads and the judge compares whole
// (slots · nkv · hd, four times: before, after each write, after the cores).
uint64_t attn_fuzz_cost(const oracle::AttnCaseSpec& s);

// The case at `cost_cap` (e.g. 2^22 on the CPU backend).
rc::Gen<AttnFuzzCase> attn_fuzz_case(uint64_t cost_cap);

}  // namespace bufferlab::gen
