// Attention configs and pass generators (attention_generators.h).
#include "bufferlab/properties/attention_generators.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace bufferlab::gen {
namespace {

using U = uint64_t;

// Keys row i of a sequence at position p may see: p + 1, or the window.
U attn_visible(U p, bool sliding, U window) { return sliding ? std::min(p + 1, window) : p + 1; }

std::string attn_list(const std::vector<U>& v) { return fmt::format("{}", fmt::join(v, ",")); }

}  // namespace

const char* to_string(AttnFlavour f) {
  switch (f) {
    case AttnFlavour::qwen3_next:
      return "qwen3-next-like";
    case AttnFlavour::gpt_oss:
      return "gpt-oss-like";
    case AttnFlavour::qwen25_vl:
      return "qwen2.5-vl-like";
    case AttnFlavour::llama:
      return "llama-like";
    case AttnFlavour::plain:
      return "plain-partial-rotary";
  }
  return "?";
}

ModelConfig attn_config(AttnFlavour f, U nq, U nkv, U hd, U window) {
  ModelConfig c;
  c.hidden_size = 64;
  c.vocab_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = nq;
  c.num_key_value_heads = nkv;
  c.head_dim = hd;
  c.rms_norm_eps = 1e-6;
  switch (f) {
    case AttnFlavour::qwen3_next:
      c.attn_gated = true;
      c.qk_norm = true;
      c.partial_rotary_factor = 0.25;
      c.rope_theta = 1e7;
      break;
    case AttnFlavour::gpt_oss:
      c.sliding_window = window;
      c.attn_sinks = true;
      c.rope_type = "yarn";
      c.rope_theta = 150000.0;
      c.rope_factor = 32.0;
      c.rope_original_max_position = 4096;
      c.rope_beta_fast = 32.0;
      c.rope_beta_slow = 1.0;
      c.rope_truncate = false;
      break;
    case AttnFlavour::qwen25_vl: {
      const U half = hd / 2;
      c.mrope_section = {half / 4, half - half / 4 - (half - half / 4) / 2, (half - half / 4) / 2};
      c.rope_theta = 1e6;
      break;
    }
    case AttnFlavour::llama:
      c.rope_type = "llama3";
      c.rope_theta = 500000.0;
      c.rope_factor = 8.0;
      c.rope_low_freq_factor = 1.0;
      c.rope_high_freq_factor = 4.0;
      c.rope_original_max_position = 8192;
      break;
    case AttnFlavour::plain:
      c.partial_rotary_factor = 0.5;
      break;
  }
  return c;
}

U attn_case_cost(const oracle::AttnCaseSpec& s) {
  const ModelConfig& c = s.config;
  const U W = c.sliding_window;
  U keys = 0;
  for (U b = 0; b < s.streams; ++b) {
    const U ctx = s.context.empty() ? 0 : s.context.size() == 1 ? s.context[0] : s.context[b];
    for (U i = 0; i < s.L; ++i) keys += attn_visible(ctx + i, s.sliding, W);
  }
  for (U r = 0; r < s.live; ++r) {
    const U ctx = s.decode_context.empty()       ? 0
                  : s.decode_context.size() == 1 ? s.decode_context[0]
                                                 : s.decode_context[r];
    keys += attn_visible(ctx, s.sliding, W);
  }
  return keys * c.num_attention_heads * c.head_dim;
}

AttnRanges ci_attn_ranges() { return {}; }

AttnRanges full_attn_ranges() {
  AttnRanges r;
  r.max_streams = 8;
  r.max_L = 300;
  r.max_context = 700;
  r.max_decode_rows = 16;
  r.max_decode_context = 2000;
  r.max_splits = 8;
  r.block_sizes = {1, 3, 5, 7, 16, 64};
  r.head_dims = {8, 16, 64, 128};
  r.max_kv_heads = 4;
  r.max_group = 4;
  r.cost_cap = uint64_t{1} << 26;
  return r;
}

