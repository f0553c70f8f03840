// FP64 oracle of the non-routing MoE / FFN ops and their derived per-element bounds.
//
// Common notation (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1): γ_n =
// n·u/(1 − n·u). A backend's FP32 dot product of length K over BF16 operands satisfies
// |ŷ − y| ≤ γ_K(u)·Σ_k|x_k·w_k| (the products of two BF16 values are exact in FP32, every
// summation order holds at most K − 1 additions; u = 2^-24 on the CPU, 2^-23 for device GEMMs
// whose tensor cores do not round to nearest). Gradual underflow adds at most 2^-150 per
// product or addition whose result is subnormal: the absolute term K·2^-149 covers it. The
// oracle's own FP64 sum errs by at most γ_K(2^-53)·Σ|x·w|, added to every bound.
//
// The stored value bf16(ŷ) is compared with the faithful value bf16(y):
//   |bf16(ŷ) − bf16(y)| ≤ ½ulp(ŷ) + |ŷ − y| + ½ulp(y) ≤ e + ulp(|y| + e),
// where e bounds |ŷ − y| and ulp(v) is the BF16 spacing at magnitude v (bf16_ulp_at): the
// "≤ 1 ULP of the storage format per stored value" of docs/spec/numerics.md §9. Domain of every
// bound: values and partial sums below FLT_MAX (an FP32 overflow is outside any bound).
#include "bufferlab/oracle/moe_ffn.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/pool_placement.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

// kSiluLipschitz, silu, silu_rel, dot_error, require_size: oracle_common.h.
// Below −88.72, expf(−g) overflows to +Inf and FP32 silu(g) becomes −0.
constexpr double kExpOverflowArg = -88.0;

std::vector<double> to_f64(std::span<const uint16_t> bits) {
  std::vector<double> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = bf16_bits_to_f32(bits[i]);
  return v;
}

struct Dot {
  double sum = 0.0;
  double abs = 0.0;  // Σ|x_k·w_k|
};
Dot dot_terms(const double* x, const double* w, uint64_t K) {
  Dot d;
  for (uint64_t k = 0; k < K; ++k) {
    const double p = x[k] * w[k];
    d.sum += p;
    d.abs += std::fabs(p);
  }
  return d;
}

// e + ulp(|y| + e): the stored-value bound around a computed-value bound e (header comment).
double stored(double y, double e) {
  if (!std::isfinite(e) || !std::isfinite(y)) return INFINITY;
  return e + bf16_ulp_at(std::fabs(y) + e);
}

double finish(Mode mode, double y) { return mode == Mode::faithful ? round_bf16(y) : y; }

OpReference blank(uint64_t n, uint64_t cols, bool masked) {
  OpReference r;
  r.value.assign(n, 0.0);
  r.bound.assign(n, 0.0);
  if (masked) r.mask.assign(n, 0);
  r.cols = cols;
  return r;
}

// ---- Expert GEMM on FP64 operands (shared by the op oracle and the chain) ----
// Output index s·N + n for slot s = t·top_k + j: the token-major slices of gate/up and the
// rows t·top_k + j of down coincide.
OpReference expert_gemm_f64(const MoeExpertGemmOp& op, const std::vector<double>& input,
                            std::span<const uint32_t> ids, const std::vector<double>& w, Mode mode,
                            const BoundModel& bm, uint64_t zero_experts) {
  const auto& d = op.shape();
  const uint64_t slots = mul(d.rows, d.top_k), K = d.K, N = d.N;
  const bool down = op.proj == ExpertProj::down;
  const std::vector<int64_t> order = gather_order(ids, d.experts, zero_experts);
  OpReference r = blank(mul(slots, N), down ? N : mul(d.top_k, N), true);
  r.formula = fmt::format(
      "gamma_K(u)*sum|x*w| + gamma_K(2^-53)*sum|x*w| + K*2^-149 + ulp_bf16(|y|+e); K={}, u={:.3g}",
      K, bm.gemm_u);
  for (uint64_t s = 0; s < slots; ++s) {
    if (order[s] < 0) continue;
    const double* x = input.data() + (down ? s : static_cast<uint64_t>(order[s])) * K;
    for (uint64_t n = 0; n < N; ++n) {
      const Dot p = dot_terms(x, w.data() + (ids[s] * N + n) * K, K);
      const uint64_t i = s * N + n;
      r.value[i] = finish(mode, p.sum);
      r.bound[i] = stored(p.sum, dot_error(p.abs, K, bm.gemm_u));
      r.mask[i] = 1;
    }
  }
  return r;
}

