// MoE routing cases and their adversarial tensors, deterministic from the case.
#include "bufferlab/properties/routing_generators.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <sstream>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/seeded_random.h"

namespace bufferlab::gen {
namespace {

// Streams of routing_hash: one per tensor, so changing one tensor's shape moves no other.
enum Stream : uint64_t {
  kX = 1,
  kW,
  kXf32,
  kBias,
  kTokens,
  kTable,
  kRows,
  kLogits,
  kDesign,
  kFarBelow,
  kGroups
};

// A hash-driven source of draws for one (seed, stream).
struct Draws {
  uint64_t seed, stream, next = 0;
  uint64_t bits() { return routing_hash(seed, stream, next++); }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : bits() % n; }
  bool one_in(uint64_t n) { return below(n) == 0; }
  // A BF16 value ±m·2^(p−7−r), m in [128, 255], r in [0, spread): 8 significant bits.
  float bf16_value(int p, int spread) {
    const auto m = static_cast<double>(128 + below(128));
    const int r = static_cast<int>(below(static_cast<uint64_t>(std::max(spread, 1))));
    const double v = std::ldexp(m, p - 7 - r);
    return static_cast<float>(one_in(2) ? -v : v);
  }
};

uint16_t bits_of(float v) { return f32_to_bf16_bits(v); }

int log2_floor(uint64_t v) { return v <= 1 ? 0 : 63 - std::countl_zero(v); }

void random_rows(const RoutingCase& c, RoutingTensors& t, int px, int pw) {
  const uint64_t h = c.config.hidden_size, experts = c.experts();
  Draws x{c.seed, kX}, w{c.seed, kW};
  for (uint64_t i = 0; i < c.rows * h; ++i) t.x_bf16[i] = bits_of(x.bf16_value(px, 4));
  for (uint64_t i = 0; i < experts * h; ++i) t.weight[i] = bits_of(w.bf16_value(pw, 4));
}

// Copies a third of the gate rows from lower-or-higher rows; returns the copies (row, source).
std::vector<std::pair<uint64_t, uint64_t>> duplicate_rows(const RoutingCase& c, RoutingTensors& t) {
  const uint64_t h = c.config.hidden_size, experts = c.experts();
  Draws d{c.seed, kRows};
  std::vector<std::pair<uint64_t, uint64_t>> copies;
  for (uint64_t e = 0; e < experts && experts > 1; ++e) {
    if (!d.one_in(3)) continue;
    const uint64_t src = d.below(experts);
    if (src == e) continue;
    std::copy_n(t.weight.begin() + static_cast<std::ptrdiff_t>(src * h), h,
                t.weight.begin() + static_cast<std::ptrdiff_t>(e * h));
    copies.emplace_back(e, src);
  }
  return copies;
}

// Designed logits l_e = x0·w0_e + x1·w1_e + x2·w2_e with x = (±2^p, ±2^(p−8−a), ±2^(p−14−b))
// per row (a, b in {0, 1}) and zero weights past column 2. w0 = 1 + j·2^-7, j in 1..4 (a BF16
// value) fixes the BF16 value the logit rounds to. ulp_apart: w1 = w2 = 0, so logits are BF16
// values 0..3 BF16 ULPs apart. near_ties: w1 = ±m·2^-9, w2 = ±m·2^-8 (m in [128, 255]), so
// |x1·w1 + x2·w2| < 2^p·(2^-9 + 2^-14) < half a BF16 ULP of the base (2^(p−8)): every logit
// rounds to its base in BF16 and |l| stays in [2^p, 2^(p+1)), while its lowest bit is
// 2^(p−23) — FP32 holds it and every partial sum exactly — and the clusters hold distinct
// FP32 values 2^(p−23)..2^(p−8) apart.
void designed_rows(const RoutingCase& c, RoutingTensors& t, bool near_ties) {
  const uint64_t h = c.config.hidden_size, experts = c.experts();
  const int p = c.magnitude;
  Draws x{c.seed, kX}, w{c.seed, kDesign};
  std::fill(t.x_bf16.begin(), t.x_bf16.end(), bits_of(0.0f));
  std::fill(t.weight.begin(), t.weight.end(), bits_of(0.0f));
  for (uint64_t r = 0; r < c.rows; ++r) {
    uint16_t* row = t.x_bf16.data() + r * h;
    const auto sign = [&] { return x.one_in(2) ? -1.0f : 1.0f; };
    row[0] = bits_of(sign() * std::ldexp(1.0f, p));
    if (h > 1) row[1] = bits_of(sign() * std::ldexp(1.0f, p - 8 - static_cast<int>(x.below(2))));
    if (h > 2) row[2] = bits_of(sign() * std::ldexp(1.0f, p - 14 - static_cast<int>(x.below(2))));
    for (uint64_t k = 3; k < h; ++k) row[k] = bits_of(x.bf16_value(p, 4));  // weights 0 there
  }
  for (uint64_t e = 0; e < experts; ++e) {
    uint16_t* row = t.weight.data() + e * h;
    row[0] = bits_of(1.0f + std::ldexp(static_cast<float>(1 + w.below(4)), -7));
    if (!near_ties) continue;
    // |w1| < 0.5 (lowest bit 2^-9), |w2| < 1 (lowest bit 2^-8).
    if (h > 1) row[1] = bits_of(w.bf16_value(-2, 1));
    if (h > 2) row[2] = bits_of(w.bf16_value(-1, 1));
  }
}

// The bias: a few values shared by many experts (ties survive the bias), ~2^-2..2^-9.
std::vector<float> bias_of(const RoutingCase& c) {
  Draws d{c.seed, kBias};
  float set[4];
  for (float& v : set) v = d.bf16_value(-2, 8);
  std::vector<float> b(c.experts());
  for (float& v : b) v = set[d.below(4)];
  return b;
}

// token_ids [rows] and tid2eid [vocab, top_k] of a hash case: entries −3 .. E' + 2, so negative
// entries and ids ≥ E (clamped to 0 by the top-k) occur.
void hash_tables(const RoutingCase& c, std::vector<uint32_t>& token_ids,
                 std::vector<int32_t>& tid2eid) {
  Draws d{c.seed, kTokens};
  const uint64_t k = c.config.num_experts_per_tok,
                 vocab = std::max<uint64_t>(c.config.vocab_size, 1);
  for (uint64_t r = 0; r < c.rows; ++r) token_ids.push_back(static_cast<uint32_t>(d.below(vocab)));
  Draws tab{c.seed, kTable};
  const uint64_t span = c.experts() + 6;  // −3 .. E' + 2: negative entries and ids ≥ E
  for (uint64_t i = 0; i < vocab * k; ++i)
    tid2eid.push_back(static_cast<int32_t>(tab.below(span)) - 3);
}

}  // namespace

