// The bit-exact attention properties of tests/property/test_attention_properties.cpp over their
// FULL ranges (label slow): streams up to 8 of up to 300 tokens, contexts up to 700 (prefill)
// and 2000 (decode, across many 64-key tiles and split-K parts), up to 16 decode rows and 8
// splits, block sizes 1, 3, 5, 7, 16, 64, head dims up to 128, 4 KV heads with groups up to 4,
// capped at 2^26 per case (gen::full_attn_ranges). Each property runs kCases cases on the CPU
// backend (RC_PARAMS="seed=..." picks the seed). The planted twins are the CI suite's.
// Built into bufferlab_slow_numeric_tests (tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <string>

#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/attention_inputs.h"
#include "bufferlab/properties/attention_checks.h"
#include "bufferlab/properties/attention_generators.h"
#include "cpu_backend.h"
#include "rapidcheck_cases.h"

namespace bufferlab::attention_full_range {
namespace {

using gen::AttnGenCase;
using gen::AttnParts;
using oracle::AttnCase;
using U = uint64_t;

constexpr int kCases = 30;

Backend& cpu() { return testing::cpu_backend(); }

rc::Gen<AttnGenCase> cases(AttnParts parts) {
  return gen::attn_case(gen::full_attn_ranges(), parts);
}

void require(const std::string& r) {
  if (!r.empty()) RC_FAIL(r);
}

TEST(AttnFullRange, ChunkedPrefillEqualsOneShot) {
  testing::check_many(
      [] {
        const AttnGenCase g = *cases(AttnParts::prefill);
        RC_PRE(g.spec.L >= 2);
        const U a = *rc::gen::inRange<U>(1, g.spec.L);
        require(
            gen::attn_chunk_invariance(cpu(), oracle::make_attn_case(g.spec, g.seed), a, false));
      },
      kCases);
}

TEST(AttnFullRange, EveryStreamAndDecodeRowEqualsItselfAlone) {
  testing::check_many(
      [] {
        const AttnGenCase g = *cases(AttnParts::mixed);
        require(gen::attn_alone_invariance(cpu(), oracle::make_attn_case(g.spec, g.seed), false));
      },
      kCases);
}

TEST(AttnFullRange, PhysicalBlockNumberingChangesNoBit) {
  testing::check_many(
      [] {
        const AttnGenCase g = *cases(AttnParts::mixed);
        require(gen::attn_block_numbering_invariance(cpu(), oracle::make_attn_case(g.spec, g.seed),
                                                     *rc::gen::arbitrary<U>(), false));
      },
      kCases);
}

TEST(AttnFullRange, LiveBatchAndPaddingRows) {
  testing::check_many(
      [] {
        const AttnGenCase g = *cases(AttnParts::decode);
        const AttnCase c = oracle::make_attn_case(g.spec, g.seed);
        const U n = *rc::gen::inRange<U>(1, g.spec.live + 1);
        require(gen::attn_live_batch_invariance(cpu(), c, n, false));
        require(gen::attn_padding_rows(cpu(), c, n, false));
      },
      kCases);
}

TEST(AttnFullRange, InvisibleKeysAndStagedEqualsDecoded) {
  testing::check_many(
      [] {
        const AttnGenCase g = *cases(AttnParts::prefill);
        const AttnCase c = oracle::make_attn_case(g.spec, g.seed);
        require(gen::attn_invisible_keys_invariance(cpu(), c, false));
        require(gen::attn_staged_equals_decoded(cpu(), c, false));
      },
      kCases);
}

TEST(AttnFullRange, MropeAndRotaryPassThrough) {
  testing::check_many(
      [] {
        const AttnGenCase m = *gen::attn_case_of(gen::AttnFlavour::qwen25_vl,
                                                 gen::full_attn_ranges(), AttnParts::mixed);
        require(gen::attn_mrope_equal_is_1d(cpu(), m.spec, m.seed, false));
        const AttnGenCase p =
            *gen::attn_case_of(gen::AttnFlavour::plain, gen::full_attn_ranges(), AttnParts::mixed);
        require(
            gen::attn_rotary_pass_through(cpu(), oracle::make_attn_case(p.spec, p.seed), false));
      },
      kCases);
}

}  // namespace
}  // namespace bufferlab::attention_full_range
