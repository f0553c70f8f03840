// The cases of `bufferlab fuzz --numeric attention` (attention_fuzz_cases.h).
#include "bufferlab/properties/attention_fuzz_cases.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "bufferlab/core/ops/attention.h"

namespace bufferlab::gen {
namespace {

using U = uint64_t;

// What the reductions change, kept apart from the ModelConfig they rebuild: the MRoPE sections
// as shares of rotary_dim / 2, so halving hd keeps them summing to it.
struct Geometry {
  U nkv = 1, group = 1, hd = 64;
  double rotary_factor = 1.0;
  bool interleaved = false, qk_norm = false, gated = false, sinks = false;
  std::string rope_type = "default";
  double theta = 10000.0, factor = 1.0;
  U original = 0;
  bool truncate = true;
  bool mrope = false, mrope_interleaved = false;
  U share0 = 0, share1 = 0;  // per mille: s0 = half·share0, s1 = (half − s0)·share1
  U window = 0;
};

ModelConfig config_of(const Geometry& g) {
  ModelConfig c;
  c.hidden_size = 64;
  c.vocab_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = g.nkv * g.group;
  c.num_key_value_heads = g.nkv;
  c.head_dim = g.hd;
  c.rms_norm_eps = 1e-6;
  c.partial_rotary_factor = g.rotary_factor;
  c.rope_interleaved = g.interleaved;
  c.qk_norm = g.qk_norm;
  c.attn_gated = g.gated;
  c.attn_sinks = g.sinks;
  c.rope_type = g.rope_type;
  c.rope_theta = g.theta;
  c.sliding_window = g.window;
  if (g.rope_type != "default") c.rope_factor = g.factor;
  if (g.rope_type == "llama3") {
    c.rope_low_freq_factor = 1.0;
    c.rope_high_freq_factor = 4.0;
  }
  if (g.rope_type == "llama3" || g.rope_type == "yarn") c.rope_original_max_position = g.original;
  if (g.rope_type == "yarn") {
    c.rope_beta_fast = 32.0;
    c.rope_beta_slow = 1.0;
    c.rope_truncate = g.truncate;
  }
  if (g.mrope) {
    const U half = c.rotary_dim() / 2;
    const U s0 = half * g.share0 / 1000;
    const U s1 = (half - s0) * g.share1 / 1000;
    c.mrope_section = {s0, s1, half - s0 - s1};
    c.mrope_interleaved = g.mrope_interleaved;
  }
  return c;
}

U visible(U p, bool sliding, U window) { return sliding ? std::min(p + 1, window) : p + 1; }

U cdiv(U a, U b) { return (a + b - 1) / b; }

// Per-sequence value of a context list (empty: 0, one value: all, else one each).
U context_at(const std::vector<U>& v, U i) { return v.empty() ? 0 : v.size() == 1 ? v[0] : v[i]; }

// A context in [0, max]: at a block edge (k·bs − 1, k·bs, k·bs + 1) in half of the cases.
U draw_context(U max, U bs) {
  const U c = *rc::gen::inRange<U>(0, max + 1);
  if (*rc::gen::element(false, true)) return c;
  const U edge = c / bs * bs;
  const U near = edge + *rc::gen::element<U>(0, 1, 2);
  return std::min(max, near == 0 ? 0 : near - 1);
}

std::string list(const std::vector<U>& v) { return fmt::format("{}", fmt::join(v, ",")); }

}  // namespace

const char* to_string(AttnFuzzParts p) {
  switch (p) {
    case AttnFuzzParts::prefill:
      return "prefill";
    case AttnFuzzParts::decode:
      return "decode";
    case AttnFuzzParts::verify:
      return "verify";
    case AttnFuzzParts::mixed:
      return "mixed";
  }
  return "?";
}

U attn_fuzz_cost(const oracle::AttnCaseSpec& s) {
  const ModelConfig& c = s.config;
  const U W = c.sliding_window, nq = c.num_attention_heads, nkv = c.num_key_value_heads,
          hd = c.head_dim, bs = std::max<U>(s.block_size, 1);
  U keys = 0, blocks = s.spare_blocks;
  for (U b = 0; b < s.streams; ++b) {
    const U ctx = context_at(s.context, b);
    for (U i = 0; i < s.L; ++i) keys += visible(ctx + i, s.sliding, W);
    blocks += cdiv(ctx + s.L, bs);
  }
  for (U r = 0; r < s.live; ++r) {
    const U ctx = context_at(s.decode_context, r);
    keys += visible(ctx, s.sliding, W);
    blocks += cdiv(ctx + 1, bs);
  }
  const U rows = s.streams * s.L + s.decode_rows;
  return keys * nq * hd + rows * (nq + nkv) * hd + 4 * blocks * bs * nkv * hd;
}

std::string AttnFuzzCase::describe() const {
  const oracle::AttnCaseSpec& s = spec;
  const ModelConfig& c = s.config;
  std::string rope = c.rope_type;
  if (c.rope_type == "linear") rope += fmt::format("(factor {})", c.rope_factor);
  if (c.rope_type == "llama3")
    rope += fmt::format("(factor {}, original {})", c.rope_factor, c.rope_original_max_position);
  if (c.rope_type == "yarn")
    rope += fmt::format("(factor {}, original {}, truncate {})", c.rope_factor,
                        c.rope_original_max_position, c.rope_truncate);
  std::string out = fmt::format("{}: {}; rope {}, theta {}", to_string(parts),
                                AttnGeometry::of(c).to_string(), rope, c.rope_theta);
  if (c.uses_mrope())
    out += fmt::format(", mrope [{},{},{}]{} {}", c.mrope_section[0], c.mrope_section[1],
                       c.mrope_section[2], c.mrope_interleaved ? " interleaved" : "",
                       s.mrope == oracle::AttnMropePattern::distinct ? "t!=h!=w" : "t=h=w");
  if (c.rope_interleaved) out += ", rope interleaved";
  out += fmt::format("; {} layer", s.sliding ? fmt::format("sliding (W = {})", c.sliding_window)
                                             : std::string("full"));
  if (s.streams > 0)
    out += fmt::format("; prefill {} streams of L = {}, context [{}]{}", s.streams, s.L,
                       list(s.context), s.padded_rows ? ", padded K/V rows" : "");
  if (s.decode_rows > 0)
    out +=
        fmt::format("; {} R = {}, live {}, splits {}, context [{}]", s.verify ? "verify" : "decode",
                    s.decode_rows, s.live, s.splits, list(s.decode_context));
  out += fmt::format(
      "; block size {}, {} spare, {}; position offset {}; q/k scale {}/{}, sink scale {}; "
      "seed={}",
      s.block_size, s.spare_blocks, s.shuffled_blocks ? "shuffled" : "in order", s.position_offset,
      s.q_scale, s.k_scale, s.sink_scale, seed);
  return out;
}

rc::Gen<AttnFuzzCase> attn_fuzz_case(U cost_cap) {
  return rc::gen::exec([cost_cap] {
    AttnFuzzCase a;
    Geometry g;
    g.hd = *rc::gen::element<U>(16, 32, 64, 128, 256);
    g.nkv = *rc::gen::element<U>(1, 1, 2, 4, 8);
    g.group = *rc::gen::inRange<U>(1, 9);
    g.rotary_factor = *rc::gen::element(1.0, 1.0, 0.75, 0.5, 0.25);
    g.interleaved = *rc::gen::element(false, false, true);
    g.qk_norm = *rc::gen::element(false, true);
    g.gated = *rc::gen::element(false, true);
    g.sinks = *rc::gen::element(false, true);
    g.theta = *rc::gen::element(10000.0, 150000.0, 500000.0, 1e6, 1e7);
    g.rope_type = *rc::gen::element<std::string>("default", "linear", "llama3", "yarn");
    if (g.rope_type == "linear") g.factor = *rc::gen::element(2.0, 4.0, 8.0);
    if (g.rope_type == "llama3") {
      g.factor = 8.0;
      g.original = *rc::gen::element<U>(256, 2048, 8192);
    }
    if (g.rope_type == "yarn") {
      g.factor = *rc::gen::element(4.0, 32.0, 40.0);
      g.original = *rc::gen::element<U>(256, 4096);
      g.truncate = *rc::gen::element(false, true);
    }
    g.mrope = *rc::gen::element(false, false, false, true);
    if (g.mrope) {
      g.mrope_interleaved = *rc::gen::element(false, true);
      g.share0 = *rc::gen::inRange<U>(0, 1001);
      g.share1 = *rc::gen::inRange<U>(0, 1001);
    }
    oracle::AttnCaseSpec& s = a.spec;
    s.sliding = *rc::gen::element(false, false, true);
    if (s.sliding) g.window = *rc::gen::inRange<U>(1, 161);
    s.config = config_of(g);

    s.block_size = *rc::gen::element<U>(1, 3, 5, 7, 16, 32, 64);
    s.spare_blocks = *rc::gen::inRange<U>(0, 3);
    s.shuffled_blocks = *rc::gen::inRange<U>(0, 8) != 0;
    s.mrope =
        *rc::gen::element(oracle::AttnMropePattern::distinct, oracle::AttnMropePattern::distinct,
                          oracle::AttnMropePattern::distinct, oracle::AttnMropePattern::equal);
    s.position_offset = *rc::gen::element<U>(0, 0, 0, 1, 4093, 100000);
    s.q_scale = *rc::gen::element(1.0, 1.0, 4.0);
    s.k_scale = *rc::gen::element(1.0, 1.0, 4.0);
    if (g.sinks) s.sink_scale = *rc::gen::element(1.0, 4.0);

    a.parts =
        *rc::gen::element(AttnFuzzParts::prefill, AttnFuzzParts::prefill, AttnFuzzParts::decode,
                          AttnFuzzParts::decode, AttnFuzzParts::verify, AttnFuzzParts::mixed);
    if (a.parts == AttnFuzzParts::prefill || a.parts == AttnFuzzParts::mixed) {
      s.streams = *rc::gen::inRange<U>(1, 9);
      s.L = *rc::gen::oneOf(rc::gen::inRange<U>(1, 17), rc::gen::inRange<U>(1, 301));
      for (U b = 0; b < s.streams; ++b) s.context.push_back(draw_context(700, s.block_size));
      s.padded_rows = *rc::gen::element(false, false, false, true);
    }
    if (a.parts != AttnFuzzParts::prefill) {
      s.decode_rows = *rc::gen::inRange<U>(1, 17);
      s.live = *rc::gen::element(s.decode_rows, s.decode_rows,
                                 *rc::gen::inRange<U>(0, s.decode_rows + 1));
      s.verify = a.parts == AttnFuzzParts::verify;
      s.splits = s.verify ? 1 : *rc::gen::inRange<U>(1, 9);
      for (U r = 0; r < s.live; ++r) s.decode_context.push_back(draw_context(2000, s.block_size));
    }

    // Over the cap: long contexts and chunks first (a case keeps its GQA shape where it can),
    // then fewer query heads per KV head, shorter contexts, fewer tokens, streams and rows,
    // fewer KV heads, then narrower heads.
    const auto halve_contexts = [&s](U above) {
      bool shrunk = false;
      for (std::vector<U>* list : {&s.context, &s.decode_context})
        for (U& c : *list)
          if (c > above) c /= 2, shrunk = true;
      return shrunk;
    };
    while (attn_fuzz_cost(s) > cost_cap) {
      if (halve_contexts(32)) continue;
      if (s.L > 16) {
        s.L /= 2;
      } else if (g.group > 1) {
        g.group /= 2;
      } else if (halve_contexts(0)) {
      } else if (s.L > 1) {
        s.L /= 2;
      } else if (s.streams > 1) {
        s.context.resize(--s.streams);
      } else if (s.decode_rows > 1) {
        --s.decode_rows;
        if (s.live > s.decode_rows) s.decode_context.resize(s.live = s.decode_rows);
      } else if (g.nkv > 1) {
        g.nkv /= 2;
      } else if (g.hd > 16) {
        g.hd /= 2;
      } else {
        break;
      }
      s.config = config_of(g);
    }
    a.seed = *rc::gen::arbitrary<uint64_t>();
    return a;
  });
}

}  // namespace bufferlab::gen
