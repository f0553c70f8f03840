// Replays the saved sizing cases of tests/corpus/ through every sizing check (corrected
// sizing). A case that fails names its file, the check and the buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/properties/sizing_checks.h"

namespace bufferlab {
namespace {

struct CorpusCase {
  std::string name;
  ModelConfig config;
  RunShape shape;
  Target target;
};

CorpusCase load_case(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str());
  CorpusCase c;
  c.name = path.filename().string();
  c.config = j.contains("preset") ? preset(j.at("preset").get<std::string>())
                                  : config_from_json_text(j.at("model").dump(), c.name);
  const auto shape = j.value("run_shape", nlohmann::json::object());
  c.shape.max_batch_tokens = shape.value("max_batch_tokens", c.shape.max_batch_tokens);
  c.shape.max_seq_len = shape.value("max_seq_len", c.shape.max_seq_len);
  c.shape.kv_block_size = shape.value("kv_block_size", c.shape.kv_block_size);
  c.shape.max_batch_size = shape.value("max_batch_size", c.shape.max_batch_size);
  c.target = Target::named(j.value("target", "h200"));
  if (j.contains("splitk")) c.target.set_splitk(j.at("splitk").get<std::string>());
  c.target.q2_dequant = j.value("q2_dequant", false);
  c.target.q2_mmq = j.value("q2_mmq", false);
  return c;
}

std::vector<std::filesystem::path> corpus_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(BUFFERLAB_CORPUS_DIR))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Corpus, HasCases) { EXPECT_GE(corpus_files().size(), 4u); }

TEST(Corpus, EverySavedCasePassesEverySizingCheck) {
  for (const auto& file : corpus_files()) {
    SCOPED_TRACE(file.string());
    const CorpusCase c = load_case(file);
    for (const auto& v : checks::sizing_case(c.config, c.shape, c.target, Sizing::corrected()))
      ADD_FAILURE() << c.name << ": " << v;
  }
}

// The replay can fail: the same cases under the ledger mutant B8 are reported.
TEST(Corpus, ReplayReportsAMutant) {
  for (const auto& file : corpus_files()) {
    const CorpusCase c = load_case(file);
    const auto v =
        checks::sizing_case(c.config, c.shape, c.target, Sizing::mutant_of_corrected(Mutant::B8));
    EXPECT_FALSE(v.empty()) << c.name;
  }
}

}  // namespace
}  // namespace bufferlab
