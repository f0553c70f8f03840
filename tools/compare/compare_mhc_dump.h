// `bufferlab compare --dump DIR` for the mHC ops: every input and output tensor of the op as
// .npy (weights included: they are small), the faithful oracle's values, and manifest.json
// (compare_dump.h's format: BF16 tensors are raw uint16 bits).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"

namespace bufferlab::cli {

struct HcDumpInfo {
  std::string model;    // preset name or config path
  std::string backend;  // "cpu", "cuda"
  std::string streams;  // normal | zero | huge
  double logit_range = 4.0;
  uint64_t tokens = 0;
  uint64_t seed = 0;
};

void write_hc_pre_dump(const std::string& dir, const HcPreOp& op, const oracle::HcPreInputs& in,
                       const oracle::HcPreOutputs& out, const oracle::AgreementReport& report,
                       const HcDumpInfo& info);
// `out`: the streams after the op.
void write_hc_post_dump(const std::string& dir, const HcPostOp& op, const oracle::HcPostInputs& in,
                        const std::vector<float>& out, const oracle::AgreementReport& report,
                        const HcDumpInfo& info);
void write_hc_head_dump(const std::string& dir, const HcHeadOp& op, const oracle::HcHeadInputs& in,
                        const oracle::HcHeadOutputs& out, const oracle::AgreementReport& report,
                        const HcDumpInfo& info);
void write_hc_expand_dump(const std::string& dir, const HcExpandOp& op,
                          const std::vector<uint16_t>& in, const std::vector<float>& out,
                          const oracle::AgreementReport& report, const HcDumpInfo& info);
void write_hc_lowrank_dump(const std::string& dir, const oracle::HcLowRankPlan& plan,
                           const oracle::HcLowRankInputs& in, const oracle::HcLowRankRun& run,
                           const oracle::AgreementReport& report, const HcDumpInfo& info);

}  // namespace bufferlab::cli