// ---- SwiGLU on FP64 operands ----
// Derivation: g' = min(g, L), u' = clamp(u, ±L) are exact (BF16 values, L the FP32 limit the
// kernels receive). ŷ = fl(silû(g')·u') = y·(1 + θ), |θ| ≤ γ_(2·exp_ulps + 4) (silu_rel plus
// the product). Where expf(−g') overflows (g' < −88) the FP32 result is ±0: add |y|. FP64
// evaluation of silu: ≤ γ_6(2^-53)·|y|. Subnormal results: 2·2^-149 absolute. Then the store.
OpReference swiglu_f64(const SwigluOp& op, const std::vector<double>& g,
                       const std::vector<double>& u, Mode mode, const BoundModel& bm) {
  const uint64_t n = mul(op.shape().rows, op.shape().width);
  OpReference r = blank(n, op.shape().width, false);
  const double rel = gamma(2.0 * bm.exp_ulps + 4.0, bm.fp32_u) + gamma(6.0, kU64);
  r.formula =
      fmt::format("gamma_(2*exp_ulps+4)(u)*|y| (= {:.3g}|y|) + 2^-148 + ulp_bf16(|y|+e)", rel);
  const double limit = static_cast<float>(op.limit);
  for (uint64_t i = 0; i < n; ++i) {
    double gi = g[i], ui = u[i];
    if (op.limit > 0.0) {
      gi = std::min(gi, limit);
      ui = std::clamp(ui, -limit, limit);
    }
    const double y = silu(gi) * ui;
    double e = rel * std::fabs(y) + 2.0 * kUnderflowPerOp;
    if (gi < kExpOverflowArg) e += std::fabs(y);
    r.value[i] = finish(mode, y);
    r.bound[i] = std::isnan(y) ? 0.0 : stored(y, e);
  }
  return r;
}

// ---- Combine on FP64 operands ----
// Derivation: out = Σ_j fl(w_j·v_j) over the top_k terms (routed: the down row; zero expert:
// x[t]), summed in FP32 in any order (or FMA-chained): k = top_k roundings of products and
// top_k − 1 additions at most ⇒ |ŷ − y| ≤ γ_top_k(u)·Σ_j|w_j·v_j| + top_k·2^-149 (underflow),
// plus the FP64 oracle's γ_top_k(2^-53)·Σ|w·v|; then the store.
OpReference combine_f64(const MoeCombineOp& op, std::span<const uint32_t> ids,
                        std::span<const float> weights, const std::vector<double>& down,
                        const std::vector<double>& x, Mode mode, const BoundModel& bm) {
  const auto& d = op.shape();
  const uint64_t D = d.width, k = d.top_k;
  OpReference r = blank(mul(d.rows, D), D, false);
  const double kk = static_cast<double>(k);
  const double rel = gamma(kk, bm.fp32_u) + gamma(kk, kU64);
  r.formula = fmt::format(
      "gamma_top_k(u)*sum_j|w_j*v_j| + top_k*2^-149 + ulp_bf16(|y|+e); "
      "top_k={}, u={:.3g}",
      k, bm.fp32_u);
  for (uint64_t t = 0; t < d.rows; ++t) {
    for (uint64_t c = 0; c < D; ++c) {
      double sum = 0.0, abs = 0.0;
      for (uint64_t j = 0; j < k; ++j) {
        const uint64_t s = t * k + j;
        const uint32_t id = ids[s];
        double v = 0.0;
        if (id < d.experts) {
          v = down[s * D + c];
        } else if (id < d.experts + d.zero_experts && !x.empty()) {
          v = x[t * D + c];
        } else {
          throw Error(fmt::format("{}: token {} slot {} has id {} (experts {}, zero experts {}{})",
                                  op.params(), t, j, id, d.experts, d.zero_experts,
                                  x.empty() ? ", input not read" : ""));
        }
        const double p = static_cast<double>(weights[s]) * v;
        sum += p;
        abs += std::fabs(p);
      }
      const uint64_t i = t * D + c;
      r.value[i] = finish(mode, sum);
      r.bound[i] = stored(sum, rel * abs + kk * kUnderflowPerOp);
    }
  }
  return r;
}

}  // namespace

