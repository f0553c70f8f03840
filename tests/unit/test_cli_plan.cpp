// End-to-end tests of the `bufferlab` program's presets / config / plan commands: they run
// the CLI in-process (bufferlab_cli, as the binary would) and check its output against
// docs/spec/buffers.md — the §6 reference numbers are written here by hand, not computed by the
// library under test.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "spec_fields.h"
#include "svg_checks.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using bufferlab::testing::read_file;
using bufferlab::testing::write_file;
using RunResult = bufferlab::testing::CliRun;

class CliTest : public bufferlab::testing::TempDirTest {
 protected:
  RunResult run(const std::vector<std::string>& args) {
    return bufferlab::testing::run_cli_in_process(args, dir_);
  }

  json run_json(const std::vector<std::string>& args) {
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out);
  }

  // Asserts the documented failure mode: exit 2 and a message starting with "error:".
  void expect_error(const std::vector<std::string>& args, const std::string& must_mention = "") {
    const RunResult r = run(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << joined << "\nstdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.rfind("error:", 0), 0u) << joined << "\nstderr: " << r.err;
    if (!must_mention.empty()) {
      EXPECT_NE(r.err.find(must_mention), std::string::npos) << joined << "\nstderr: " << r.err;
    }
  }

  fs::path file(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    write_file(p, text);
    return p;
  }
};

using bufferlab::testing::kSpecFields;

// docs/spec/buffers.md §1.2: the reference preset, one per shipped real config, one tiny per
// family.
const std::vector<std::string> kSpecPresets = {"qwen3-next-80b",
                                               "qwen3-8b",
                                               "qwen3-30b-a3b",
                                               "qwen3-next-80b-thinking",
                                               "deepseek-v3.2",
                                               "deepseek-v4-flash",
                                               "nemotron-h-56b",
                                               "qwen2.5-vl-7b",
                                               "llama-3.1-8b",
                                               "mixtral-8x7b",
                                               "gpt-oss-20b",
                                               "glm-5",
                                               "nemotron-3-nano-30b",
                                               "tiny-dense",
                                               "tiny-moe",
                                               "tiny-gdn",
                                               "tiny-mamba",
                                               "tiny-mla",
                                               "tiny-mhc",
                                               "tiny-mhc-lowrank",
                                               "tiny-qsa",
                                               "tiny-lora"};

// A small valid Hugging Face config the bad-input tests start from.
json small_hf_config() {
  return {{"model_type", "llama"},  {"hidden_size", 64},        {"intermediate_size", 128},
          {"vocab_size", 256},      {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"num_hidden_layers", 2}, {"rms_norm_eps", 1e-5}};
}

uint64_t bytes_of(const json& plan, const std::string& name) {
  for (const auto& b : plan.at("buffers"))
    if (b.at("name") == name) return b.at("bytes").get<uint64_t>();
  ADD_FAILURE() << "no buffer " << name;
  return 0;
}

const json& buffer_named(const json& plan, const std::string& name) {
  for (const auto& b : plan.at("buffers"))
    if (b.at("name") == name) return b;
  throw std::runtime_error("no buffer " + name);
}

// Minimal XML well-formedness: every start tag is closed in order, comments and the
// declaration skipped. Enough to catch a truncated or mis-nested SVG.
bool tags_balanced(const std::string& xml, std::string* why) {
  std::vector<std::string> stack;
  for (size_t i = xml.find('<'); i != std::string::npos; i = xml.find('<', i)) {
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return *why = "unterminated tag at " + std::to_string(i), false;
    const std::string tag = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty() || tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name)
        return *why = "closing </" + name + "> does not match", false;
      stack.pop_back();
      continue;
    }
    if (tag.back() == '/') continue;
    stack.push_back(tag.substr(0, tag.find_first_of(" \t\n")));
  }
  if (!stack.empty()) return *why = "<" + stack.back() + "> never closed", false;
  return true;
}

