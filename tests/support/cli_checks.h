// Expectations the `bufferlab compare` tests share: an exit code with the lines the run must
// print (an agreement: exit 0), a refusal (exit 2 with an error line), the CUDA run that skips (77)
// or agrees, a --json report's fields, and a --dump manifest with the NPY files it lists; and the
// names the compare test files use (compare_names).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "contains.h"

namespace bufferlab::testing {

// Exit `exit_code` and every one of `expected` in the output; `context` leads the messages.
inline void expect_exit(const CliOutput& r, int exit_code, const std::vector<std::string>& expected,
                        const std::string& context = "") {
  EXPECT_EQ(r.exit_code, exit_code) << context << r.output;
  for (const std::string& what : expected)
    EXPECT_TRUE(contains(r.output, what)) << context << r.output;
}

// Exit 0 and every one of `expected` in the output; `args` names the run in the message.
inline void expect_agreed(const CliOutput& r, const std::string& args,
                          const std::vector<std::string>& expected) {
  expect_exit(r, 0, expected, args + "\n");
}

// Exit 2 and `marker` in the output; `args` names the run in the message.
inline void expect_refused(const CliOutput& r, const std::string& args,
                           const std::string& marker = "error: ") {
  expect_exit(r, 2, {marker}, args + "\n");
}

// Exit 77 with the output starting "skipped: " (returns true), or exit 0; `context` leads the
// message of the latter.
inline bool expect_skipped_or_agreed(const CliOutput& r, const std::string& context = "") {
  if (r.exit_code == 77) {
    EXPECT_EQ(r.output.rfind("skipped: ", 0), 0u) << r.output;
    return true;
  }
  EXPECT_EQ(r.exit_code, 0) << context << r.output;
  return false;
}

// The stdout of `r`, a --json report, parsed once its exit code is `exit_code` (else the output
// is reported and the report is null: a test reading a field of it stops there).
inline nlohmann::json json_report(const CliOutput& r, int exit_code = 0) {
  EXPECT_EQ(r.exit_code, exit_code) << r.output;
  if (r.exit_code != exit_code) return nullptr;
  return nlohmann::json::parse(r.out);
}

// Every key of `expected` in the JSON object `j`, with its value.
inline void expect_fields(const nlohmann::json& j, const nlohmann::json& expected) {
  for (const auto& [key, value] : expected.items()) EXPECT_EQ(j.at(key), value) << key;
}

// The manifest.json a `--dump DIR` run wrote into `dir`.
inline nlohmann::json read_manifest(const std::filesystem::path& dir) {
  return nlohmann::json::parse(read_file(dir / "manifest.json"));
}

// The manifest `r`, a `--dump DIR` run, wrote into `dir`, once it exited 0 (else the output is
// reported and the manifest is null: a test reading a field of it stops there).
inline nlohmann::json dump_manifest(const CliOutput& r, const std::filesystem::path& dir) {
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return nullptr;
  return read_manifest(dir);
}

// Every one of `files` listed in the manifest.
inline void expect_lists_files(const nlohmann::json& manifest,
                               std::initializer_list<const char*> files) {
  for (const char* f : files) EXPECT_TRUE(manifest.at("files").contains(f)) << f;
}

// Which of the optional checks expect_npy_files makes.
struct NpyChecks {
  bool header_aligned_to_64 = true;  // 10 + header length is a multiple of 64
  bool bf16_named = true;            // every <u2 file's format says "bf16 as uint16 (raw bits)"
};

// Every file the manifest lists exists in `dir`, is NPY v1.0 with the manifest's dtype in its
// header and exactly as many elements after it as its shape says.
inline void expect_npy_files(const std::filesystem::path& dir, const nlohmann::json& manifest,
                             const NpyChecks& checks = {}) {
  for (const auto& [file, info] : manifest.at("files").items()) {
    const std::string bytes = read_file(dir / file);
    ASSERT_GE(bytes.size(), 10u) << file;
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8)) << file;
    const size_t header_len = static_cast<unsigned char>(bytes[8]) |
                              static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    if (checks.header_aligned_to_64) {
      EXPECT_EQ((10 + header_len) % 64, 0u) << file;
    }
    const std::string descr = info.at("npy_dtype");
    EXPECT_TRUE(contains(bytes.substr(10, header_len), "'descr': '" + descr + "'")) << file;
    uint64_t elements = 1;
    for (uint64_t d : info.at("shape")) elements *= d;
    const uint64_t item = descr == "<u2" ? 2 : descr == "<f4" ? 4 : 8;
    EXPECT_EQ(bytes.size() - 10 - header_len, elements * item) << file;
    if (checks.bf16_named && descr == "<u2") {
      EXPECT_EQ(info.at("format"), "bf16 as uint16 (raw bits)") << file;
    }
  }
}

// The names the compare test files use: `using namespace bufferlab::testing::compare_names;`.
namespace compare_names {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::dump_manifest;
using testing::expect_exit;
using testing::expect_fields;
using testing::expect_lists_files;
using testing::expect_npy_files;
using testing::json_report;
using testing::read_file;
using testing::read_manifest;
using CompareRun = CliOutput;  // exit code, stdout then stderr, stdout
}  // namespace compare_names

}  // namespace bufferlab::testing
