// `bufferlab compare --dump DIR` for the SSM ops gdn and ssd: every input (weights included:
// they are small next to the activations), every stage's stored output as the backend left
// it (the chunk scratch regions too), the faithful and exact oracle's whole-call values, and
// manifest.json (compare_dump.h's format: BF16 tensors are raw uint16 bits).
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_harness.h"

namespace bufferlab::cli {

struct GdnMamba2DumpInfo {
  std::string model;    // preset name or config path
  std::string backend;  // "cpu", "cuda"
  std::string profile;  // the input profile, as the header says it
  uint64_t tokens = 0;  // per sequence
  uint64_t streams = 1;
  uint64_t seed = 0;
  std::string workspace;  // "real" or "footprint"
};

void write_gdn_dump(const std::string& dir, const oracle::GdnPlan& plan,
                    const oracle::GdnInputs& in, const oracle::GdnRun& run,
                    const oracle::AgreementReport& report, const GdnMamba2DumpInfo& info);
void write_mamba2_dump(const std::string& dir, const oracle::Mamba2Plan& plan,
                       const oracle::Mamba2Inputs& in, const oracle::Mamba2Run& run,
                       const oracle::AgreementReport& report, const GdnMamba2DumpInfo& info);

}  // namespace bufferlab::cli