const std::vector<std::string> kReferenceShape = {
    "--max-batch-tokens", "1",  "--max-seq-len",    "4096",
    "--kv-block-size",    "16", "--max-batch-size", "32"};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(CliTest, ReferenceNumbersOfSpecSection6) {
  const json plan =
      run_json(cat({"plan", "--preset", "qwen3-next-80b", "--json"}, kReferenceShape));
  EXPECT_EQ(bytes_of(plan, "hidden_states"), 4096u);
  EXPECT_EQ(bytes_of(plan, "qkv_output"), 294912u);
  EXPECT_EQ(bytes_of(plan, "attn_output"), 8192u);
  EXPECT_EQ(bytes_of(plan, "gate_logits"), 1024u);
  EXPECT_EQ(bytes_of(plan, "logits"), 303872u);
  EXPECT_EQ(bytes_of(plan, "ssm_qkvz"), 393216u);
  EXPECT_EQ(bytes_of(plan, "ssm_ba"), 256u);
  EXPECT_EQ(bytes_of(plan, "ssm_deinterleaved"), 393216u);
  EXPECT_EQ(bytes_of(plan, "ssm_gates"), 256u);
  EXPECT_EQ(plan.at("sizing"), "spec");
  EXPECT_EQ(plan.at("run_shape").at("max_batch_tokens"), 1);
}

TEST_F(CliTest, PlanJsonListsAll41BuffersInSpecOrderAndAddsUp) {
  for (const std::string preset : {"qwen3-next-80b", "tiny-dense", "tiny-mla"}) {
    SCOPED_TRACE(preset);
    const json plan = run_json({"plan", "--preset", preset, "--json"});
    const json& buffers = plan.at("buffers");
    ASSERT_EQ(buffers.size(), kSpecFields.size());
    uint64_t sum = 0, previous_end = 0;
    for (size_t i = 0; i < buffers.size(); ++i) {
      const json& b = buffers[i];
      EXPECT_EQ(b.at("name"), kSpecFields[i]);
      const uint64_t bytes = b.at("bytes").get<uint64_t>();
      sum += bytes;
      if (bytes == 0) {
        EXPECT_TRUE(b.at("offset").is_null()) << b.dump();
        continue;
      }
      ASSERT_TRUE(b.at("offset").is_number_unsigned()) << b.dump();
      const uint64_t offset = b.at("offset").get<uint64_t>();
      EXPECT_EQ(offset % 256, 0u) << b.dump();
      EXPECT_GE(offset, previous_end) << b.dump();
      previous_end = offset + bytes;
    }
    EXPECT_EQ(plan.at("total_bytes").get<uint64_t>(), sum);
    EXPECT_GE(plan.at("arena_bytes").get<uint64_t>(), plan.at("total_bytes").get<uint64_t>());
    EXPECT_EQ(plan.at("arena_bytes").get<uint64_t>(), previous_end);
  }
}

TEST_F(CliTest, NullBuffersOfADenseModelHaveNoOffset) {
  // Dense model without GDN, Mamba, LoRA or Q2: these fields are "0 (null)" in docs/spec/buffers.md
  // §3.
  const json plan = run_json({"plan", "--preset", "llama-3.1-8b", "--json"});
  for (const std::string name : {"gdn_fla_scratch", "ssd_scratch", "lora_xa", "lora_delta",
                                 "lora_hact", "lora_seq_slot", "q2_dequant_scratch", "q2_act_q8"}) {
    EXPECT_EQ(buffer_named(plan, name).at("bytes"), 0) << name;
    EXPECT_TRUE(buffer_named(plan, name).at("offset").is_null()) << name;
  }
  EXPECT_GT(bytes_of(plan, "ffn_act_q8"), 0u);  // E = 0: the dense FFN paths exist
}

