// Grouped-query attention's kernels (docs/spec/attention.md, core ops/attention.h) on the
// backend under test (tests/support/backend_under_test.h): whole passes through the harness
// (oracle/attention_harness.h: decode cache write, prefill staging, prefill cache write, decode
// core and split-K merge, prefill core, gate), on small cases shaped like the models in scope
// (properties/attention_generators.h): qwen3-next-like (gated, partial rotary 0.25, qk_norm,
// GQA), gpt-oss-like (sliding and full layers, sinks, yarn), qwen2.5-vl-like (MRoPE t ≠ h ≠ w),
// llama-like (llama3 scaling), and odd shapes (block sizes 1 and 5, three streams, contexts 0
// and > 0, the FP8 path's phantom rows, verify). Blocks are shuffled and free slots poisoned by
// default (oracle/attention_inputs.h).
//
// What each case asserts without the FP64 oracle, on an arena poisoned before the pass:
//   - every stored value is finite (an unwritten output or a poisoned slot read shows as NaN);
//   - the V scratch is the qkv V columns bit for bit, the phantom rows are +0;
//   - the cache writes put the K/V scratch rows (prefill) and the qkv V (decode) at exactly
//     their slots and change no other slot; the cores write no cache;
//   - decode padding rows write +0; attn_output holds the core outputs before the gate.
// Then every stage is judged against the FP64 references on its own stored inputs
// (oracle::judge_attention, the device bound model off the CPU). Then the bit-exact invariance
// bodies (properties/attention_checks.h) on fixed cases, each with its planted twin failing, and
// on a few random small passes; and the harness's refusals of bad metadata before any launch.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend_under_test.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/attention_inputs.h"
#include "bufferlab/oracle/attention_judge.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/properties/attention_checks.h"
#include "bufferlab/properties/attention_generators.h"
#include "rapidcheck_cases.h"
#include "report_checks.h"

namespace bufferlab::attention_kernel_tests {
namespace {

using gen::AttnFlavour;
using oracle::AttnCase;
using oracle::AttnCaseSpec;
using oracle::AttnRun;
using U = uint64_t;

class AttentionKernel : public testing::KernelTest {};

bool finite_bf16(uint16_t b) { return (b & 0x7F80) != 0x7F80; }

// The first non-finite element of a stored BF16 tensor, or "".
std::string non_finite(const std::vector<uint16_t>& v, U cols, const char* what) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!finite_bf16(v[i]))
      return std::string(what) + " [" + std::to_string(i / cols) + ", " + std::to_string(i % cols) +
             "] is not finite";
  return "";
}