uint64_t routing_hash(uint64_t seed, uint64_t stream, uint64_t index) {
  return oracle::splitmix64_hash(seed ^ (stream * oracle::kSplitMix64Step) ^
                                 (index * 0xD1B54A32D192ED03ull));
}

const char* to_string(RoutingPattern p) {
  switch (p) {
    case RoutingPattern::random:
      return "random";
    case RoutingPattern::duplicated_rows:
      return "duplicated-rows";
    case RoutingPattern::perturbed_rows:
      return "perturbed-rows";
    case RoutingPattern::all_equal:
      return "all-equal";
    case RoutingPattern::bf16_ulp_apart:
      return "bf16-ulp-apart";
    case RoutingPattern::near_ties:
      return "near-ties";
    case RoutingPattern::group_ties:
      return "group-ties";
  }
  return "?";
}

std::string RoutingCase::describe() const {
  std::ostringstream s;
  s << "routing case: rows=" << rows << " hidden=" << config.hidden_size
    << " experts=" << config.num_experts << "+" << config.zero_expert_num
    << " top_k=" << config.num_experts_per_tok << " scoring=" << config.scoring_func
    << " bias=" << config.use_routing_bias << " norm_topk_prob=" << config.norm_topk_prob
    << " scale=" << config.routed_scaling_factor << " path=" << to_string(precision)
    << " hash=" << hash << " vocab=" << config.vocab_size << " groups=" << config.router_topk_groups
    << "/" << config.router_groups << " pattern=" << to_string(pattern) << " magnitude=2^"
    << magnitude << " seed=" << seed;
  return s.str();
}

void showValue(const RoutingCase& c, std::ostream& os) { os << c.describe(); }

