// `bufferlab compare --dump DIR` for the MoE ops: inputs, the backend's stored outputs and the
// oracle's values of one run as .npy plus manifest.json (compare_dump.h's format).
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/routing_harness.h"

namespace bufferlab::cli {

// topk == nullptr: the router alone.
void write_routing_dump(const std::string& dir, const oracle::RoutingOps& ops,
                        const oracle::RouterInputs& router_in,
                        const oracle::TopKHostInputs& topk_in, const oracle::StoredLogits& logits,
                        const oracle::TopKOutputs* topk, const oracle::AgreementReport& report,
                        const std::string& model, uint64_t seed, const std::string& backend);

void write_experts_dump(const std::string& dir, const oracle::ExpertChain& chain,
                        const oracle::ExpertChainInputs& in, const oracle::ExpertChainRun& run,
                        const oracle::AgreementReport& report, const std::string& model,
                        uint64_t seed, const std::string& backend);

void write_lm_head_dump(const std::string& dir, const LmHeadOp& op, const oracle::LmHeadInputs& in,
                        const oracle::LmHeadRun& run, const oracle::AgreementReport& report,
                        const std::string& model, uint64_t seed, const std::string& backend);

}  // namespace bufferlab::cli
