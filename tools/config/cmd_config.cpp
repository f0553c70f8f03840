// `bufferlab config`: the model a --preset or --config resolves to, in the normalized form
// (`--json`, which --config reads back) or as a key = value listing.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bufferlab/core/config_json.h"
#include "common/commands.h"
#include "common/model_source.h"

namespace bufferlab::cli {
namespace {

struct ConfigCommand {
  ModelSource model;
  bool json = false;
};

// The listing is read off the normalized JSON, so it shows every field without a second
// hand-written list.
void print_listing(const std::string& label, const nlohmann::json& normalized) {
  const nlohmann::json& fields = normalized.at("config");
  size_t key_w = 0;
  for (const auto& [key, value] : fields.items()) key_w = std::max(key_w, key.size());
  fmt::print("# {}\n", label);
  for (const auto& [key, value] : fields.items())
    fmt::print("{:<{}} = {}\n", key, key_w, value.dump());
}

}  // namespace

void register_config_command(CLI::App& app) {
  auto cmd = std::make_shared<ConfigCommand>();
  CLI::App* sub = app.add_subcommand(
      "config", "print a model config in BufferLab's normalized form (what --config reads)");
  cmd->model.add_options(*sub);
  sub->add_flag("--json", cmd->json, "print the normalized JSON form");
  sub->callback([cmd] {
    const ModelConfig config = cmd->model.load();
    const nlohmann::json normalized = to_normalized_json(config);
    if (cmd->json)
      fmt::print("{}\n", normalized.dump(2));
    else
      print_listing(cmd->model.label(), normalized);
    exit_code() = 0;
  });
}

}  // namespace bufferlab::cli