uint64_t routing_case_cost(const RoutingCase& c) {
  const uint64_t t = c.rows, e = c.experts(), h = c.config.hidden_size;
  const uint64_t k = c.config.num_experts_per_tok;
  return 6 * t * e * h + t * e * (k + static_cast<uint64_t>(log2_floor(e)) + 16) + t * k * k;
}

rc::Gen<RoutingCase> routing_case(const RoutingRanges& ranges) {
  return rc::gen::exec([ranges] {
    RoutingCase c;
    ModelConfig& m = c.config;
    const uint64_t max_e = std::max<uint64_t>(ranges.max_experts, 1);
    const uint64_t experts =
        *rc::gen::oneOf(rc::gen::inRange<uint64_t>(1, std::min<uint64_t>(max_e, 24) + 1),
                        rc::gen::inRange<uint64_t>(1, max_e + 1));
    m.zero_expert_num = std::min<uint64_t>(*rc::gen::element<uint64_t>(0, 0, 0, 1, 3), experts - 1);
    m.num_experts = experts - m.zero_expert_num;
    m.num_experts_per_tok = *rc::gen::inRange<uint64_t>(1, std::min(ranges.max_top_k, experts) + 1);
    m.scoring_func = *rc::gen::resize(
        rc::kNominalSize, rc::gen::element<std::string>("softmax", "sigmoid", "sqrtsoftplus"));
    m.use_routing_bias = m.scoring_func != "softmax" && *rc::gen::arbitrary<bool>();
    m.norm_topk_prob = *rc::gen::arbitrary<bool>();
    m.routed_scaling_factor = *rc::gen::element(1.0, 1.0, 2.5, 6.0);
    if (m.routed_scaling_factor == 6.0) m.norm_topk_prob = false;  // LongCat: never renormalised
    m.vocab_size = *rc::gen::inRange<uint64_t>(1, 65);
    m.hidden_size = *rc::gen::inRange<uint64_t>(1, std::max<uint64_t>(ranges.max_hidden, 1) + 1);
    c.rows = *rc::gen::inRange<uint64_t>(1, std::max<uint64_t>(ranges.max_rows, 1) + 1);
    c.precision = *rc::gen::element(RouterPrecision::bf16, RouterPrecision::fp32_gate,
                                    RouterPrecision::fp32_routing);
    c.hash = *rc::gen::element(false, false, false, true);
    // Patterns and scorings at full size: RapidCheck's small early sizes would favour the first.
    c.pattern = kRoutingPatterns[*rc::gen::resize(
        rc::kNominalSize, rc::gen::inRange<size_t>(0, std::size(kRoutingPatterns)))];
    c.magnitude = *rc::gen::oneOf(rc::gen::inRange(-6, 9), rc::gen::element(-100, 100));
    c.seed = *rc::gen::arbitrary<uint64_t>();
    if (!c.hash && max_e >= 4 && *rc::gen::element(false, false, true))
      draw_router_groups(c, max_e, ranges.max_top_k);
    const bool designed =
        c.pattern == RoutingPattern::bf16_ulp_apart || c.pattern == RoutingPattern::near_ties;
    if (designed) m.hidden_size = std::max<uint64_t>(m.hidden_size, 3);
    while (routing_case_cost(c) > ranges.cost_cap && m.hidden_size > (designed ? 3u : 1u))
      m.hidden_size = std::max<uint64_t>(m.hidden_size / 2, designed ? 3 : 1);
    while (routing_case_cost(c) > ranges.cost_cap && c.rows > 1) c.rows /= 2;
    return c;
  });
}

void draw_router_groups(RoutingCase& c, uint64_t max_experts, uint64_t max_top_k) {
  const uint64_t groups =
      *rc::gen::inRange<uint64_t>(2, std::min<uint64_t>(16, max_experts / 2) + 1);
  const uint64_t size =
      *rc::gen::inRange<uint64_t>(2, std::min<uint64_t>(64, max_experts / groups) + 1);
  const uint64_t kept = *rc::gen::inRange<uint64_t>(1, groups + 1);
  const uint64_t top_k = *rc::gen::inRange<uint64_t>(1, std::min(max_top_k, kept * size) + 1);
  with_router_groups(c, groups, size, kept, top_k);
}

void with_router_groups(RoutingCase& c, uint64_t groups, uint64_t size, uint64_t kept,
                        uint64_t top_k) {
  ModelConfig& m = c.config;
  m.zero_expert_num = 0;
  m.num_experts = groups * size;
  m.router_groups = groups;
  m.router_topk_groups = kept;
  m.num_experts_per_tok = top_k;
}