std::vector<uint16_t> perfect_bf16_output(const OpReference& ref) {
  std::vector<uint16_t> out(ref.value.size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = !ref.mask.empty() && ref.mask[i] == 0
                 ? uint16_t{0xFFFF}
                 : f32_to_bf16_bits(static_cast<float>(round_bf16(ref.value[i])));
  return out;
}

std::vector<int64_t> gather_order(std::span<const uint32_t> ids, uint64_t experts,
                                  uint64_t zero_experts) {
  std::vector<uint64_t> count(experts + 1, 0);
  for (size_t s = 0; s < ids.size(); ++s) {
    if (ids[s] >= experts + zero_experts)
      throw Error(fmt::format("gather order: slot {} has id {} >= E' = {}", s, ids[s],
                              experts + zero_experts));
    if (ids[s] < experts) ++count[ids[s] + 1];
  }
  for (uint64_t e = 0; e < experts; ++e) count[e + 1] += count[e];  // offset(e) = count[e]
  std::vector<int64_t> order(ids.size(), -1);
  for (size_t s = 0; s < ids.size(); ++s)
    if (ids[s] < experts) order[s] = static_cast<int64_t>(count[ids[s]]++);
  return order;
}

uint64_t routed_slots(std::span<const uint32_t> ids, uint64_t experts) {
  return static_cast<uint64_t>(
      std::count_if(ids.begin(), ids.end(), [&](uint32_t id) { return id < experts; }));
}

// Gather: a copy of BF16 rows, bound 0 (bit-exact). Rows past the routed-slot count are not
// written (mask 0).
OpReference moe_gather(const MoeGatherOp& op, const GatherInputs& in, uint64_t zero_experts) {
  const auto& d = op.shape();
  const std::string p = op.params();
  require_size(p, "input", in.input.size(), mul(d.rows, d.width));
  require_size(p, "ids", in.ids.size(), mul(d.rows, d.top_k));
  const std::vector<int64_t> order = gather_order(in.ids, d.experts, zero_experts);
  OpReference r = blank(mul(mul(d.rows, d.top_k), d.width), d.width, true);
  r.formula = "exact copy (0)";
  for (uint64_t s = 0; s < order.size(); ++s) {
    if (order[s] < 0) continue;
    const uint64_t t = s / d.top_k, g = static_cast<uint64_t>(order[s]);
    for (uint64_t c = 0; c < d.width; ++c) {
      r.value[g * d.width + c] = bf16_bits_to_f32(in.input[t * d.width + c]);
      r.mask[g * d.width + c] = 1;
    }
  }
  return r;
}

OpReference moe_expert_gemm(const MoeExpertGemmOp& op, const ExpertGemmInputs& in, Mode mode,
                            const BoundModel& bm, uint64_t zero_experts) {
  const auto& d = op.shape();
  const std::string p = op.params();
  require_size(p, "input", in.input.size(), mul(mul(d.rows, d.top_k), d.K));
  require_size(p, "ids", in.ids.size(), mul(d.rows, d.top_k));
  require_size(p, "weight", in.weight.size(), mul(mul(d.experts, d.N), d.K));
  return expert_gemm_f64(op, to_f64(in.input), in.ids, to_f64(in.weight), mode, bm, zero_experts);
}

OpReference swiglu(const SwigluOp& op, const SwigluInputs& in, Mode mode, const BoundModel& bm) {
  const uint64_t n = mul(op.shape().rows, op.shape().width);
  require_size(op.params(), "gate", in.gate.size(), n);
  require_size(op.params(), "up", in.up.size(), n);
  return swiglu_f64(op, to_f64(in.gate), to_f64(in.up), mode, bm);
}

OpReference moe_combine(const MoeCombineOp& op, const CombineInputs& in, Mode mode,
                        const BoundModel& bm) {
  const auto& d = op.shape();
  const std::string p = op.params();
  require_size(p, "ids", in.ids.size(), mul(d.rows, d.top_k));
  require_size(p, "weights", in.weights.size(), mul(d.rows, d.top_k));
  require_size(p, "down", in.down.size(), mul(mul(d.rows, d.top_k), d.width));
  if (op.reads_input) require_size(p, "input", in.input.size(), mul(d.rows, d.width));
  const std::vector<double> x = op.reads_input ? to_f64(in.input) : std::vector<double>{};
  return combine_f64(op, in.ids, in.weights, to_f64(in.down), x, mode, bm);
}

// GemmOp, per epilogue; a = Σ_k x·w exact, â the FP32 accumulator, e_a = γ_K(u)·Σ|x·w| +
// γ_K(2^-53)·Σ|x·w| + K·2^-149 (header comment):
//   store:      ŷ = â ⇒ e = e_a.
//   accumulate: ŷ = fl(o + â) ⇒ e = e_a + u·(|y| + e_a).
//   swiglu:     ŷ = fl(silû(â)·o), silû = silu·(1 + θ), |θ| ≤ ε_s = γ_(2·exp_ulps+3)(u), silu
//               1.1-Lipschitz ⇒ |silû(â) − silu(a)| ≤ 1.1·e_a + ε_s·(|silu(a)| + 1.1·e_a), so
//               e = |o|·(1.1·e_a·(1 + ε_s) + ε_s·|silu(a)|)·(1 + u) + u·|y| + γ_6(2^-53)|y|,
//               plus |y| where â may be < −88 (expf overflow: FP32 silu = −0), plus the
//               underflow of silu's quotient (times |o|) and the product (bounds.h):
//               max(2, |o| + 1)·2^-149.
// Then the store: e + ulp_bf16(|y| + e).
OpReference gemm(const GemmOp& op, const GemmInputs& in, Mode mode, const BoundModel& bm) {
  const auto& d = op.shape();
  const GemmEpilogue epi = op.epilogue();
  const std::string p = op.params();
  require_size(p, "x", in.x.size(), mul(d.rows, d.K));
  require_size(p, "weight", in.weight.size(), mul(d.N, d.K));
  if (epi != GemmEpilogue::store) require_size(p, "out_old", in.out_old.size(), mul(d.rows, d.N));
  const std::vector<double> x = to_f64(in.x), w = to_f64(in.weight), old = to_f64(in.out_old);
  OpReference r = blank(mul(d.rows, d.N), d.N, false);
  const double u = bm.fp32_u, es = silu_rel(bm);
  r.formula = epi == GemmEpilogue::store ? "e_a = gamma_K(u)*sum|x*w| + ... ; + ulp_bf16"
              : epi == GemmEpilogue::accumulate
                  ? "e_a + u*(|y|+e_a) + ulp_bf16(|y|+e)"
                  : "|o|*(1.1*e_a*(1+eps_s) + eps_s*|silu(a)|)*(1+u) + u*|y| + ulp_bf16(|y|+e)";
  r.formula += fmt::format("; K={}, gemm u={:.3g}", d.K, bm.gemm_u);
  for (uint64_t t = 0; t < d.rows; ++t) {
    for (uint64_t n = 0; n < d.N; ++n) {
      const Dot a = dot_terms(x.data() + t * d.K, w.data() + n * d.K, d.K);
      const double ea = dot_error(a.abs, d.K, bm.gemm_u);
      const uint64_t i = t * d.N + n;
      double y = a.sum, e = ea;
      if (epi == GemmEpilogue::accumulate) {
        y = old[i] + a.sum;
        e = ea + u * (std::fabs(y) + ea);
      } else if (epi == GemmEpilogue::swiglu) {
        const double s = silu(a.sum);
        y = s * old[i];
        e = std::fabs(old[i]) * (kSiluLipschitz * ea * (1.0 + es) + es * std::fabs(s)) * (1.0 + u) +
            (u + gamma(6.0, kU64)) * std::fabs(y) +
            std::max(2.0, std::fabs(old[i]) + 1.0) * kUnderflowPerOp;
        if (a.sum - ea < kExpOverflowArg) e += std::fabs(y);
      }
      r.value[i] = finish(mode, y);
      r.bound[i] = std::isnan(y) ? 0.0 : stored(y, e);
    }
  }
  return r;
}

// LM head: logits[r, v] = Σ_h x[source(r), h]·table[v, h]: the store bound with K = hidden.
OpReference lm_head(const LmHeadOp& op, const LmHeadInputs& in, Mode mode, const BoundModel& bm) {
  const auto& d = op.shape();
  const std::string p = op.params();
  require_size(p, "input", in.input.size(), mul(d.rows, d.hidden));
  require_size(p, "table", in.table.size(), mul(d.vocab, d.hidden));
  const std::vector<double> x = to_f64(in.input), w = to_f64(in.table);
  OpReference r = blank(mul(d.logits_rows, d.vocab), d.vocab, false);
  r.formula = fmt::format(
      "gamma_h(u)*sum|x*w| + gamma_h(2^-53)*sum|x*w| + h*2^-149 + ulp_bf16(|y|+e); h={}, u={:.3g}",
      d.hidden, bm.gemm_u);
  for (uint64_t row = 0; row < d.logits_rows; ++row) {
    const uint64_t src = op.source_rows.source(row);
    if (src >= d.rows)
      throw Error(fmt::format("{}: logits row {} reads input row {} of {}", p, row, src, d.rows));
    for (uint64_t v = 0; v < d.vocab; ++v) {
      const Dot a = dot_terms(x.data() + src * d.hidden, w.data() + v * d.hidden, d.hidden);
      const uint64_t i = row * d.vocab + v;
      r.value[i] = finish(mode, a.sum);
      r.bound[i] = stored(a.sum, dot_error(a.abs, d.hidden, bm.gemm_u));
    }
  }
  return r;
}

ExpertChain ExpertChain::make(const ModelConfig& config, uint64_t rows, bool hash) {
  ExpertChain c{MoeGatherOp::make(config, rows),
                MoeExpertGemmOp::make(config, rows, ExpertProj::gate),
                MoeExpertGemmOp::make(config, rows, ExpertProj::up),
                MoeExpertGemmOp::make(config, rows, ExpertProj::down),
                SwigluOp::make(rows, mul(config.num_experts_per_tok, config.moe_intermediate_size),
                               config.swiglu_limit, "expert_gate", "expert_up", "expert_act"),
                MoeCombineOp::make(config, rows, hash),
                hash ? 0 : config.zero_expert_num,
                0};
  c.weight_pool_bytes = place_in_pool({&c.gate.weight, &c.up.weight, &c.down.weight});
  return c;
}

std::string ExpertChain::params() const {
  return fmt::format(
      "moe_experts(rows={},top_k={},experts={},zero_experts={},D={},I={},limit={}"
      ",out={})",
      gather.dims.rows, gather.dims.top_k, gather.dims.experts, zero_experts, gather.dims.width,
      gate.dims.N, act.limit, combine.output.to_string());
}

std::vector<double> expert_chain(const ExpertChain& c, const ExpertChainInputs& in, Mode mode) {
  const BoundModel bm;  // bounds are not used here
  GatherInputs gin{in.x, in.ids};
  std::vector<double> gathered = moe_gather(c.gather, gin, c.zero_experts).value;
  auto g = expert_gemm_f64(c.gate, gathered, in.ids, to_f64(in.w_gate), mode, bm, c.zero_experts);
  auto u = expert_gemm_f64(c.up, gathered, in.ids, to_f64(in.w_up), mode, bm, c.zero_experts);
  auto a = swiglu_f64(c.act, g.value, u.value, mode, bm);
  auto dn = expert_gemm_f64(c.down, a.value, in.ids, to_f64(in.w_down), mode, bm, c.zero_experts);
  const std::vector<double> x = c.combine.reads_input ? to_f64(in.x) : std::vector<double>{};
  return combine_f64(c.combine, in.ids, in.weights, dn.value, x, mode, bm).value;
}

uint64_t expert_chain_cost(const ExpertChain& c) {
  const auto& d = c.gate.shape();
  const uint64_t slots = mul(d.rows, d.top_k);
  return (Size(mul(mul(slots, 3), mul(d.K, d.N))) + mul(slots, d.K)).value();
}

}  // namespace bufferlab::oracle
