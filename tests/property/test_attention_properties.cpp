// Bit-exact invariance properties of attention (docs/spec/attention.md §4; ops/attention.h pins
// the reductions) on the CPU backend, over the passes of properties/attention_generators.h
// (every flavour: gated + qk_norm + partial rotary, sliding + sinks + yarn, MRoPE, llama3,
// plain partial rotary; 1..3 streams of 1..20 tokens, contexts up to 40, 1..5 decode rows with
// 1..3 splits, block sizes 1, 2, 5, 16, shuffled blocks and poisoned free slots):
//   0. every stage of the CPU pass passes oracle::judge_attention on its own stored inputs;
//   1. prefill in two chunks (with the first chunk's cache) equals one shot;
//   2. every stream and decode row equals itself run alone;
//   3. renumbering the physical blocks changes no bit;
//   4. the live batch at fixed R changes no live row's bit;
//   5. keys outside every causal / sliding range set to NaN change no visible bit;
//   6. decoding the prefill tokens writes the same K/V bits and (one split) the same outputs;
//   7. MRoPE with t = h = w equals 1-D RoPE;
//   8. dimensions past rotary_dim pass through (no qk_norm);
//   9. padding decode rows read nothing (NaN in their blocks) and write zeros;
//  10. OMP_NUM_THREADS 1 and 2 give the same bits.
// Every property has a planted twin (suite AttnPlanted) that must fail: the bodies'
// (properties/attention_checks.h) `plant` variants; for the judge one stored attn_output bit
// flipped; for the thread count a different input under 2 threads.
//
// Cost: gen::attn_case_cost ≤ 2^17 per case (ci_attn_ranges); the bodies run the harness two to
// four times per case (the CPU backend ~1 ns per cost unit).
#include <gtest/gtest.h>

#include <omp.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <algorithm>

#include <cstdint>
#include <string>

#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/attention_inputs.h"
#include "bufferlab/oracle/attention_judge.h"
#include "bufferlab/properties/attention_checks.h"
#include "bufferlab/properties/attention_generators.h"
#include "cpu_backend.h"
#include "report_checks.h"