RoutingCase deepseek_v3_routing(uint64_t rows, uint64_t hidden, uint64_t seed) {
  RoutingCase c;
  c.config.hidden_size = hidden;
  c.config.scoring_func = "sigmoid";
  c.config.use_routing_bias = true;
  c.config.norm_topk_prob = true;
  c.config.routed_scaling_factor = 2.5;
  c.config.vocab_size = 1;
  with_router_groups(c, 8, 32, 4, 8);
  c.rows = rows;
  c.precision = RouterPrecision::fp32_gate;
  c.seed = seed;
  return c;
}

namespace {

// group_ties: each router group q ≥ 1 (blocks of 4 experts without groups) copies, with
// probability 1/2, the gate rows and bias of an earlier group — exactly tied group scores, the
// lower group index ranking first. A quarter of the copies reverse the rows (the same top-2 sum
// from other positions); another quarter move one row's column-0 weight by one BF16 ULP with
// column 0's x 2^12 below the rest (perturbed_rows' trick: the group score moves by far less
// than a BF16 ULP of the logits, often less than the FP32 bound).
// Returns the expert copies (to, from), for the bias.
std::vector<std::pair<uint64_t, uint64_t>> group_copies(const RoutingCase& c, RoutingTensors& t,
                                                        int px) {
  std::vector<std::pair<uint64_t, uint64_t>> copies;
  const uint64_t h = c.config.hidden_size, experts = c.experts();
  const uint64_t size = c.config.router_groups > 1 ? experts / c.config.router_groups : 4;
  Draws d{c.seed, kGroups};
  if (h > 1) {
    Draws x{c.seed, kX, 1u << 21};
    for (uint64_t r = 0; r < c.rows; ++r) t.x_bf16[r * h] = bits_of(x.bf16_value(px - 12, 2));
  }
  for (uint64_t q = 1; q * size + size <= experts; ++q) {
    if (!d.one_in(2)) continue;
    const uint64_t src = d.below(q);
    const uint64_t how = d.below(4);  // 0: reversed, 1: perturbed, else exact copy
    for (uint64_t i = 0; i < size; ++i) {
      const uint64_t from = src * size + (how == 0 ? size - 1 - i : i), to = q * size + i;
      std::copy_n(t.weight.begin() + static_cast<std::ptrdiff_t>(from * h), h,
                  t.weight.begin() + static_cast<std::ptrdiff_t>(to * h));
      copies.emplace_back(to, from);
    }
    if (how == 1) {
      uint16_t& b = t.weight[(q * size + d.below(size)) * h];
      b = static_cast<uint16_t>((b & 0x7F80u) == 0x7F00u ? b - 1 : b + 1);  // stay finite
    }
  }
  return copies;
}

}  // namespace