// The stored-value checks that need no oracle (file comment).
void check_stored(const AttnCase& c, const AttnRun& r) {
  const AttnGeometry& g = c.geom;
  const U qw = g.q_width(), kw = g.kv_width(), R = c.decode.rows, t = c.prefill.tokens();
  const U qd = g.qkv_dim, live = c.decode.live;
  EXPECT_EQ(non_finite(r.q_copy, qw, "q_copy"), "");
  EXPECT_EQ(non_finite(r.k_scratch, kw, "k_scratch"), "");
  EXPECT_EQ(non_finite(r.prefill_out, qw, "prefill output"), "");
  EXPECT_EQ(non_finite(r.attn, qw, "attn_output"), "");
  EXPECT_EQ(non_finite(r.gated, qw, "gated output"), "");
  for (size_t i = 0; i < r.partials.size(); ++i)  // m of an empty part is −inf
    if (i % (g.hd + 2) != g.hd) EXPECT_TRUE(std::isfinite(r.partials[i])) << "partials " << i;
  // V scratch: a copy; phantom rows +0.
  for (U i = 0; i < t; ++i)
    for (U e = 0; e < kw; ++e)
      ASSERT_EQ(r.v_scratch[i * kw + e], c.qkv[(R + i) * qd + g.v_col0 + e])
          << "v_scratch row " << i << " col " << e;
  for (uint16_t v : r.k_pad) ASSERT_EQ(v, 0) << "K phantom row not +0";
  for (uint16_t v : r.v_pad) ASSERT_EQ(v, 0) << "V phantom row not +0";
  EXPECT_EQ(r.k_pad.size() + r.v_pad.size(), 2 * (c.prefill.kv_rows() - t) * kw);
  // The caches: written slots hold their rows, every other slot its old bits.
  std::vector<uint16_t> want_k = c.k_cache, want_v = c.v_cache;
  std::vector<bool> decode_slot(c.cache.slots(), false);
  for (U row = 0; row < live; ++row) {
    const U slot = static_cast<U>(c.decode.slots[row]);
    decode_slot[slot] = true;
    for (U e = 0; e < kw; ++e) want_v[slot * kw + e] = c.qkv[row * qd + g.v_col0 + e];
  }
  for (U i = 0; i < t; ++i) {
    const U slot = static_cast<U>(c.prefill.slots[i]);
    for (U e = 0; e < kw; ++e) {
      want_k[slot * kw + e] = r.k_scratch[i * kw + e];
      want_v[slot * kw + e] = r.v_scratch[i * kw + e];
    }
  }
  for (U s = 0; s < c.cache.slots(); ++s)
    for (U e = 0; e < kw; ++e) {
      if (!decode_slot[s])  // a decode row's K is staged: the properties check its bits
        ASSERT_EQ(r.k_cache[s * kw + e], want_k[s * kw + e])
            << "K cache slot " << s << " [" << e << "]";
      else
        ASSERT_TRUE(finite_bf16(r.k_cache[s * kw + e])) << "decode-written K slot " << s;
      ASSERT_EQ(r.v_cache[s * kw + e], want_v[s * kw + e])
          << "V cache slot " << s << " [" << e << "]";
    }
  EXPECT_EQ(r.k_cache_end, r.k_cache) << "a core wrote the K cache";
  EXPECT_EQ(r.v_cache_end, r.v_cache) << "a core wrote the V cache";
  // attn_output before the gate: the decode rows, then the prefill core's.
  ASSERT_EQ(r.attn.size(), (R + t) * qw);
  EXPECT_EQ(std::vector<uint16_t>(r.attn.begin(), r.attn.begin() + static_cast<long>(R * qw)),
            r.decode_out);
  EXPECT_EQ(std::vector<uint16_t>(r.attn.begin() + static_cast<long>(R * qw), r.attn.end()),
            r.prefill_out);
  for (U row = live; row < R; ++row)
    for (U e = 0; e < qw; ++e)
      ASSERT_EQ(r.decode_out[row * qw + e], 0) << "padding row " << row << " [" << e << "]";
  EXPECT_EQ(r.gated.empty(), !g.gated);
}

AttnCaseSpec spec_of(AttnFlavour f, uint64_t nq = 4, uint64_t nkv = 2, uint64_t hd = 16) {
  AttnCaseSpec s;
  s.config = gen::attn_config(f, nq, nkv, hd);
  return s;
}

oracle::BoundModel bounds() {
  return std::string(testing::backend_under_test_name()) == "cpu" ? oracle::cpu_bounds()
                                                                  : oracle::device_bounds();
}

// The pass on the backend under test: the stored-value checks, then every stage judged on its
// own stored inputs (oracle/attention_judge.h).
AttnRun run_checked(const AttnCaseSpec& s, uint64_t seed) {
  const AttnCase c = oracle::make_attn_case(s, seed);
  const AttnRun r = oracle::run_attention(testing::backend_under_test(), c);
  check_stored(c, r);
  testing::expect_passed(
      oracle::judge_attention(c, r, testing::backend_under_test_name(), seed, bounds()));
  return r;
}

// A mixed step: decode rows (split-K) and two prefill streams.
TEST_F(AttentionKernel, Qwen3NextLikeGatedPartialRotaryQkNorm) {
  AttnCaseSpec s = spec_of(AttnFlavour::qwen3_next);
  s.block_size = 5;
  s.streams = 2;
  s.L = 5;
  s.context = {3, 0};
  s.decode_rows = 3;
  s.live = 2;
  s.splits = 2;
  s.decode_context = {7, 20};
  run_checked(s, 11);
}

TEST_F(AttentionKernel, GptOssLikeSlidingWithSinksAndYarn) {
  for (bool sliding : {true, false}) {
    SCOPED_TRACE(sliding ? "sliding layer" : "full layer");
    AttnCaseSpec s = spec_of(AttnFlavour::gpt_oss);
    s.sliding = sliding;
    s.streams = 1;
    s.L = 12;
    s.context = {9};
    s.decode_rows = 2;
    s.live = 2;
    s.splits = 3;
    s.decode_context = {30, 4};
    s.position_offset = 4000;  // past yarn's original context
    run_checked(s, 12);
  }
}

