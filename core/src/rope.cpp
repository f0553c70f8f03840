// The RoPE frequency table of docs/spec/attention.md §2 (rope.h). Every formula is written from
// its mathematical statement in transformers' documentation of the RoPE types, evaluated in
// FP64 (transformers evaluates the same expressions in FP32), each inv_freq rounded once to
// FP32 at the end.
#include "bufferlab/core/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "bufferlab/core/error.h"

namespace bufferlab {
namespace {

void refuse(const std::string& what) { throw Error("RoPE: " + what); }

std::string num(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// θ^(−2i/d) for the frequency pairs i < d/2: the unscaled inverse frequencies.
std::vector<double> base_inv_freq(double theta, uint64_t dim) {
  std::vector<double> f(dim / 2);
  for (uint64_t i = 0; i < f.size(); ++i)
    f[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dim));
  return f;
}

// llama3: wavelengths 2π/f above original/low_freq_factor are divided by factor, those below
// original/high_freq_factor kept, and the band between blended by
// s = (original/λ − low)/(high − low): (1 − s)·f/factor + s·f.
std::vector<double> llama3(const RopeParams& p, std::vector<double> f) {
  const double low_wavelen = p.original_max_position / p.low_freq_factor;
  const double high_wavelen = p.original_max_position / p.high_freq_factor;
  for (double& v : f) {
    const double wavelen = 2.0 * std::numbers::pi / v;
    if (wavelen > low_wavelen) {
      v /= p.factor;
    } else if (!(wavelen < high_wavelen)) {
      const double s = (p.original_max_position / wavelen - p.low_freq_factor) /
                       (p.high_freq_factor - p.low_freq_factor);
      v = (1.0 - s) * v / p.factor + s * v;
    }
  }
  return f;
}

// yarn's mscale: 1 for scale ≤ 1, else 0.1·m·ln(scale) + 1.
double yarn_mscale(double scale, double m) {
  return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

// yarn: the dimension at which a frequency completes `rotations` turns over the original
// context, d·ln(original/(rotations·2π)) / (2·ln θ); the ramp between the dimensions of
// beta_fast and beta_slow turns each frequency from extrapolated (f) to interpolated
// (f/factor). truncate rounds the range outwards (floor, ceil); the range is clamped to
// [0, d − 1], and an empty one widened by 0.001.
std::vector<double> yarn(const RopeParams& p, const std::vector<double>& f) {
  const auto dim = static_cast<double>(p.rotary_dim);
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(p.original_max_position / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(p.theta));
  };
  double low = correction_dim(p.beta_fast), high = correction_dim(p.beta_slow);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;
  std::vector<double> out(f.size());
  for (uint64_t i = 0; i < f.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolated_share = 1.0 - ramp;
    out[i] = f[i] / p.factor * (1.0 - extrapolated_share) + f[i] * extrapolated_share;
  }
  return out;
}

void check(const RopeParams& p) {
  if (p.rotary_dim == 0 || p.rotary_dim % 2 != 0)
    refuse("rotary_dim = " + std::to_string(p.rotary_dim) + " must be even and > 0");
  if (!(std::isfinite(p.theta) && p.theta > 1.0))
    refuse("rope_theta = " + num(p.theta) + " must be a finite number > 1");
  if (p.type == RopeType::plain) return;
  if (!(std::isfinite(p.factor) && p.factor > 0.0))
    refuse("factor = " + num(p.factor) + " must be a finite number > 0 (" + to_string(p.type) +
           ")");
  if (p.type == RopeType::linear) return;
  if (!(p.original_max_position > 0.0))
    refuse("original_max_position_embeddings = " + num(p.original_max_position) + " must be > 0 (" +
           to_string(p.type) + ")");
  if (p.type == RopeType::llama3 && p.low_freq_factor == p.high_freq_factor)
    refuse("low_freq_factor = high_freq_factor = " + num(p.low_freq_factor) +
           " (llama3 divides by their difference)");
}

}  // namespace

const char* to_string(RopeType t) {
  switch (t) {
    case RopeType::plain:
      return "default";
    case RopeType::linear:
      return "linear";
    case RopeType::llama3:
      return "llama3";
    case RopeType::yarn:
      return "yarn";
  }
  return "?";
}

RopeType rope_type_from_string(const std::string& s) {
  for (RopeType t : {RopeType::plain, RopeType::linear, RopeType::llama3, RopeType::yarn})
    if (s == to_string(t)) return t;
  throw Error("RoPE: rope_type \"" + s + "\" is not supported (default, linear, llama3, yarn)");
}

RopeParams rope_params(const ModelConfig& c) {
  validate_attention(c);
  RopeParams p;
  p.type = rope_type_from_string(c.rope_type);
  p.theta = c.rope_theta;
  if (c.kv_lora_rank > 0) {
    // MLA rotates qk_rope_head_dim of each head; int() truncates as transformers does.
    const double d = static_cast<double>(c.qk_rope_head_dim) * c.partial_rotary_factor;
    p.rotary_dim = d > 0 ? static_cast<uint64_t>(d) : 0;
  } else {
    p.rotary_dim = c.rotary_dim();
  }
  p.factor = c.rope_factor;
  p.low_freq_factor = c.rope_low_freq_factor;
  p.high_freq_factor = c.rope_high_freq_factor;
  p.original_max_position = static_cast<double>(c.rope_original_max_position);
  p.beta_fast = c.rope_beta_fast;
  p.beta_slow = c.rope_beta_slow;
  p.mscale = c.rope_mscale;
  p.mscale_all_dim = c.rope_mscale_all_dim;
  if (c.rope_attention_factor != 0.0) p.attention_factor = c.rope_attention_factor;
  p.truncate = c.rope_truncate;
  return p;
}

RopeTable rope_table(const RopeParams& p) {
  check(p);
  std::vector<double> f = base_inv_freq(p.theta, p.rotary_dim);
  RopeTable t;
  switch (p.type) {
    case RopeType::plain:
      break;
    case RopeType::linear:
      for (double& v : f) v /= p.factor;
      break;
    case RopeType::llama3:
      f = llama3(p, std::move(f));
      break;
    case RopeType::yarn:
      f = yarn(p, f);
      if (p.attention_factor)
        t.attention_factor = *p.attention_factor;
      else if (p.mscale != 0.0 && p.mscale_all_dim != 0.0)
        t.attention_factor =
            yarn_mscale(p.factor, p.mscale) / yarn_mscale(p.factor, p.mscale_all_dim);
      else
        t.attention_factor = yarn_mscale(p.factor, 1.0);
      break;
  }
  t.inv_freq.assign(f.begin(), f.end());  // one rounding to FP32 each
  return t;
}

}  // namespace bufferlab
