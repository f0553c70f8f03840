// apply_sizes_file: reads the `plan --json` form and overrides BufferSizes' byte counts.
#include "io/sizes_file.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bufferlab/core/error.h"
#include "bufferlab/core/plan_report.h"

namespace bufferlab::cli {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--sizes " + path + ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::parse_error& e) {
    throw Error("--sizes " + path + ": malformed JSON: " + e.what());
  }
}

// A run shape or target other than the one verified would check the byte counts against
// passes they were never sized for; refuse instead of verifying the wrong question.
void check_same(const std::string& path, const json& j, const char* group, const char* key,
                const json& expected, const std::string& flag) {
  if (!j.contains(group) || !j.at(group).is_object() || !j.at(group).contains(key)) return;
  const json& got = j.at(group).at(key);
  if (got == expected) return;
  throw Error("--sizes " + path + ": " + group + "." + key + " = " + got.dump() +
              " but this run verifies " + expected.dump() + " (give " + flag + " " +
              (got.is_string() ? got.get<std::string>() : got.dump()) + ")");
}

void check_context(const std::string& path, const json& j, const RunShape& shape,
                   const Target& target) {
  check_same(path, j, "run_shape", "max_batch_tokens", shape.max_batch_tokens,
             "--max-batch-tokens");
  check_same(path, j, "run_shape", "max_seq_len", shape.max_seq_len, "--max-seq-len");
  check_same(path, j, "run_shape", "kv_block_size", shape.kv_block_size, "--kv-block-size");
  check_same(path, j, "run_shape", "max_batch_size", shape.max_batch_size, "--max-batch-size");
  check_same(path, j, "target", "name", target.name, "--target");
  check_same(path, j, "target", "splitk", target.splitk_string(), "--splitk");
  check_same(path, j, "target", "q2_dequant", target.q2_dequant, "--q2-dequant");
  check_same(path, j, "target", "q2_mmq", target.q2_mmq, "--q2-mmq");
}

const json* find_buffer(const json& buffers, std::string_view name) {
  for (const json& b : buffers)
    if (b.is_object() && b.contains("name") && b.at("name") == name) return &b;
  return nullptr;
}

std::vector<std::string> sub_layout_differences(const json& j, const SubLayoutParams& p) {
  std::vector<std::string> out;
  if (!j.contains("sub_layout") || !j.at("sub_layout").is_object()) return out;
  for (const auto& [key, value] : sub_layout_entries(p)) {
    const json& s = j.at("sub_layout");
    if (!s.contains(key) || !s.at(key).is_number_unsigned()) continue;
    if (s.at(key).get<uint64_t>() == value) continue;
    out.push_back(std::string(key) + " file=" + s.at(key).dump() +
                  " verified=" + std::to_string(value));
  }
  return out;
}

}  // namespace

SizesFile apply_sizes_file(const std::string& path, const RunShape& shape, const Target& target,
                           BufferSizes& sizes) {
  const json j = read_json(path);
  if (!j.is_object() || !j.contains("buffers") || !j.at("buffers").is_array())
    throw Error("--sizes " + path +
                ": expected the object `bufferlab plan --json` prints, with a \"buffers\" array");
  check_context(path, j, shape, target);
  for (const auto& info : kBufferRegistry) {
    const std::string name(info.name);
    const json* b = find_buffer(j.at("buffers"), info.name);
    if (b == nullptr) throw Error("--sizes " + path + ": buffer " + name + " is missing");
    if (!b->contains("bytes"))
      throw Error("--sizes " + path + ": buffer " + name + " has no \"bytes\"");
    const json& bytes = b->at("bytes");
    if (!bytes.is_number_unsigned())
      throw Error("--sizes " + path + ": buffer " + name + ": \"bytes\" = " + bytes.dump() +
                  " is not a non-negative integer");
    sizes.bytes(info.id) = bytes.get<uint64_t>();
  }
  SizesFile out;
  out.path = path;
  out.sizing = j.contains("sizing") && j.at("sizing").is_string()
                   ? j.at("sizing").get<std::string>()
                   : "unknown";
  out.sub_layout_differences = sub_layout_differences(j, sizes.params);
  return out;
}

}  // namespace bufferlab::cli