void showValue(const AttnGenCase& c, std::ostream& os) {
  const oracle::AttnCaseSpec& s = c.spec;
  os << fmt::format(
      "{} nq={} nkv={} hd={} sliding={} W={} | prefill streams={} L={} ctx=[{}] | decode R={} "
      "live={} S={} ctx=[{}] | bs={} shuffled={} mrope={} | seed={}",
      to_string(c.flavour), s.config.num_attention_heads, s.config.num_key_value_heads,
      s.config.head_dim, s.sliding, s.config.sliding_window, s.streams, s.L, attn_list(s.context),
      s.decode_rows, s.live, s.splits, attn_list(s.decode_context), s.block_size, s.shuffled_blocks,
      s.mrope == oracle::AttnMropePattern::distinct ? "distinct" : "equal", c.seed);
}

rc::Gen<AttnGenCase> attn_case_of(AttnFlavour f, const AttnRanges& r, AttnParts parts,
                                  U min_context) {
  return rc::gen::exec([f, r, parts, min_context] {
    AttnGenCase g;
    g.flavour = f;
    const U nkv = *rc::gen::inRange<U>(1, r.max_kv_heads + 1);
    const U group = *rc::gen::inRange<U>(1, r.max_group + 1);
    const U hd = *rc::gen::elementOf(r.head_dims);
    const U window = *rc::gen::inRange<U>(2, 17);
    oracle::AttnCaseSpec& s = g.spec;
    s.config = attn_config(f, nkv * group, nkv, hd, window);
    s.sliding = f == AttnFlavour::gpt_oss && *rc::gen::arbitrary<bool>();
    s.block_size = *rc::gen::elementOf(r.block_sizes);
    s.spare_blocks = *rc::gen::inRange<U>(0, 3);
    const auto context = [&](U max) {
      const U lo = std::min(min_context, max);
      return *rc::gen::oneOf(rc::gen::just(lo), rc::gen::inRange<U>(lo, max + 1));
    };
    if (parts != AttnParts::decode) {
      s.streams = *rc::gen::inRange<U>(1, r.max_streams + 1);
      s.L = *rc::gen::inRange<U>(1, r.max_L + 1);
      for (U b = 0; b < s.streams; ++b) s.context.push_back(context(r.max_context));
      s.padded_rows = *rc::gen::element(false, false, false, true);
    }
    if (parts != AttnParts::prefill) {
      s.decode_rows = *rc::gen::inRange<U>(1, r.max_decode_rows + 1);
      s.live = *rc::gen::inRange<U>(1, s.decode_rows + 1);
      s.splits = *rc::gen::inRange<U>(1, r.max_splits + 1);
      for (U q = 0; q < s.live; ++q) s.decode_context.push_back(context(r.max_decode_context));
    }
    // Over the cap: fewer heads, then shorter contexts and chunks, then fewer rows.
    while (attn_case_cost(s) > r.cost_cap) {
      if (s.config.num_attention_heads > s.config.num_key_value_heads) {
        s.config =
            attn_config(f, s.config.num_key_value_heads, s.config.num_key_value_heads, hd, window);
        continue;
      }
      bool shrunk = false;
      for (U& ctx : s.context)
        if (ctx > min_context) ctx = std::max(min_context, ctx / 2), shrunk = true;
      for (U& ctx : s.decode_context)
        if (ctx > min_context) ctx = std::max(min_context, ctx / 2), shrunk = true;
      if (shrunk) continue;
      if (s.L > 1) {
        s.L /= 2;
        continue;
      }
      if (s.streams > 1) {
        s.context.resize(--s.streams);
        continue;
      }
      if (s.live > 1) {
        s.decode_context.resize(--s.live);
        continue;
      }
      break;
    }
    g.seed = *rc::gen::arbitrary<uint64_t>();
    return g;
  });
}

rc::Gen<AttnGenCase> attn_case(const AttnRanges& r, AttnParts parts, U min_context) {
  return rc::gen::mapcat(
      rc::gen::elementOf(
          std::vector<AttnFlavour>(std::begin(kAttnFlavours), std::end(kAttnFlavours))),
      [r, parts, min_context](AttnFlavour f) { return attn_case_of(f, r, parts, min_context); });
}

}  // namespace bufferlab::gen
