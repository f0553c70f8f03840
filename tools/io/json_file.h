// Output files of the CLI: an output directory created on demand and a JSON document written
// whole — each with the one error message the commands give when that fails.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace bufferlab::cli {

// Creates `dir` and its parents (nothing when present); Error "OPTION DIR: cannot create the
// directory: WHY" otherwise. Returns the path.
std::filesystem::path create_output_dir(std::string_view option, const std::string& dir);

// Writes `j` indented by 2, then a newline; Error "cannot write PATH" when that fails.
void write_json_file(const std::filesystem::path& path, const nlohmann::json& j);

}  // namespace bufferlab::cli
