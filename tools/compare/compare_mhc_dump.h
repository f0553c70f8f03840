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

struct MhcDumpInfo {
  std::string model;    // preset name or config path
  std::string backend;  // "cpu", "cuda"
  std::string streams;  // normal | zero | huge
  double logit_range = 4.0;
  uint64_t tokens = 0;
  uint64_t seed = 0;
};

void write_mhc_pre_dump(const std::string& dir, const MhcPreOp& op, const oracle::MhcPreInputs& in,
                        const oracle::MhcPreOutputs& out, const oracle::AgreementReport& report,
                        const MhcDumpInfo& info);
// `out`: the streams after the op.
void write_mhc_post_dump(const std::string& dir, const MhcPostOp& op,
                         const oracle::MhcPostInputs& in, const std::vector<float>& out,
                         const oracle::AgreementReport& report, const MhcDumpInfo& info);
void write_mhc_head_dump(const std::string& dir, const MhcHeadOp& op,
                         const oracle::MhcHeadInputs& in, const oracle::MhcHeadOutputs& out,
                         const oracle::AgreementReport& report, const MhcDumpInfo& info);
void write_mhc_expand_dump(const std::string& dir, const MhcExpandOp& op,
                           const std::vector<uint16_t>& in, const std::vector<float>& out,
                           const oracle::AgreementReport& report, const MhcDumpInfo& info);
void write_mhc_lowrank_dump(const std::string& dir, const oracle::MhcLowRankPlan& plan,
                            const oracle::MhcLowRankInputs& in, const oracle::MhcLowRankRun& run,
                            const oracle::AgreementReport& report, const MhcDumpInfo& info);

}  // namespace bufferlab::cli
