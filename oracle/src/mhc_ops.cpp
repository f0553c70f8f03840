// FP64 oracle of the Sinkhorn-form mHC ops: pre (docs/spec/numerics.md §3 steps 1–5), post (step
// 6), head and expand. Plain loops in the order of the definition; FP64 needs no scaling of huge
// streams (1e30² = 1e60 is far inside its range).
#include <fmt/format.h>

#include <cmath>
#include <initializer_list>
#include <utility>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/mhc.h"
#include "mhc_common.h"

namespace bufferlab::oracle {

bool all_finite(const float* x, uint64_t n) {
  for (uint64_t k = 0; k < n; ++k)
    if (!std::isfinite(x[k])) return false;
  return true;
}

double rms_factor(const float* x, uint64_t n, double eps) {
  double sum_sq = 0.0;
  for (uint64_t k = 0; k < n; ++k) sum_sq += static_cast<double>(x[k]) * x[k];
  return 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
}

namespace {

// r·(fn·x) of one token over `rows` rows of fn [rows, K]: the mix vector (pre and head).
void mix_of_token(const float* x, uint64_t K, const float* fn, uint64_t rows, double rms_eps,
                  double* mix) {
  const double r = rms_factor(x, K, rms_eps);
  for (uint64_t m = 0; m < rows; ++m) {
    double s = 0.0;
    for (uint64_t k = 0; k < K; ++k) s += static_cast<double>(fn[m * K + k]) * x[k];
    mix[m] = r * s;
  }
}

// y[d] = Σ_i pre_i·x[i·h + d], BF16-rounded in faithful mode.
void weighted_sum(const float* x, const double* pre, uint64_t hc, uint64_t h, Mode mode,
                  double* y) {
  for (uint64_t d = 0; d < h; ++d) {
    double s = 0.0;
    for (uint64_t i = 0; i < hc; ++i) s += pre[i] * x[i * h + d];
    y[d] = mode == Mode::faithful ? round_bf16(s) : s;
  }
}

void fill_nan(double* p, uint64_t n) {
  for (uint64_t k = 0; k < n; ++k) p[k] = NAN;
}

}  // namespace

MhcPreReference mhc_pre(const MhcPreOp& op, const MhcPreInputs& in, Mode mode,
                        bool final_exact_column) {
  const auto& s = op.shape();
  const uint64_t rows = s.rows, hc = s.hc, h = s.h, K = mul(hc, h);
  const std::string p = op.params();
  if (hc == 0) throw Error(p + ": hc = 0");
  if (s.mix != mul(hc + 2, hc)) throw Error(p + ": mix is not (2 + hc)·hc");
  require_size(p, "streams", in.streams.size(), mul(rows, K));
  require_size(p, "fn", in.fn.size(), mul(s.mix, K));
  require_size(p, "scale", in.scale.size(), 3);
  require_size(p, "bias", in.bias.size(), s.mix);

  MhcPreReference ref;
  ref.mix.assign(mul(rows, s.mix), 0.0);
  ref.pre.assign(mul(rows, hc), 0.0);
  ref.post.assign(mul(rows, hc), 0.0);
  ref.kernel.assign(mul(rows, hc * hc), 0.0);
  ref.comb.assign(mul(rows, hc * hc), 0.0);
  ref.block_in.assign(mul(rows, h), 0.0);
  const double s0 = in.scale[0], s1 = in.scale[1], s2 = in.scale[2];
  std::vector<double> logits(hc * hc);
  for (uint64_t t = 0; t < rows; ++t) {
    const float* x = in.streams.data() + t * K;
    double* mix = ref.mix.data() + t * s.mix;
    double* pre = ref.pre.data() + t * hc;
    double* post = ref.post.data() + t * hc;
    double* kernel = ref.kernel.data() + t * hc * hc;
    double* comb = ref.comb.data() + t * hc * hc;
    double* y = ref.block_in.data() + t * h;
    if (!all_finite(x, K)) {  // the defined result: every output of the token NaN
      ++ref.nonfinite_tokens;
      const std::initializer_list<std::pair<double*, uint64_t>> outputs = {
          {mix, s.mix}, {pre, hc}, {post, hc}, {kernel, hc * hc}, {comb, hc * hc}, {y, h}};
      for (auto [ptr, n] : outputs) fill_nan(ptr, n);
      continue;
    }
    mix_of_token(x, K, in.fn.data(), s.mix, op.rms_eps, mix);
    for (uint64_t i = 0; i < hc; ++i) {
      pre[i] = sigmoid(mix[i] * s0 + in.bias[i]) + op.hc_eps;
      post[i] = 2.0 * sigmoid(mix[hc + i] * s1 + in.bias[hc + i]);
    }
    for (uint64_t k = 0; k < hc * hc; ++k) logits[k] = mix[2 * hc + k] * s2 + in.bias[2 * hc + k];
    const std::vector<double> K0 = sinkhorn_kernel(logits, hc, op.hc_eps);
    const std::vector<double> C = sinkhorn(K0, hc, s.iters, op.hc_eps, final_exact_column);
    std::copy(K0.begin(), K0.end(), kernel);
    std::copy(C.begin(), C.end(), comb);
    weighted_sum(x, pre, hc, h, mode, y);
  }
  return ref;
}

void require_post_inputs(const MhcPostOp& op, const MhcPostInputs& in) {
  const auto& s = op.shape();
  const uint64_t rows = s.rows, hc = s.hc, h = s.h;
  const std::string p = op.params();
  require_size(p, "post", in.post.size(), mul(rows, hc));
  if (!s.lowrank) require_size(p, "comb", in.comb.size(), mul(rows, hc * hc));
  require_size(p, "block_out", in.block_out.size(), mul(rows, h));
  require_size(p, "streams", in.streams.size(), mul(rows, mul(hc, h)));
}

std::vector<double> mhc_post(const MhcPostOp& op, const MhcPostInputs& in) {
  const auto& s = op.shape();
  const uint64_t rows = s.rows, hc = s.hc, h = s.h;
  require_post_inputs(op, in);
  std::vector<double> out(in.streams.size());
  for (uint64_t t = 0; t < rows; ++t) {
    const float* x = in.streams.data() + t * hc * h;
    const float* post = in.post.data() + t * hc;
    const uint16_t* bo = in.block_out.data() + t * h;
    for (uint64_t j = 0; j < hc; ++j)
      for (uint64_t d = 0; d < h; ++d) {
        const double b = bf16_value(bo[d]);
        double v = 0.0;
        if (s.lowrank) {
          v = x[j * h + d] + static_cast<double>(post[j]) * b;
        } else {
          const float* comb = in.comb.data() + t * hc * hc;
          v = static_cast<double>(post[j]) * b;
          for (uint64_t i = 0; i < hc; ++i)
            v += static_cast<double>(comb[i * hc + j]) * x[i * h + d];
        }
        out[(t * hc + j) * h + d] = v;
      }
  }
  return out;
}

MhcHeadReference mhc_head(const MhcHeadOp& op, const MhcHeadInputs& in, Mode mode) {
  const auto& s = op.shape();
  const uint64_t rows = s.rows, hc = s.hc, h = s.h, K = mul(hc, h);
  const std::string p = op.params();
  if (hc == 0) throw Error(p + ": hc = 0");
  require_size(p, "streams", in.streams.size(), mul(rows, K));
  require_size(p, "fn", in.fn.size(), mul(hc, K));
  require_size(p, "scale", in.scale.size(), 1);
  require_size(p, "bias", in.bias.size(), hc);
  MhcHeadReference ref;
  ref.mix.assign(mul(rows, hc), 0.0);
  ref.pre.assign(mul(rows, hc), 0.0);
  ref.output.assign(mul(rows, h), 0.0);
  for (uint64_t t = 0; t < rows; ++t) {
    const float* x = in.streams.data() + t * K;
    double* mix = ref.mix.data() + t * hc;
    double* pre = ref.pre.data() + t * hc;
    double* y = ref.output.data() + t * h;
    if (!all_finite(x, K)) {
      ++ref.nonfinite_tokens;
      fill_nan(mix, hc);
      fill_nan(pre, hc);
      fill_nan(y, h);
      continue;
    }
    mix_of_token(x, K, in.fn.data(), hc, op.rms_eps, mix);
    for (uint64_t i = 0; i < hc; ++i)
      pre[i] = sigmoid(mix[i] * in.scale[0] + in.bias[i]) + op.hc_eps;
    weighted_sum(x, pre, hc, h, mode, y);
  }
  return ref;
}

std::vector<double> mhc_expand(const MhcExpandOp& op, std::span<const uint16_t> input) {
  const auto& s = op.shape();
  require_size(op.params(), "input", input.size(), mul(s.rows, s.h));
  std::vector<double> out(mul(s.rows, mul(s.hc, s.h)));
  for (uint64_t t = 0; t < s.rows; ++t)
    for (uint64_t i = 0; i < s.hc; ++i)
      for (uint64_t d = 0; d < s.h; ++d)
        out[(t * s.hc + i) * s.h + d] = bf16_value(input[t * s.h + d]);
  return out;
}

}  // namespace bufferlab::oracle
