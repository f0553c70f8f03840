// Runs the real `bufferlab` program (BUFFERLAB_CLI_PATH) for end-to-end tests, and a
// GoogleTest fixture giving each test a fresh temporary directory.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace bufferlab::testing {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `bufferlab ARGS...`; stderr goes through a file in `scratch_dir`.
inline CliRun run_cli(const std::vector<std::string>& args,
                      const std::filesystem::path& scratch_dir) {
  std::string cmd = shell_quote(BUFFERLAB_CLI_PATH);
  for (const auto& a : args) cmd.append(" ").append(shell_quote(a));
  const std::filesystem::path err_path = scratch_dir / "stderr.txt";
  cmd.append(" 2>").append(shell_quote(err_path.string()));
  CliRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(err_path);
  return r;
}

// A fresh directory per test (dir_), removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "bufferlab_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::filesystem::path dir_;
};

}  // namespace bufferlab::testing
