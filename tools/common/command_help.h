// The end of every command's --help: what is required beyond CLI11's own REQUIRED marks (one
// of --preset / --config is a rule CLI11 cannot state), the exit codes and two examples. One
// table for all commands (command_help.cpp), so they read alike; run_cli applies it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace bufferlab::cli {

struct CommandHelp {
  std::string command;
  std::string required;                                 // "" when nothing is required
  std::vector<std::pair<int, std::string>> exit_codes;  // code, meaning
  std::vector<std::string> examples;                    // full command lines
};

const std::vector<CommandHelp>& command_help();

// Appends to the help footer of each of `app`'s commands its command_help() entry; throws
// Error for a command without one (a new command must say how it exits).
void apply_command_help(CLI::App& app);

}  // namespace bufferlab::cli
