// Runs the real `bufferlab` program (BUFFERLAB_CLI_PATH) for end-to-end tests, or the same
// command in-process through the library bufferlab_cli (run_cli_in_process: link it), and
// GoogleTest fixtures giving each test a fresh temporary directory (TempDirTest) and one
// `bufferlab COMMAND` run in it either way (CliCommandTest; CliCompareTest for `compare`).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace bufferlab::cli {
int run_cli(int argc, const char* const* argv);  // tools/common/app.h (bufferlab_cli)
}  // namespace bufferlab::cli

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

// Everything written to stdout and stderr (C stdio, iostreams, CLI11) between construction and
// finish() goes to two files in `dir`, as a child process's output would.
class CapturedOutput {
 public:
  explicit CapturedOutput(const std::filesystem::path& dir)
      : out_path_(dir / "stdout.txt"), err_path_(dir / "stderr.txt") {
    flush_all();
    saved_out_ = dup(STDOUT_FILENO);
    saved_err_ = dup(STDERR_FILENO);
    redirect(out_path_, STDOUT_FILENO);
    redirect(err_path_, STDERR_FILENO);
  }
  CapturedOutput(const CapturedOutput&) = delete;
  CapturedOutput& operator=(const CapturedOutput&) = delete;
  ~CapturedOutput() { restore(); }

  void finish(CliRun& r) {
    restore();
    r.out = read_file(out_path_);
    r.err = read_file(err_path_);
  }

 private:
  static void flush_all() {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
  }
  static void redirect(const std::filesystem::path& path, int fd) {
    const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(file, fd);
    close(file);
  }
  void restore() {
    if (saved_out_ < 0) return;
    flush_all();
    dup2(saved_out_, STDOUT_FILENO);
    dup2(saved_err_, STDERR_FILENO);
    close(saved_out_);
    close(saved_err_);
    saved_out_ = saved_err_ = -1;
  }

  std::filesystem::path out_path_, err_path_;
  int saved_out_ = -1, saved_err_ = -1;
};

// Runs `bufferlab ARGS...` in this process (the library bufferlab_cli, argv[0] the program's
// path as run_cli gives it); stdout and stderr go through files in `scratch_dir`.
inline CliRun run_cli_in_process(const std::vector<std::string>& args,
                                 const std::filesystem::path& scratch_dir) {
  std::vector<const char*> argv{BUFFERLAB_CLI_PATH};
  for (const auto& a : args) argv.push_back(a.c_str());
  CliRun r;
  CapturedOutput captured(scratch_dir);
  r.exit_code = bufferlab::cli::run_cli(static_cast<int>(argv.size()), argv.data());
  captured.finish(r);
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

// ARGS split at spaces (the tests pass no spaced values).
inline std::vector<std::string> split_words(const std::string& args) {
  std::vector<std::string> words;
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// One run as the compare tests read it: stdout then stderr (output), and stdout alone (out).
struct CliOutput {
  int exit_code = -1;
  std::string output;
  std::string out;
};

// TempDirTest running `bufferlab COMMAND ARGS...` in dir_: in-process (bufferlab_cli) when a
// test sets in_process_, else the real binary; COMMAND is the derived fixture's (or none).
class CliCommandTest : public TempDirTest {
 protected:
  explicit CliCommandTest(std::string command = "") : command_(std::move(command)) {}

  // Cheap parse / print tests run the CLI in-process (bufferlab_cli); the rest the binary.
  bool in_process_ = false;

  // `bufferlab ARGV...`, no command word added.
  CliRun run_argv(const std::vector<std::string>& argv) const {
    return in_process_ ? run_cli_in_process(argv, dir_) : run_cli(argv, dir_);
  }
  // `bufferlab COMMAND ARGS...`.
  CliRun run(std::vector<std::string> args) const {
    if (!command_.empty()) args.insert(args.begin(), command_);
    return run_argv(args);
  }
  // `bufferlab COMMAND ARGS` with ARGS split at spaces.
  CliOutput run_text(const std::string& args) const {
    const CliRun r = run(split_words(args));
    return {r.exit_code, r.out + r.err, r.out};
  }

  // The documented failure mode: exit 2, stderr starting with "error:" and naming must_mention.
  void expect_error(const std::vector<std::string>& args, const std::string& must_mention) const {
    const CliRun r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(must_mention), std::string::npos) << r.err;
  }

  // --out DIR of the fuzz commands, and the files written there whose names end with ext.
  std::string out_dir() const { return (dir_ / "out").string(); }
  std::vector<std::filesystem::path> written(const std::string& ext = "") const {
    std::vector<std::filesystem::path> out;
    if (std::filesystem::exists(dir_ / "out"))
      for (const auto& e : std::filesystem::directory_iterator(dir_ / "out"))
        if (e.path().string().ends_with(ext)) out.push_back(e.path());
    return out;
  }

 private:
  std::string command_;
};

// `bufferlab compare ARGS` with ARGS split at spaces (the tests pass no spaced values).
class CliCompareTest : public CliCommandTest {
 protected:
  CliCompareTest() : CliCommandTest("compare") {}
  CliOutput run_compare(const std::string& args) const { return run_text(args); }
};

}  // namespace bufferlab::testing
