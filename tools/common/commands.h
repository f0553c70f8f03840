// The `bufferlab` subcommands. Each lives in its own <folder>/cmd_<name>.cpp and registers itself
// on the top-level app; its callback sets the process exit code through exit_code().
#pragma once

#include <CLI/CLI.hpp>

namespace bufferlab::cli {

// The exit code run_cli() (common/app.h) returns after the chosen subcommand ran (0 unless set).
int& exit_code();

void register_presets_command(CLI::App& app);
void register_config_command(CLI::App& app);
void register_plan_command(CLI::App& app);
void register_compare_command(CLI::App& app);
void register_verify_command(CLI::App& app);
void register_fuzz_command(CLI::App& app);
void register_sinkhorn_command(CLI::App& app);

}  // namespace bufferlab::cli