TEST_F(AttentionKernel, Qwen25VlLikeMropeDistinctPositions) {
  AttnCaseSpec s = spec_of(AttnFlavour::qwen25_vl);
  s.streams = 2;
  s.L = 6;
  s.context = {0, 4};
  s.decode_rows = 2;
  s.live = 1;
  s.decode_context = {6};
  run_checked(s, 13);
}

TEST_F(AttentionKernel, LlamaLikeThreeStreamsBlockSizeFive) {
  AttnCaseSpec s = spec_of(AttnFlavour::llama);
  s.block_size = 5;
  s.streams = 3;
  s.L = 4;
  s.context = {0, 5, 17};
  s.decode_rows = 4;
  s.live = 3;
  s.decode_context = {0, 9, 70};  // 70: a second key tile
  run_checked(s, 14);
}

TEST_F(AttentionKernel, OddShapes) {
  {
    SCOPED_TRACE("block size 1, three streams, FP8 phantom rows, GQA group 3");
    AttnCaseSpec s = spec_of(AttnFlavour::plain, 6, 2, 8);
    s.block_size = 1;
    s.streams = 3;
    s.L = 3;
    s.context = {2, 0, 1};
    s.padded_rows = true;
    run_checked(s, 15);
  }
  {
    SCOPED_TRACE("decode only, verify (one split), one KV head");
    AttnCaseSpec s = spec_of(AttnFlavour::llama, 3, 1, 8);
    s.decode_rows = 3;
    s.live = 3;
    s.verify = true;
    s.decode_context = {0, 1, 66};
    run_checked(s, 16);
  }
  {
    SCOPED_TRACE("decode only, split-K with more splits than blocks, all padding but one");
    AttnCaseSpec s = spec_of(AttnFlavour::gpt_oss);
    s.block_size = 16;
    s.decode_rows = 4;
    s.live = 1;
    s.splits = 5;
    s.decode_context = {20};
    run_checked(s, 17);
  }
  {
    SCOPED_TRACE("prefill only, identity block numbering, context across tiles");
    AttnCaseSpec s = spec_of(AttnFlavour::qwen3_next);
    s.shuffled_blocks = false;
    s.streams = 1;
    s.L = 3;
    s.context = {63};
    run_checked(s, 18);
  }
}

// ---- the invariance bodies on the backend under test (small fixed cases) ---------------------

AttnCase mixed_case(AttnFlavour f, bool sliding, uint64_t seed) {
  AttnCaseSpec s = spec_of(f);
  s.sliding = sliding;
  s.block_size = 3;
  s.streams = 2;
  s.L = 5;
  s.context = {4, 9};
  s.decode_rows = 3;
  s.live = 3;
  s.splits = 2;
  s.decode_context = {5, 12, 2};
  return oracle::make_attn_case(s, seed);
}

TEST_F(AttentionKernel, InvarianceBodiesHoldAndTheirTwinsFail) {
  Backend& b = backend();
  for (AttnFlavour f : {AttnFlavour::qwen3_next, AttnFlavour::gpt_oss}) {
    for (bool sliding : {false, true}) {
      if (sliding && f != AttnFlavour::gpt_oss) continue;
      SCOPED_TRACE(std::string(gen::to_string(f)) + (sliding ? " sliding" : ""));
      const AttnCase c = mixed_case(f, sliding, 21);
      for (bool plant : {false, true}) {
        SCOPED_TRACE(plant ? "planted twin (must fail)" : "property");
        const auto expect = [&](const std::string& result, const char* name) {
          if (plant)
            EXPECT_NE(result, "") << name << ": the twin passed";
          else
            EXPECT_EQ(result, "") << name;
        };
        expect(gen::attn_chunk_invariance(b, c, 2, plant), "chunk");
        expect(gen::attn_alone_invariance(b, c, plant), "alone");
        expect(gen::attn_block_numbering_invariance(b, c, 5, plant), "block numbering");
        expect(gen::attn_live_batch_invariance(b, c, 2, plant), "live batch");
        expect(gen::attn_invisible_keys_invariance(b, c, plant), "invisible keys");
        expect(gen::attn_staged_equals_decoded(b, c, plant), "staged = decoded");
        expect(gen::attn_padding_rows(b, c, 1, plant), "padding rows");
      }
    }
  }
  {
    AttnCaseSpec s = spec_of(AttnFlavour::qwen25_vl);
    s.streams = 1;
    s.L = 4;
    s.context = {3};
    s.decode_rows = 1;
    s.live = 1;
    s.decode_context = {5};
    EXPECT_EQ(gen::attn_mrope_equal_is_1d(b, s, 22, false), "");
    EXPECT_NE(gen::attn_mrope_equal_is_1d(b, s, 22, true), "") << "MRoPE twin passed";
  }
  {
    const AttnCase c = mixed_case(AttnFlavour::plain, false, 23);
    EXPECT_EQ(gen::attn_rotary_pass_through(b, c, false), "");
    EXPECT_NE(gen::attn_rotary_pass_through(b, c, true), "") << "pass-through twin passed";
  }
}

