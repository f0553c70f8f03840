// create_output_dir and write_json_file (json_file.h).
#include "io/json_file.h"

#include <fstream>
#include <system_error>

#include "bufferlab/core/error.h"

namespace bufferlab::cli {

std::filesystem::path create_output_dir(std::string_view option, const std::string& dir) {
  const std::filesystem::path path(dir);
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec)
    throw Error(std::string(option) + " " + dir + ": cannot create the directory: " + ec.message());
  return path;
}

void write_json_file(const std::filesystem::path& path, const nlohmann::json& j) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out) throw Error("cannot write " + path.string());
}

}  // namespace bufferlab::cli
