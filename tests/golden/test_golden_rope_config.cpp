// The config.json loader tied to the golden RoPE tables (docs/spec/attention.md §1 and §2):
// rope_table(rope_params(the loaded config)) equals transformers' table of that config,
// evaluated in float64, within the bound of test_golden_rope.cpp (1 FP32 ulp per inv_freq
// entry, relative 2^-48 on attention_factor). The golden parameters were read by
// transformers' own config classes, so any slip of our mapping (a key not read, the legacy
// `type` key, rope_parameters against rope_scaling, the partial factor, MLA's rotary part,
// yarn's truncate) changes the table.
//
// Every shipped config is accounted for: tied to its case rope_<file stem>, or listed below
// with why it has none (Nemotron-H: no RoPE; DeepSeek-V4: two parameter sets, docs/findings.md).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/rope.h"
#include "golden_case.h"
#include "golden_rope.h"

namespace bufferlab::golden {
namespace {

// "Meta-Llama-3.1-8B.json" → "rope_meta_llama_3_1_8b", as scripts/golden/make_golden.py names
// the case of a config with one parameter set.
std::string case_name(const std::filesystem::path& file) {
  std::string stem = file.stem().string();
  for (char& ch : stem) {
    if (ch == '.' || ch == '-') ch = '_';
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return "rope_" + stem;
}

bool has_case(const std::string& name) {
  for (const nlohmann::json& c : golden_manifest().at("cases"))
    if (c.at("name") == name) return true;
  return false;
}

bool attention_factor_matches(const GoldenCase& g, const RopeTable& t) {
  const double af = g.params.at("attention_factor_fp64").get<double>();
  return std::fabs(t.attention_factor - af) <= 0x1p-48 * std::fabs(af);
}

// The shipped configs without a single-set golden case, and why.
const std::map<std::string, std::string>& without_case() {
  static const std::map<std::string, std::string> files = {
      {"Nemotron-H-56B-Base-8K.json", "no RoPE in transformers' NemotronHConfig"},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json", "no RoPE in transformers' NemotronHConfig"},
      {"DeepSeek-V4-Flash.json",
       "two RoPE parameter sets (main, compress); docs/spec/attention.md §1 has one per model"},
  };
  return files;
}

TEST(GoldenRopeConfig, LoadedConfigsGiveTransformersTables) {
  std::set<std::string> tied, unexplained;
  for (const auto& entry : std::filesystem::directory_iterator(BUFFERLAB_CONFIGS_DIR)) {
    if (entry.path().extension() != ".json") continue;
    const std::string file = entry.path().filename().string();
    const std::string name = case_name(entry.path());
    if (!has_case(name)) {
      if (without_case().count(file) == 0) unexplained.insert(file);
      continue;
    }
    SCOPED_TRACE(file);
    const GoldenCase g = load_golden(name);
    const RopeTable t = rope_table(rope_params(load_config_file(entry.path().string())));
    expect_passed(judge_rope_table(g, t, "rope_table(rope_params(config))"));
    EXPECT_TRUE(attention_factor_matches(g, t))
        << "attention_factor " << t.attention_factor << " against "
        << g.params.at("attention_factor_fp64").get<double>();
    tied.insert(file);
  }
  EXPECT_TRUE(unexplained.empty()) << "a shipped config with neither a golden case nor a reason";
  EXPECT_EQ(tied.size(), 9u) << "the nine configs with one RoPE parameter set";
  fmt::print("golden: {} shipped configs' loaded RoPE tables tied to transformers'\n", tied.size());
}

// Planted mapping slips, each caught by the same judge: Llama-3.1's llama3 scaling dropped (the
// config read as default), gpt-oss's truncate = false not read, Qwen3-Next's partial factor not
// read, DeepSeek-V3.2's MLA rotary part taken as the whole head.
TEST(GoldenRopeConfig, PlantedMappingSlipsAreCaught) {
  const std::string dir = BUFFERLAB_CONFIGS_DIR;
  {
    ModelConfig c = load_config_file(dir + "/Meta-Llama-3.1-8B.json");
    c.rope_type = "default";
    expect_caught(judge_rope_table(load_golden("rope_meta_llama_3_1_8b"),
                                   rope_table(rope_params(c)), "llama3 read as default:"));
  }
  {
    ModelConfig c = load_config_file(dir + "/gpt-oss-20b.json");
    c.rope_truncate = true;
    expect_caught(judge_rope_table(load_golden("rope_gpt_oss_20b"), rope_table(rope_params(c)),
                                   "truncate not read:"));
  }
  {
    ModelConfig c = load_config_file(dir + "/Qwen3-Next-80B-A3B-Thinking.json");
    c.partial_rotary_factor = 1.0;
    expect_caught(judge_rope_table(load_golden("rope_qwen3_next_80b_a3b_thinking"),
                                   rope_table(rope_params(c)), "partial factor not read:"));
  }
  {
    ModelConfig c = load_config_file(dir + "/DeepSeek-V3.2.json");
    c.kv_lora_rank = 0;  // rope_params then rotates int(head_dim 192 · 1) dims, not 64
    expect_caught(judge_rope_table(load_golden("rope_deepseek_v3_2"), rope_table(rope_params(c)),
                                   "MLA's whole head rotated:"));
  }
}

}  // namespace
}  // namespace bufferlab::golden
