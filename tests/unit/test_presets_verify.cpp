// The claims of docs/findings.md about real models, re-checked on every run: every preset
// (the shipped configs and the tiny ones) verifies clean under `corrected`, and under `spec`
// exactly the documented buffers are short.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "bufferlab/core/presets.h"
#include "bufferlab/core/verify/driver.h"

namespace bufferlab {
namespace {

std::set<std::string> short_buffers(const std::string& name, const RunShape& shape,
                                    const Target& target, Sizing sizing) {
  const ModelConfig c = preset(name);
  const BufferSizes sizes = BufferSizes::from_config(c, shape, target, sizing);
  const auto report = verify::verify_config(c, sizes, target, shape, verify::pass_grid(shape));
  std::set<std::string> out;
  for (const auto& f : report.findings) out.insert(verify::to_string(f.check) + (":" + f.buffer));
  return out;
}

Target q2_target() {
  Target t;
  t.q2_dequant = t.q2_mmq = true;
  return t;
}

TEST(PresetsVerify, EveryPresetIsCleanUnderCorrected) {
  for (const auto& p : list_presets())
    EXPECT_EQ(short_buffers(p.name, RunShape{}, q2_target(), Sizing::corrected()),
              std::set<std::string>{})
        << p.name;
}

// docs/findings.md, "Summary of verify --sizing spec on the presets", the m = 1193 row
// (m % 16 != 0, so the FP8 path's padded rows matter), Q2 paths on.
TEST(PresetsVerify, SpecSizingIsShortExactlyWhereDocumented) {
  const std::map<std::string, std::set<std::string>> documented = {
      {"tiny-gdn", {"bounds:attn_output"}},        // F1
      {"deepseek-v4-flash", {"bounds:o_latent"}},  // F2
      {"tiny-mhc", {"bounds:o_latent"}},           // F2
      {"tiny-mhc-lowrank", {"bounds:o_latent"}},   // F2
      {"nemotron-h-56b", {"bounds:ssm_qkvz"}},     // F5
      {"tiny-mamba", {"bounds:ssm_qkvz"}},         // F5
  };
  RunShape shape;
  shape.max_batch_tokens = 1193;
  for (const auto& p : list_presets()) {
    const auto it = documented.find(p.name);
    const std::set<std::string> expected =
        it == documented.end() ? std::set<std::string>{} : it->second;
    EXPECT_EQ(short_buffers(p.name, shape, q2_target(), Sizing::spec()), expected) << p.name;
  }
}

}  // namespace
}  // namespace bufferlab