// The same bodies on random small passes of every flavour (properties/attention_generators.h,
// cost ≤ 2^12: the simulator runs each pass ~100× slower than the CPU), kRandomCases each.
constexpr int kRandomCases = 10;

gen::AttnRanges small_ranges() {
  gen::AttnRanges r = gen::ci_attn_ranges();
  r.max_L = 8;
  r.max_context = 20;
  r.max_decode_rows = 3;
  r.max_decode_context = 70;  // a second 64-key tile
  r.head_dims = {8};
  r.cost_cap = uint64_t{1} << 12;
  return r;
}

void require_holds(const std::string& r) {
  if (!r.empty()) RC_FAIL(r);
}

TEST_F(AttentionKernel, InvarianceBodiesHoldOnRandomPasses) {
  testing::check_many(
      [] {
        Backend& b = testing::backend_under_test();
        const gen::AttnGenCase g = *gen::attn_case(small_ranges(), gen::AttnParts::mixed);
        const AttnCase c = oracle::make_attn_case(g.spec, g.seed);
        if (c.prefill.L >= 2)
          require_holds(
              gen::attn_chunk_invariance(b, c, *rc::gen::inRange<U>(1, c.prefill.L), false));
        require_holds(gen::attn_alone_invariance(b, c, false));
        require_holds(gen::attn_block_numbering_invariance(b, c, g.seed + 1, false));
        require_holds(gen::attn_live_batch_invariance(
            b, c, *rc::gen::inRange<U>(1, c.decode.live + 1), false));
        require_holds(gen::attn_invisible_keys_invariance(b, c, false));
        require_holds(gen::attn_staged_equals_decoded(b, c, false));
        require_holds(gen::attn_padding_rows(b, c, 1, false));
      },
      kRandomCases);
}

// ---- bad input: refused before any launch, naming the value -----------------------------------

void expect_refused(const AttnCase& c, const std::string& needle) {
  try {
    oracle::run_attention(testing::backend_under_test(), c);
    ADD_FAILURE() << "accepted; expected an error naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(AttentionKernel, BadMetadataIsRefusedNamingTheValue) {
  AttnCaseSpec s = spec_of(AttnFlavour::llama);
  s.block_size = 4;
  s.streams = 1;
  s.L = 3;
  s.context = {5};
  s.decode_rows = 1;
  s.live = 1;
  s.decode_context = {3};
  s.max_seq_len = 64;
  const AttnCase good = oracle::make_attn_case(s, 31);
  {
    AttnCase c = good;
    c.prefill.block_table[1] = static_cast<int32_t>(c.cache.num_blocks);
    expect_refused(c, "block_table[0][1] = " + std::to_string(c.cache.num_blocks));
  }
  {
    AttnCase c = good;
    c.decode.slots[0] = static_cast<int64_t>(c.cache.slots()) + 3;
    expect_refused(c, "slots[0] = " + std::to_string(c.cache.slots() + 3));
  }
  {
    AttnCase c = good;
    c.prefill.ctx_lens[0] = static_cast<int32_t>(c.cache.max_blocks * 4);
    expect_refused(c, "length " + std::to_string(c.cache.max_blocks * 4 + 3));
  }
  {
    AttnCase c = good;
    c.prefill.positions[2] = 64;
    expect_refused(c, "position 64");
  }
  {
    AttnCase c = good;
    c.decode.seq_lens[0] = 70;
    expect_refused(c, "length 70");
  }
  {
    AttnCase c = good;
    c.geom.rotary_dim = c.geom.hd + 2;
    expect_refused(c, "rotary_dim = " + std::to_string(c.geom.hd + 2));
  }
  // The unmodified case runs (the refusals are the metadata's).
  EXPECT_NO_THROW(oracle::run_attention(testing::backend_under_test(), good));
}

}  // namespace
}  // namespace bufferlab::attention_kernel_tests