namespace bufferlab::attention_properties {
namespace {

using gen::AttnGenCase;
using gen::AttnParts;
using oracle::AttnCase;
using U = uint64_t;

Backend& cpu() { return testing::cpu_backend(); }

AttnCase make(const AttnGenCase& g) { return oracle::make_attn_case(g.spec, g.seed); }

rc::Gen<AttnGenCase> cases(AttnParts parts, U min_context = 0) {
  return gen::attn_case(gen::ci_attn_ranges(), parts, min_context);
}

// Runs `body(case, plant)`; the property holds ("" returned) or, planted, fails.
template <class Body>
void holds(const AttnGenCase& g, bool plant, Body body) {
  const AttnCase c = make(g);
  const std::string r = body(c, plant);
  if (plant)
    RC_ASSERT(!r.empty());
  else if (!r.empty())
    RC_FAIL(r);
}

// ---- 1. chunk ----
void chunk(bool plant) {
  const AttnGenCase g = *cases(AttnParts::mixed);
  RC_PRE(g.spec.L >= 2);
  const U a = *rc::gen::inRange<U>(1, g.spec.L);
  holds(g, plant,
        [&](const AttnCase& c, bool p) { return gen::attn_chunk_invariance(cpu(), c, a, p); });
}
RC_GTEST_PROP(AttnProperty, ChunkedPrefillEqualsOneShot, ()) { chunk(false); }
RC_GTEST_PROP(AttnPlanted, ChunkWithoutTheFirstChunksCacheDiffers, ()) { chunk(true); }

// ---- 2. alone ----
RC_GTEST_PROP(AttnProperty, EveryStreamAndDecodeRowEqualsItselfAlone, ()) {
  holds(*cases(AttnParts::mixed), false,
        [](const AttnCase& c, bool p) { return gen::attn_alone_invariance(cpu(), c, p); });
}
RC_GTEST_PROP(AttnPlanted, AloneWithItsOwnValueChangedDiffers, ()) {
  holds(*cases(AttnParts::mixed), true,
        [](const AttnCase& c, bool p) { return gen::attn_alone_invariance(cpu(), c, p); });
}

// ---- 3. block numbering ----
void numbering(bool plant) {
  const AttnGenCase g = *cases(AttnParts::mixed, plant ? 1 : 0);
  const U seed = *rc::gen::arbitrary<U>();
  holds(g, plant, [&](const AttnCase& c, bool p) {
    return gen::attn_block_numbering_invariance(cpu(), c, seed, p);
  });
}
RC_GTEST_PROP(AttnProperty, PhysicalBlockNumberingChangesNoBit, ()) { numbering(false); }
// Whether some sequence's VISIBLE cached-prefix keys live in a different set of physical blocks
// in `b` than in `a` (prefill stream: keys [ctx − W + 1, ctx) the first row sees; decode row:
// [p − W + 1, p) with p = seq_len − 1; W = ∞ on a full layer).
bool prefix_block_sets_differ(const AttnCase& a, const AttnCase& b) {
  const U mb = a.cache.max_blocks, bs = a.cache.block_size;
  const U window = a.sliding ? a.geom.window : 0;
  const auto differ = [&](const std::vector<int32_t>& ta, const std::vector<int32_t>& tb, U row,
                          U p) {  // the keys [lo, p) before position p
    const U lo = window == 0 || p < window ? 0 : p - window + 1;
    if (lo >= p) return false;
    const auto blocks = [&](const std::vector<int32_t>& t) {
      std::vector<int32_t> x(t.begin() + static_cast<std::ptrdiff_t>(row * mb + lo / bs),
                             t.begin() + static_cast<std::ptrdiff_t>(row * mb + (p - 1) / bs + 1));
      std::sort(x.begin(), x.end());
      return x;
    };
    return blocks(ta) != blocks(tb);
  };
  for (U s = 0; s < a.prefill.streams; ++s)
    if (differ(a.prefill.block_table, b.prefill.block_table, s,
               static_cast<U>(std::max(a.prefill.ctx_lens[s], 0))))
      return true;
  for (U r = 0; r < a.decode.live; ++r)
    if (differ(a.decode.block_table, b.decode.block_table, r,
               static_cast<U>(std::max(a.decode.seq_lens[r] - 1, 0))))
      return true;
  return false;
}

RC_GTEST_PROP(AttnPlanted, LogicalBlockUsedAsPhysicalDiffers, ()) {
  // The renumbering must move a block some row reads: a cached prefix (min_context 1) and at
  // least two blocks (a permutation of one block is the identity).
  const AttnGenCase g = *cases(AttnParts::mixed, 1);
  const AttnCase c = make(g);
  RC_PRE(c.cache.num_blocks >= 2);
  const U seed = *rc::gen::arbitrary<U>();
  // A permutation that fixes every block a sequence reads leaves the twin equal: skip those.
  const AttnCase moved = oracle::renumber_blocks(c, seed);
  RC_PRE(moved.prefill.block_table != c.prefill.block_table ||
         moved.decode.block_table != c.decode.block_table);
  // ... and that changes the SET of blocks holding some sequence's cached prefix: a permutation
  // within one sequence's prefix blocks only reorders its keys (softmax is order-free up to
  // rounding the BF16 output usually hides), and one among blocks still holding poison (the
  // pass's own new slots, written before any core reads them) moves nothing a core reads.
  RC_PRE(prefix_block_sets_differ(c, moved));
  RC_ASSERT(!gen::attn_block_numbering_invariance(cpu(), c, seed, true).empty());
}

// ---- 4. live batch ----
void live_batch(bool plant) {
  const AttnGenCase g = *cases(AttnParts::decode);
  const U n = *rc::gen::inRange<U>(1, g.spec.live + 1);
  holds(g, plant,
        [&](const AttnCase& c, bool p) { return gen::attn_live_batch_invariance(cpu(), c, n, p); });
}
RC_GTEST_PROP(AttnProperty, LiveBatchAtFixedRowsChangesNoLiveBit, ()) { live_batch(false); }
RC_GTEST_PROP(AttnPlanted, LiveBatchWithARowsValueChangedDiffers, ()) { live_batch(true); }

// ---- 5. invisible keys ----
RC_GTEST_PROP(AttnProperty, InvisibleKeysNanChangeNoBit, ()) {
  holds(*cases(AttnParts::mixed), false,
        [](const AttnCase& c, bool p) { return gen::attn_invisible_keys_invariance(cpu(), c, p); });
}
RC_GTEST_PROP(AttnPlanted, NanInsideTheWindowChangesBits, ()) {
  holds(*cases(AttnParts::mixed), true,
        [](const AttnCase& c, bool p) { return gen::attn_invisible_keys_invariance(cpu(), c, p); });
}

// ---- 6. staged = decoded ----
RC_GTEST_PROP(AttnProperty, DecodedTokensMatchTheirStagedPrefill, ()) {
  holds(*cases(AttnParts::prefill), false,
        [](const AttnCase& c, bool p) { return gen::attn_staged_equals_decoded(cpu(), c, p); });
}
RC_GTEST_PROP(AttnPlanted, DecodedAtTheNextPositionDiffers, ()) {
  holds(*cases(AttnParts::prefill), true,
        [](const AttnCase& c, bool p) { return gen::attn_staged_equals_decoded(cpu(), c, p); });
}

// ---- 7. MRoPE t = h = w ----
void mrope(bool plant) {
  const AttnGenCase g =
      *gen::attn_case_of(gen::AttnFlavour::qwen25_vl, gen::ci_attn_ranges(), AttnParts::mixed);
  const std::string r = gen::attn_mrope_equal_is_1d(cpu(), g.spec, g.seed, plant);
  if (plant)
    RC_ASSERT(!r.empty());
  else if (!r.empty())
    RC_FAIL(r);
}
RC_GTEST_PROP(AttnProperty, MropeWithEqualStreamsIsOneDimensionalRope, ()) { mrope(false); }
RC_GTEST_PROP(AttnPlanted, MropeWithDistinctStreamsDiffers, ()) { mrope(true); }

// ---- 8. pass-through past rotary_dim ----
void pass_through(bool plant) {
  const AttnGenCase g =
      *gen::attn_case_of(gen::AttnFlavour::plain, gen::ci_attn_ranges(), AttnParts::mixed);
  const AttnCase c = make(g);
  if (plant) {  // the twin needs a rotated token: some position > 0
    bool moved = false;
    for (uint32_t p : c.prefill.positions) moved = moved || p > 0;
    for (U r = 0; r < c.decode.live; ++r) moved = moved || c.decode.positions[r] > 0;
    RC_PRE(moved);
  }
  const std::string r = gen::attn_rotary_pass_through(cpu(), c, plant);
  if (plant)
    RC_ASSERT(!r.empty());
  else if (!r.empty())
    RC_FAIL(r);
}
RC_GTEST_PROP(AttnProperty, DimensionsPastRotaryDimPassThrough, ()) { pass_through(false); }
RC_GTEST_PROP(AttnPlanted, RotatedDimensionsDoNotPassThrough, ()) { pass_through(true); }

// ---- 9. padding rows ----
void padding(bool plant) {
  const AttnGenCase g = *cases(AttnParts::decode, plant ? 1 : 0);
  // Twin: row 0 stays live (n = 1) and its cached prefix (min_context 1) turns NaN.
  const U n = plant ? 1 : *rc::gen::inRange<U>(1, g.spec.live + 1);
  holds(g, plant,
        [&](const AttnCase& c, bool p) { return gen::attn_padding_rows(cpu(), c, n, p); });
}
RC_GTEST_PROP(AttnProperty, PaddingRowsReadNothingAndWriteZeros, ()) { padding(false); }
RC_GTEST_PROP(AttnPlanted, NanInALiveRowsBlocksChangesBits, ()) { padding(true); }

// ---- 0. the judge: every stage of the CPU pass on its own stored inputs ----
RC_GTEST_PROP(AttnProperty, CpuPassPassesTheJudge, ()) {
  const AttnGenCase g = *cases(AttnParts::mixed);
  const AttnCase c = make(g);
  testing::require_passed(
      oracle::judge_attention(c, oracle::run_attention(cpu(), c), "cpu", g.seed));
}
RC_GTEST_PROP(AttnPlanted, OneStoredOutputBitFlippedFailsTheJudge, ()) {
  const AttnGenCase g = *cases(AttnParts::mixed);
  const AttnCase c = make(g);
  oracle::AttnRun r = oracle::run_attention(cpu(), c);
  // The exponent's top bit of one attn_output element before the gate: a factor 2^±64.
  const U e = *rc::gen::inRange<U>(0, r.attn.size());
  r.attn[e] ^= 0x2000;
  RC_ASSERT(!oracle::judge_attention(c, r, "cpu", g.seed).passed());
}

// ---- 10. thread count ----
// One pass under omp_set_num_threads(n); the count restored after.
oracle::AttnRun run_threads(const AttnCase& c, int threads) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  oracle::AttnRun r = oracle::run_attention(cpu(), c);
  omp_set_num_threads(before);
  return r;
}

std::string runs_differ(const AttnCase& c, const oracle::AttnRun& a, const oracle::AttnRun& b) {
  const U qw = c.geom.q_width(), kw = c.geom.kv_width();
  for (const std::string& d :
       {gen::attn_bits_differ(a.q_copy, b.q_copy, qw, "q_copy"),
        gen::attn_bits_differ(a.k_scratch, b.k_scratch, kw, "k_scratch"),
        gen::attn_bits_differ(a.k_cache, b.k_cache, kw, "K cache"),
        gen::attn_bits_differ(a.partials, b.partials, c.geom.hd + 2, "partials"),
        gen::attn_bits_differ(a.attn, b.attn, qw, "attn_output"),
        gen::attn_bits_differ(a.gated, b.gated, qw, "gated")})
    if (!d.empty()) return d;
  return "";
}

// Cases big enough for the CPU kernels' thread teams (rows·nq·hd·64 ≥ 2^15).
gen::AttnRanges thread_ranges() {
  gen::AttnRanges r = gen::ci_attn_ranges();
  r.max_L = 24;
  r.head_dims = {32};
  return r;
}

RC_GTEST_PROP(AttnProperty, OneAndTwoThreadsGiveTheSameBits, ()) {
  const AttnGenCase g = *gen::attn_case(thread_ranges(), AttnParts::mixed);
  const AttnCase c = make(g);
  const std::string d = runs_differ(c, run_threads(c, 1), run_threads(c, 2));
  if (!d.empty()) RC_FAIL(d);
}

RC_GTEST_PROP(AttnPlanted, TwoThreadsOnAChangedInputDiffer, ()) {
  const AttnGenCase g = *gen::attn_case(thread_ranges(), AttnParts::mixed);
  const AttnCase c = make(g);
  AttnCase changed = c;
  // Row 0's V set to 64 in every element: row 0 always sees its own key (weight ≥ ~e^-8 of
  // the row's keys at these score scales), so its output moves by far more than a BF16 step.
  for (U e = 0; e < c.geom.kv_width(); ++e) changed.qkv[c.geom.v_col0 + e] = 0x4280;
  RC_ASSERT(!runs_differ(c, run_threads(c, 1), run_threads(changed, 2)).empty());
}

TEST(AttnProperty, TwoThreadsAreAvailable) {
  // The thread property compares a team of one against a team of two only if OpenMP gives two.
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  EXPECT_EQ(omp_get_max_threads(), 2);
  omp_set_num_threads(before);
}

}  // namespace
}  // namespace bufferlab::attention_properties
