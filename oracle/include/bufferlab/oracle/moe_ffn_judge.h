// Judges the non-routing MoE / FFN ops per stage (docs/spec/numerics.md §9): each output against
// the faithful oracle fed the backend's OWN stored inputs, under the per-element bounds of
// moe_ffn.cpp, only where the op writes (zero-expert slots and gathered rows past the routed
// count are not outputs; a routed slot left unwritten fails as poison). The first bad element
// names its coordinates (token, slot, expert, dim). The exact-vs-faithful difference of the
// oracle is reported, not asserted.
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/moe_ffn.h"

namespace bufferlab::oracle {

// zero_experts: the op's E' − E (ids in [E, E') are zero experts; larger ids are corrupt).
AgreementReport judge_moe_gather(const MoeGatherOp& op, const GatherRun& run, uint64_t zero_experts,
                                 const std::string& backend, uint64_t seed);
AgreementReport judge_moe_expert_gemm(const MoeExpertGemmOp& op, const ExpertGemmRun& run,
                                      uint64_t zero_experts, const std::string& backend,
                                      uint64_t seed, const BoundModel& bm = {});
AgreementReport judge_swiglu(const SwigluOp& op, const SwigluRun& run, const std::string& backend,
                             uint64_t seed, const BoundModel& bm = {});
AgreementReport judge_moe_combine(const MoeCombineOp& op, const CombineRun& run,
                                  const std::string& backend, uint64_t seed,
                                  const BoundModel& bm = {});
AgreementReport judge_gemm(const GemmOp& op, const GemmRun& run, const std::string& backend,
                           uint64_t seed, const BoundModel& bm = {});
AgreementReport judge_lm_head(const LmHeadOp& op, const LmHeadRun& run, const std::string& backend,
                              uint64_t seed, const BoundModel& bm = {});

// Every stage of the chain on its own stored inputs (asserted), then reported: the backend's
// final output against the faithful chain of the ORIGINAL inputs, and exact vs faithful.
AgreementReport judge_expert_chain(const ExpertChain& chain, const ExpertChainInputs& in,
                                   const ExpertChainRun& run, const std::string& backend,
                                   uint64_t seed, const BoundModel& bm = {});

}  // namespace bufferlab::oracle
