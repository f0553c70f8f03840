// `bufferlab compare --dump DIR`: the inputs, the backend's outputs and the oracle's values of
// one run as .npy files, and a manifest.json that says what each file holds (tensor, dtype —
// BF16 "as uint16" —, shape), the op, its parameter string, eps, seed, backend, model and
// tokens, and the agreement report. Enough to re-judge the run in NumPy.
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/rmsnorm.h"

namespace bufferlab::cli {

struct CompareRunInfo {
  std::string model_label;  // preset name or config path
  bool from_preset = true;
  std::string variant;  // the --variant name
  uint64_t tokens = 0;
  uint64_t seed = 0;
  std::string backend;
};

// Creates `dir` if needed; throws bufferlab::Error when a file cannot be written.
void write_rmsnorm_dump(const std::string& dir, const FusedAddRmsNormOp& op,
                        const oracle::RmsNormInputs& in, const oracle::RmsNormOutputs& out,
                        const oracle::AgreementReport& report, const CompareRunInfo& info);

}  // namespace bufferlab::cli
