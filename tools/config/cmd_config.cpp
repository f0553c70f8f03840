// `bufferlab config`: the model a --preset or --config resolves to, in the normalized form
// (`--json`, which --config reads back) or as a key = value listing; with `--explain`, what
// the loader made of every key of the file (read, derived, default, ignored).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/error.h"
#include "common/commands.h"
#include "common/model_source.h"

namespace bufferlab::cli {
namespace {

struct ConfigCommand {
  ModelSource model;
  bool json = false;
  bool explain = false;
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

nlohmann::json explain_json(const ExplainedConfig& e) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ConfigKeyUse& u : e.uses)
    rows.push_back({{"kind", to_string(u.kind)},
                    {"key", u.key.empty() ? nlohmann::json() : nlohmann::json(u.key)},
                    {"field", u.field.empty() ? nlohmann::json() : nlohmann::json(u.field)},
                    {"note", u.note}});
  nlohmann::json out = to_normalized_json(e.config);
  out["explain"] = rows;
  return out;
}

// One table per kind, in the order read, derived, default, ignored.
void print_explain(const std::string& label, const ExplainedConfig& e) {
  using Kind = ConfigKeyUse::Kind;
  size_t key_w = 3, field_w = 5;
  for (const ConfigKeyUse& u : e.uses) {
    key_w = std::max(key_w, u.key.size());
    field_w = std::max(field_w, u.field.size());
  }
  fmt::print("# {}: what the loader made of each key (docs/spec/buffers.md §1.1)\n", label);
  fmt::print("{:<8} {:<{}} {:<{}} {}\n", "kind", "key", key_w, "field", field_w, "value / rule");
  for (Kind kind : {Kind::read, Kind::derived, Kind::defaulted, Kind::ignored})
    for (const ConfigKeyUse& u : e.uses)
      if (u.kind == kind)
        fmt::print("{:<8} {:<{}} {:<{}} {}\n", to_string(kind), u.key.empty() ? "-" : u.key, key_w,
                   u.field.empty() ? "-" : u.field, field_w, u.note);
  size_t counts[4] = {0, 0, 0, 0};
  for (const ConfigKeyUse& u : e.uses) ++counts[static_cast<int>(u.kind)];
  fmt::print("{} keys read, {} fields derived, {} fields at their default, {} keys ignored\n",
             counts[0], counts[1], counts[2], counts[3]);
}

}  // namespace

void register_config_command(CLI::App& app) {
  auto cmd = std::make_shared<ConfigCommand>();
  CLI::App* sub = app.add_subcommand(
      "config", "print a model config in BufferLab's normalized form (what --config reads)");
  cmd->model.add_options(*sub);
  sub->add_flag("--json", cmd->json, "print the normalized JSON form");
  sub->add_flag("--explain", cmd->explain,
                "with --config: list every key the loader read, every field it derived or left "
                "at its default, and every key it ignored (with --json: an \"explain\" array)");
  sub->callback([cmd] {
    if (cmd->explain) {
      if (cmd->model.config_path().empty())
        throw Error("--explain needs --config FILE (a preset has no file to explain)");
      const ExplainedConfig e = explain_config_file(cmd->model.config_path());
      if (cmd->json)
        fmt::print("{}\n", explain_json(e).dump(2));
      else
        print_explain(cmd->model.label(), e);
      exit_code() = 0;
      return;
    }
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