RoutingTensors routing_tensors(const RoutingCase& c) {
  const uint64_t h = c.config.hidden_size, experts = c.experts();
  RoutingTensors t;
  t.x_bf16.resize(c.rows * h);
  t.weight.resize(experts * h);
  // Random patterns: |l| ≈ √h·|x|·|w| ≈ 2^magnitude.
  const int px = c.magnitude / 2;
  const int pw = c.magnitude - px - log2_floor(h) / 2;
  std::vector<std::pair<uint64_t, uint64_t>> copies;
  switch (c.pattern) {
    case RoutingPattern::bf16_ulp_apart:
    case RoutingPattern::near_ties:
      designed_rows(c, t, c.pattern == RoutingPattern::near_ties);
      break;
    case RoutingPattern::all_equal:
      random_rows(c, t, px, pw);
      for (uint64_t e = 1; e < experts; ++e)
        std::copy_n(t.weight.begin(), h, t.weight.begin() + static_cast<std::ptrdiff_t>(e * h));
      break;
    case RoutingPattern::perturbed_rows: {
      random_rows(c, t, px, pw);
      // Column 0's x is 2^12 below the rest: one BF16 ULP of w there moves the logit by
      // ~2^-19·|x·w|, far below one BF16 ULP (2^-7..2^-8 relative) of the logit.
      Draws x{c.seed, kX, 1u << 20};
      if (h > 1)
        for (uint64_t r = 0; r < c.rows; ++r) t.x_bf16[r * h] = bits_of(x.bf16_value(px - 12, 2));
      for (const auto& [e, src] : duplicate_rows(c, t)) {
        uint16_t& b = t.weight[e * h];
        b = static_cast<uint16_t>((b & 0x7F80u) == 0x7F00u ? b - 1 : b + 1);  // stay finite
      }
      break;
    }
    case RoutingPattern::duplicated_rows:
      random_rows(c, t, px, pw);
      duplicate_rows(c, t);
      break;
    case RoutingPattern::group_ties:
      random_rows(c, t, px, pw);
      copies = group_copies(c, t, px);
      break;
    case RoutingPattern::random:
      random_rows(c, t, px, pw);
      break;
  }
  // FP32 x: the BF16 values with low bits FP32 keeps; the designed columns stay exact.
  Draws xf{c.seed, kXf32};
  const bool designed =
      c.pattern == RoutingPattern::bf16_ulp_apart || c.pattern == RoutingPattern::near_ties;
  t.x_f32.resize(t.x_bf16.size());
  for (uint64_t i = 0; i < t.x_f32.size(); ++i) {
    const double v = bf16_bits_to_f32(t.x_bf16[i]);
    const auto j = static_cast<double>(xf.below(15)) - 7.0;
    t.x_f32[i] =
        designed && i % h < 3 ? static_cast<float>(v) : static_cast<float>(v * (1.0 + j * 0x1p-20));
  }
  if (c.config.use_routing_bias && c.config.scoring_func != "softmax") t.bias = bias_of(c);
  for (const auto& [to, from] : copies)  // group_ties: the bias follows the copied rows
    if (!t.bias.empty()) t.bias[to] = t.bias[from];
  if (c.hash) hash_tables(c, t.token_ids, t.tid2eid);
  return t;
}

namespace {

// Hash layers select by table, so their selected logits can lie anywhere below the row
// maximum. In about half the rows every expert the table selects for the row's token (the
// clamped ids) gets a logit −m·2^q (a BF16 value) far below the rest of the row: q ≥ the row's
// magnitude + 2, drawn from 7 (gaps of ~128..512: e^gap underflows in FP32, not in FP64), 10
// (~1e3..4e3: underflows in FP64 too) and 100 (~1e30). The literal "softmax over all E', then
// renormalise" is 0/0 there; routing.h's renormalised form is not.
void far_below_the_max(const RoutingCase& c, std::vector<float>& l) {
  std::vector<uint32_t> tokens;
  std::vector<int32_t> table;
  hash_tables(c, tokens, table);
  const uint64_t experts = c.experts(), k = c.config.num_experts_per_tok;
  const int p = std::clamp(c.magnitude, -100, 100);
  Draws d{c.seed, kFarBelow};
  for (uint64_t r = 0; r < c.rows; ++r) {
    if (d.one_in(2)) continue;
    const int choices[] = {7, 10, 100};
    const int q = std::max(p + 2, choices[d.below(3)]);
    for (uint64_t j = 0; j < k; ++j) {
      const auto id = static_cast<uint32_t>(table[tokens[r] * k + j]);
      const uint64_t e = id >= c.config.num_experts ? 0 : id;
      float& v = l[r * experts + e];
      if (!std::isfinite(v)) continue;  // keep the NaN / ±Inf cases as drawn
      v = -std::fabs(d.bf16_value(q, 2));
    }
  }
}

}  // namespace

std::vector<float> topk_logits(const RoutingCase& c, bool nonfinite) {
  const uint64_t experts = c.experts();
  Draws d{c.seed, kLogits};
  std::vector<float> l;
  l.reserve(c.rows * experts);
  const int p = std::clamp(c.magnitude, -100, 100);
  for (uint64_t r = 0; r < c.rows; ++r) {
    float values[6];
    for (float& v : values) v = d.bf16_value(p, 4);
    values[4] = 0.0f;
    values[5] = -0.0f;
    for (uint64_t e = 0; e < experts; ++e) {
      float v = d.one_in(4) ? d.bf16_value(p, 8) : values[d.below(6)];
      if (nonfinite && d.one_in(8)) {
        const float special[] = {NAN, INFINITY, -INFINITY};
        v = special[d.below(3)];
      }
      l.push_back(v);
    }
  }
  if (c.hash) far_below_the_max(c, l);
  return l;
}

}  // namespace bufferlab::gen