TEST_F(CliTest, EveryShippedConfigPlansWithDefaults) {
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(BUFFERLAB_CONFIGS_DIR)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    const RunResult r = run({"plan", "--config", entry.path().string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json plan = json::parse(r.out);
    EXPECT_EQ(plan.at("buffers").size(), 41u);
    EXPECT_EQ(plan.at("run_shape").at("max_batch_tokens"), 8192);
    EXPECT_EQ(plan.at("run_shape").at("max_seq_len"), 32768);
    EXPECT_EQ(plan.at("run_shape").at("kv_block_size"), 16);
    EXPECT_EQ(plan.at("run_shape").at("max_batch_size"), 32);
    EXPECT_EQ(plan.at("target").at("name"), "h200");
    EXPECT_EQ(plan.at("alignment"), 256);
    EXPECT_EQ(plan.at("redzone"), 0);
    // The table form works on the same input.
    EXPECT_EQ(run({"plan", "--config", entry.path().string()}).exit_code, 0);
  }
  EXPECT_EQ(files, 12u);
}

TEST_F(CliTest, NormalizedFormFedBackGivesTheSamePlan) {
  for (const auto& entry : fs::directory_iterator(BUFFERLAB_CONFIGS_DIR)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    const RunResult normalized = run({"config", "--config", entry.path().string(), "--json"});
    ASSERT_EQ(normalized.exit_code, 0) << normalized.err;
    ASSERT_EQ(json::parse(normalized.out).at("bufferlab_config"), 1);
    const fs::path fed_back = file("normalized.json", normalized.out);
    json a = run_json({"plan", "--config", entry.path().string(), "--json"});
    json b = run_json({"plan", "--config", fed_back.string(), "--json"});
    a.erase("model");  // the file names differ, nothing else may
    b.erase("model");
    EXPECT_EQ(a, b);
  }
}

TEST_F(CliTest, ConfigJsonRoundTripsForEveryPreset) {
  for (const auto& name : kSpecPresets) {
    SCOPED_TRACE(name);
    const RunResult first = run({"config", "--preset", name, "--json"});
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const fs::path saved = file(name + ".json", first.out);
    const RunResult second = run({"config", "--config", saved.string(), "--json"});
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_EQ(json::parse(first.out), json::parse(second.out));
    EXPECT_EQ(first.out, second.out);  // byte-identical, pretty-printed the same way
    // And the plan of the preset equals the plan of its normalized form.
    json a = run_json({"plan", "--preset", name, "--json"});
    json b = run_json({"plan", "--config", saved.string(), "--json"});
    a.erase("model");
    b.erase("model");
    EXPECT_EQ(a, b);
  }
}

TEST_F(CliTest, ConfigListingWithoutJsonShowsEveryField) {
  const RunResult r = run({"config", "--preset", "qwen3-next-80b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json normalized = run_json({"config", "--preset", "qwen3-next-80b", "--json"});
  for (const auto& [key, value] : normalized.at("config").items())
    EXPECT_NE(r.out.find(key + " "), std::string::npos) << key;
  EXPECT_NE(r.out.find("hidden_size"), std::string::npos);
  EXPECT_NE(r.out.find("2048"), std::string::npos);
}

// `config --explain`: every key of the file appears once as read or ignored, every field of
// the normalized form is accounted for (read, derived or default), in text and in --json.
TEST_F(CliTest, ConfigExplainAccountsForEveryKeyAndField) {
  for (const auto& entry : fs::directory_iterator(BUFFERLAB_CONFIGS_DIR)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    const json explained =
        run_json({"config", "--config", entry.path().string(), "--explain", "--json"});
    const json normalized = run_json({"config", "--config", entry.path().string(), "--json"});
    EXPECT_EQ(explained.at("config"), normalized.at("config"));
    std::map<std::string, int> key_rows;
    std::set<std::string> fields;
    for (const json& row : explained.at("explain")) {
      const std::string kind = row.at("kind");
      if (kind == "read" || kind == "ignored") {
        std::string key = row.at("key");
        key = key.substr(0, key.find('.'));  // rope_parameters.mrope_section → rope_parameters
        if (key == "text_config") key = row.at("key").get<std::string>().substr(12);
        ++key_rows[key];
      }
      if (kind != "ignored") fields.insert(row.at("field").get<std::string>());
    }
    json file = json::parse(read_file(entry.path()), nullptr, false);
    if (file.is_discarded()) continue;  // a bare Infinity (Nemotron-H): strict parsers refuse it
    if (file.contains("text_config")) {
      for (const auto& [key, value] : file.at("text_config").items()) file[key] = value;
      file.erase("text_config");
    }
    for (const auto& [key, value] : file.items())
      EXPECT_GE(key_rows[key], 1) << key << " is neither read nor ignored";
    for (const auto& [field, value] : normalized.at("config").items())
      EXPECT_EQ(fields.count(field), 1u) << field << " is not accounted for";
  }
}

TEST_F(CliTest, ConfigExplainTableOfGlm5) {
  const std::string glm5 = (fs::path(BUFFERLAB_CONFIGS_DIR) / "GLM-5.json").string();
  const RunResult r = run({"config", "--config", glm5, "--explain"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string line :
       {"read     head_dim ", "read     n_routed_experts ", "ignored  qk_head_dim ", "derived  -",
        "= n_shared_experts × moe_intermediate_size = 2048", "default  -", "read     n_group ",
        "keys read,", "keys ignored"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  expect_error({"config", "--preset", "qwen3-8b", "--explain"}, "--explain needs --config");
}

TEST_F(CliTest, PresetsListsAllTwentyTwoPresets) {
  const json list = run_json({"presets", "--json"});
  ASSERT_EQ(list.size(), 22u);
  for (const auto& name : kSpecPresets) {
    bool found = false;
    for (const auto& p : list) found = found || p.at("name") == name;
    EXPECT_TRUE(found) << name;
  }
  size_t tiny = 0;
  for (const auto& p : list) tiny += p.at("tiny").get<bool>() ? 1 : 0;
  EXPECT_EQ(tiny, 9u);
  const RunResult table = run({"presets"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const auto& name : kSpecPresets) EXPECT_NE(table.out.find(name), std::string::npos) << name;
}

TEST_F(CliTest, BadModelInputExitsTwoWithAnErrorMessage) {
  const fs::path malformed = file("malformed.json", "{\"hidden_size\": 64,, }");
  expect_error({"plan", "--config", malformed.string()});
  expect_error({"config", "--config", malformed.string(), "--json"});

  json missing = small_hf_config();
  missing.erase("hidden_size");
  expect_error({"plan", "--config", file("missing.json", missing.dump()).string()}, "hidden_size");

  json negative = small_hf_config();
  negative["hidden_size"] = -64;
  expect_error({"plan", "--config", file("negative.json", negative.dump()).string()},
               "hidden_size");

  json as_string = small_hf_config();
  as_string["hidden_size"] = "64";
  expect_error({"plan", "--config", file("string.json", as_string.dump()).string()}, "hidden_size");

  json top_k = small_hf_config();
  top_k["num_local_experts"] = 4;
  top_k["num_experts_per_tok"] = 8;
  expect_error({"plan", "--config", file("topk.json", top_k.dump()).string()});

  expect_error({"plan", "--config", (dir_ / "does-not-exist.json").string()});
}

TEST_F(CliTest, SizesOverflowing64BitsAreErrorsNamingTheField) {
  // hidden_size = vocab_size = 2^40 still fits at the default m = 8192 (hidden_states is
  // 2^13 · 2^40 · 2 = 2^54 bytes): no false alarm about 64 bits (the arena does not fit an
  // H200, a capacity finding: exit 1 with the plan printed) ...
  json huge = small_hf_config();
  huge["hidden_size"] = uint64_t{1} << 40;
  huge["vocab_size"] = uint64_t{1} << 40;
  const fs::path huge_path = file("huge.json", huge.dump());
  const RunResult huge_run = run({"plan", "--config", huge_path.string(), "--json"});
  EXPECT_EQ(huge_run.exit_code, 1) << huge_run.err;
  EXPECT_NE(huge_run.err.find("capacity: the arena does not fit the target"), std::string::npos)
      << huge_run.err;
  const json plan = json::parse(huge_run.out);
  EXPECT_EQ(bytes_of(plan, "hidden_states"), uint64_t{1} << 54);
  // ... but m = 2^24 makes it 2^65, and Q2 dequant needs max(..., nq·hd)·h·2 = 2^81.
  expect_error({"plan", "--config", huge_path.string(), "--max-batch-tokens", "16777216"},
               "hidden_states");
  expect_error({"plan", "--config", huge_path.string(), "--q2-dequant"}, "q2_dequant_scratch");
  json wider = small_hf_config();
  wider["hidden_size"] = uint64_t{1} << 52;  // 2^13 · 2^52 · 2 = 2^66 at the defaults
  wider["vocab_size"] = uint64_t{1} << 40;
  expect_error({"plan", "--config", file("wider.json", wider.dump()).string()}, "hidden_states");
}

TEST_F(CliTest, UnknownPresetExitsTwo) {
  expect_error({"plan", "--preset", "no-such-model"}, "no-such-model");
  expect_error({"config", "--preset", "no-such-model", "--json"}, "no-such-model");
}

TEST_F(CliTest, ExactlyOneModelSourceIsRequired) {
  expect_error({"plan"});
  expect_error({"config", "--json"});
  expect_error({"plan", "--preset", "tiny-dense", "--config",
                (fs::path(BUFFERLAB_CONFIGS_DIR) / "Qwen3-8B.json").string()});
}

TEST_F(CliTest, BadOptionsExitTwoWithAnErrorMessage) {
  const std::vector<std::string> base = {"plan", "--preset", "tiny-dense"};
  expect_error(cat(base, {"--max-batch-tokens", "0"}), "max_batch_tokens");
  expect_error(cat(base, {"--max-batch-tokens", "-5"}));
  expect_error(cat(base, {"--max-batch-tokens=-5"}), "--max-batch-tokens");
  expect_error(cat(base, {"--max-batch-tokens", "12abc"}), "--max-batch-tokens");
  expect_error(cat(base, {"--max-seq-len", "99999999999999999999999"}), "--max-seq-len");
  expect_error(cat(base, {"--max-batch-size", "0"}), "max_batch_size");
  expect_error(cat(base, {"--max-seq-len", "0"}), "max_seq_len");
  expect_error(cat(base, {"--alignment", "3"}), "alignment");
  expect_error(cat(base, {"--alignment", "0"}), "alignment");
  expect_error(cat(base, {"--mutant", "B8", "--sizing", "spec"}), "B8");
  expect_error(cat(base, {"--mutant", "B99"}), "B99");
  expect_error(cat(base, {"--sizing", "optimistic"}), "optimistic");
  expect_error(cat(base, {"--target", "a100"}), "a100");
  expect_error(cat(base, {"--splitk", "0"}));
  expect_error(cat(base, {"--sweep", "max-batch-tokens=64:8"}));
  expect_error(cat(base, {"--sweep", "max-batch-tokens=0:8"}));
  expect_error(cat(base, {"--sweep", "max-seq-len=1:8"}));
  expect_error(cat(base, {"--sweep", "max-batch-tokens=1:8", "--max-batch-tokens", "4"}));
  expect_error(cat(base, {"--sweep", "max-batch-tokens=1:-8"}));
  expect_error(cat(base, {"--no-such-option"}));
}

TEST_F(CliTest, MutantAndSizingSelection) {
  const json spec = run_json({"plan", "--preset", "tiny-moe", "--json"});
  EXPECT_EQ(spec.at("sizing"), "spec");
  const json corrected =
      run_json({"plan", "--preset", "tiny-moe", "--sizing", "corrected", "--json"});
  EXPECT_EQ(corrected.at("sizing"), "corrected");
  const json mutant = run_json({"plan", "--preset", "tiny-moe", "--mutant", "B8", "--json"});
  EXPECT_EQ(mutant.at("sizing"), "corrected+B8");
  const json explicit_corrected = run_json(
      {"plan", "--preset", "tiny-moe", "--mutant", "B8", "--sizing", "corrected", "--json"});
  EXPECT_EQ(explicit_corrected.at("sizing"), "corrected+B8");
}

TEST_F(CliTest, TargetAndLayoutOptionsReachThePlan) {
  const json plan =
      run_json({"plan", "--preset", "tiny-dense", "--target", "gb10", "--splitk", "4",
                "--q2-dequant", "--q2-mmq", "--alignment", "1024", "--redzone", "64", "--json"});
  EXPECT_EQ(plan.at("target").at("name"), "gb10");
  EXPECT_EQ(plan.at("target").at("splitk"), "4");
  EXPECT_EQ(plan.at("target").at("q2_dequant"), true);
  EXPECT_GT(bytes_of(plan, "q2_dequant_scratch"), 0u);
  EXPECT_GT(bytes_of(plan, "q2_act_q8"), 0u);
  EXPECT_EQ(plan.at("alignment"), 1024);
  EXPECT_EQ(plan.at("redzone"), 64);
  for (const auto& b : plan.at("buffers")) {
    if (!b.at("offset").is_null()) {
      EXPECT_EQ(b.at("offset").get<uint64_t>() % 1024, 0u);
    }
  }
}

TEST_F(CliTest, TableHasOneRowPerRegistryBufferAndTheTotals) {
  const RunResult r = run({"plan", "--preset", "qwen3-next-80b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json plan = run_json({"plan", "--preset", "qwen3-next-80b", "--json"});
  for (const auto& name : kSpecFields)
    EXPECT_NE(r.out.find(" " + name + " "), std::string::npos) << name;
  EXPECT_NE(r.out.find(std::to_string(plan.at("total_bytes").get<uint64_t>())), std::string::npos);
  EXPECT_NE(r.out.find(std::to_string(plan.at("arena_bytes").get<uint64_t>())), std::string::npos);
  EXPECT_NE(r.out.find("null"), std::string::npos);
}

TEST_F(CliTest, SvgOfTheArenaIsWellFormedAndNamesEveryPlacedBuffer) {
  for (const std::string preset : {"qwen3-next-80b", "tiny-gdn", "deepseek-v3.2"}) {
    SCOPED_TRACE(preset);
    const fs::path svg = dir_ / (preset + ".svg");
    const RunResult r = run({"plan", "--preset", preset, "--svg", svg.string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json plan = json::parse(r.out);  // --json still prints the plan
    const std::string text = read_file(svg);
    ASSERT_EQ(text.rfind("<svg", 0), 0u);
    std::string why;
    EXPECT_TRUE(tags_balanced(text, &why)) << why;
    for (const auto& b : plan.at("buffers")) {
      const std::string name = b.at("name");
      EXPECT_NE(text.find(name), std::string::npos) << name;
    }
  }
  expect_error({"plan", "--preset", "tiny-dense", "--svg", (dir_ / "no/such/dir.svg").string()});
}

TEST_F(CliTest, SweepHasOneRowPerPointAndNeverShrinks) {
  const std::vector<std::string> args = {"plan", "--preset", "qwen3-next-80b", "--sweep",
                                         "max-batch-tokens=1:65536"};
  const RunResult table = run(args);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  std::vector<uint64_t> rows;
  std::istringstream lines(table.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    uint64_t m = 0;
    if (fields >> m) rows.push_back(m);
  }
  std::vector<uint64_t> expected;
  for (uint64_t m = 1; m <= 65536; m *= 2) expected.push_back(m);
  EXPECT_EQ(rows, expected);

  const json sweep = run_json(cat(args, {"--json"}));
  ASSERT_EQ(sweep.size(), expected.size());
  for (size_t i = 0; i < sweep.size(); ++i) {
    EXPECT_EQ(sweep[i].at("run_shape").at("max_batch_tokens"), expected[i]);
    if (i == 0) continue;
    EXPECT_GE(sweep[i].at("total_bytes"), sweep[i - 1].at("total_bytes")) << i;
    EXPECT_GE(sweep[i].at("arena_bytes"), sweep[i - 1].at("arena_bytes")) << i;
    for (size_t b = 0; b < kSpecFields.size(); ++b)
      EXPECT_GE(sweep[i].at("buffers")[b].at("bytes"), sweep[i - 1].at("buffers")[b].at("bytes"))
          << kSpecFields[b] << " at m " << expected[i];
  }
}

TEST_F(CliTest, SweepPointsIncludeBothEnds) {
  const json sweep =
      run_json({"plan", "--preset", "tiny-moe", "--sweep", "max-batch-tokens=3:100", "--json"});
  std::vector<uint64_t> ms;
  for (const auto& p : sweep) ms.push_back(p.at("run_shape").at("max_batch_tokens"));
  EXPECT_EQ(ms, (std::vector<uint64_t>{3, 4, 8, 16, 32, 64, 100}));
  const json one =
      run_json({"plan", "--preset", "tiny-moe", "--sweep", "max-batch-tokens=5:5", "--json"});
  EXPECT_EQ(one.size(), 1u);
}

TEST_F(CliTest, SweepSvgIsWellFormed) {
  const fs::path svg = dir_ / "sweep.svg";
  const RunResult r = run({"plan", "--preset", "tiny-mla", "--sweep", "max-batch-tokens=1:4096",
                           "--svg", svg.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = read_file(svg);
  ASSERT_EQ(text.rfind("<svg", 0), 0u);
  std::string why;
  EXPECT_TRUE(tags_balanced(text, &why)) << why;
  EXPECT_NE(text.find("total_bytes"), std::string::npos);
  EXPECT_NE(text.find("arena_bytes"), std::string::npos);
  // The first and last points' markers lie inside the plot, not on its frame.
  EXPECT_EQ(bufferlab::testing::expect_markers_inside_frame(text), 13u);  // 1, 2, 4 ... 4096
}

}  // namespace
