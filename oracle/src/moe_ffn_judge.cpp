// Per-stage judgement of the non-routing MoE / FFN ops against the faithful oracle.
#include "bufferlab/oracle/moe_ffn_judge.h"

#include <fmt/format.h>

#include <functional>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounded_compare.h"

namespace bufferlab::oracle {
namespace {

using Coordinates = std::function<std::string(uint64_t row, uint64_t col)>;

// The backend's stored output against `ref`, the first bad element named by `where`.
TensorComparison check(const std::string& name, const std::vector<uint16_t>& got,
                       const OpReference& ref, const Coordinates& where) {
  TensorComparison c = compare_bf16_bounded(name, got, ref.value, ref.cols,
                                            ElementBounds{ref.bound, ref.mask, ref.formula});
  if (c.first_bad) c.first_bad->reason += " at " + where(c.first_bad->row, c.first_bad->col);
  return c;
}

// Exact vs faithful oracle values, reported (masked-out elements hold 0 in both).
TensorComparison exact_vs_faithful(const std::string& name, const OpReference& faithful,
                                   const OpReference& exact) {
  return compare_f64(name + " (exact-faithful)", faithful.value, exact.value, faithful.cols,
                     Tolerance{}, /*asserted=*/false);
}

Coordinates token_dim(const char* row_name = "token", const char* col_name = "dim") {
  return
      [=](uint64_t r, uint64_t c) { return fmt::format("{} {}, {} {}", row_name, r, col_name, c); };
}

// gate/up: row t, col j·N + n; down: row t·top_k + j, col n.
Coordinates expert_coordinates(const MoeExpertGemmOp& op, const std::vector<uint32_t>& ids) {
  const uint64_t k = op.shape().top_k, N = op.shape().N;
  const bool down = op.proj == ExpertProj::down;
  return [=](uint64_t r, uint64_t c) {
    const uint64_t s = down ? r : r * k + c / N;
    return fmt::format("token {}, slot {}, expert {}, dim {}", s / k, s % k, ids[s],
                       down ? c : c % N);
  };
}

Coordinates gather_coordinates(const MoeGatherOp& op, const std::vector<uint32_t>& ids,
                               uint64_t zero_experts) {
  const uint64_t k = op.shape().top_k;
  const std::vector<int64_t> order = gather_order(ids, op.shape().experts, zero_experts);
  return [=](uint64_t r, uint64_t c) {
    for (uint64_t s = 0; s < order.size(); ++s)
      if (order[s] == static_cast<int64_t>(r))
        return fmt::format("gathered row {} = token {}, slot {}, expert {}, dim {}", r, s / k,
                           s % k, ids[s], c);
    return fmt::format("gathered row {}, dim {}", r, c);
  };
}

Coordinates combine_coordinates(const MoeCombineOp& op, const std::vector<uint32_t>& ids) {
  const uint64_t k = op.shape().top_k;
  return [=](uint64_t r, uint64_t c) {
    std::string e;
    for (uint64_t j = 0; j < k; ++j) e += fmt::format("{}{}", j ? "," : "", ids[r * k + j]);
    return fmt::format("token {}, dim {} (experts {})", r, c, e);
  };
}

Coordinates lm_head_coordinates(const LmHeadOp& op) {
  const LmHeadRows rows = op.source_rows;
  return [=](uint64_t r, uint64_t c) {
    return fmt::format("logits row {} (input row {}), vocab {}", r, rows.source(r), c);
  };
}

AgreementReport empty_report(const std::string& op, const std::string& params,
                             const std::string& be, uint64_t seed) {
  return AgreementReport{op, params, be, seed, {}, {}};
}

void add_gather(AgreementReport& r, const MoeGatherOp& op, const GatherRun& run, uint64_t zero) {
  const OpReference ref = moe_gather(op, run.stored, zero);
  r.checks.push_back(
      check("moe_gathered", run.out, ref, gather_coordinates(op, run.stored.ids, zero)));
}

void add_expert(AgreementReport& r, const MoeExpertGemmOp& op, const ExpertGemmRun& run,
                uint64_t zero, const BoundModel& bm) {
  const OpReference f = moe_expert_gemm(op, run.stored, Mode::faithful, bm, zero);
  r.checks.push_back(check(op.output_value, run.out, f, expert_coordinates(op, run.stored.ids)));
  r.reported.push_back(exact_vs_faithful(op.output_value, f,
                                         moe_expert_gemm(op, run.stored, Mode::exact, bm, zero)));
}

void add_swiglu(AgreementReport& r, const SwigluOp& op, const SwigluRun& run,
                const BoundModel& bm) {
  const OpReference f = swiglu(op, run.stored, Mode::faithful, bm);
  r.checks.push_back(check(op.output_value.empty() ? "swiglu" : op.output_value, run.out, f,
                           token_dim("row", "col")));
  r.reported.push_back(exact_vs_faithful("swiglu", f, swiglu(op, run.stored, Mode::exact, bm)));
}

void add_combine(AgreementReport& r, const MoeCombineOp& op, const CombineRun& run,
                 const BoundModel& bm) {
  const OpReference f = moe_combine(op, run.stored, Mode::faithful, bm);
  r.checks.push_back(check("moe_combine_out", run.out, f, combine_coordinates(op, run.stored.ids)));
  r.reported.push_back(
      exact_vs_faithful("moe_combine_out", f, moe_combine(op, run.stored, Mode::exact, bm)));
}

}  // namespace

AgreementReport judge_moe_gather(const MoeGatherOp& op, const GatherRun& run, uint64_t zero_experts,
                                 const std::string& backend, uint64_t seed) {
  AgreementReport r = empty_report(op.name(), op.params(), backend, seed);
  add_gather(r, op, run, zero_experts);
  return r;
}

AgreementReport judge_moe_expert_gemm(const MoeExpertGemmOp& op, const ExpertGemmRun& run,
                                      uint64_t zero_experts, const std::string& backend,
                                      uint64_t seed, const BoundModel& bm) {
  AgreementReport r = empty_report(op.name(), op.params(), backend, seed);
  add_expert(r, op, run, zero_experts, bm);
  return r;
}

AgreementReport judge_swiglu(const SwigluOp& op, const SwigluRun& run, const std::string& backend,
                             uint64_t seed, const BoundModel& bm) {
  AgreementReport r = empty_report(op.name(), op.params(), backend, seed);
  add_swiglu(r, op, run, bm);
  return r;
}

AgreementReport judge_moe_combine(const MoeCombineOp& op, const CombineRun& run,
                                  const std::string& backend, uint64_t seed, const BoundModel& bm) {
  AgreementReport r = empty_report(op.name(), op.params(), backend, seed);
  add_combine(r, op, run, bm);
  return r;
}

AgreementReport judge_gemm(const GemmOp& op, const GemmRun& run, const std::string& backend,
                           uint64_t seed, const BoundModel& bm) {
  AgreementReport r = empty_report(op.name(), op.params(), backend, seed);
  const OpReference f = gemm(op, run.stored, Mode::faithful, bm);
  const std::string name = op.output_value.empty() ? op.label : op.output_value;
  r.checks.push_back(check(name, run.out, f, token_dim()));
  r.reported.push_back(exact_vs_faithful(name, f, gemm(op, run.stored, Mode::exact, bm)));
  return r;
}

AgreementReport judge_lm_head(const LmHeadOp& op, const LmHeadRun& run, const std::string& backend,
                              uint64_t seed, const BoundModel& bm) {
  AgreementReport r = empty_report(op.name(), op.params(), backend, seed);
  const OpReference f = lm_head(op, run.stored, Mode::faithful, bm);
  r.checks.push_back(check("logits", run.out, f, lm_head_coordinates(op)));
  r.reported.push_back(exact_vs_faithful("logits", f, lm_head(op, run.stored, Mode::exact, bm)));
  return r;
}

AgreementReport judge_expert_chain(const ExpertChain& c, const ExpertChainInputs& in,
                                   const ExpertChainRun& run, const std::string& backend,
                                   uint64_t seed, const BoundModel& bm) {
  AgreementReport r = empty_report("moe_experts", c.params(), backend, seed);
  add_gather(r, c.gather, run.gather, c.zero_experts);
  add_expert(r, c.gate, run.gate, c.zero_experts, bm);
  add_expert(r, c.up, run.up, c.zero_experts, bm);
  add_swiglu(r, c.act, run.act, bm);
  add_expert(r, c.down, run.down, c.zero_experts, bm);
  add_combine(r, c.combine, run.combine, bm);

  const std::vector<double> faithful = expert_chain(c, in, Mode::faithful);
  const std::vector<double> exact = expert_chain(c, in, Mode::exact);
  const uint64_t D = c.combine.shape().width;
  std::vector<double> got(run.combine.out.size());
  for (size_t i = 0; i < got.size(); ++i) got[i] = bf16_bits_to_f32(run.combine.out[i]);
  r.reported.push_back(compare_f64("chain out (backend-faithful chain)", got, faithful, D,
                                   Tolerance{}, /*asserted=*/false));
  r.reported.push_back(
      compare_f64("chain out (exact-faithful)", faithful, exact, D, Tolerance{}, false));
  return r;
}

}  // namespace bufferlab::oracle
