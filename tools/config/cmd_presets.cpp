// `bufferlab presets`: the built-in models — name, family, tiny or real, a few key
// dimensions and the description — as a table or as JSON.
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bufferlab/core/presets.h"
#include "common/commands.h"

namespace bufferlab::cli {
namespace {

void print_json(const std::vector<PresetInfo>& presets) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : presets) {
    const ModelConfig c = preset(p.name);
    out.push_back({{"name", p.name},
                   {"family", p.family},
                   {"tiny", p.tiny},
                   {"description", p.description},
                   {"hidden_size", c.hidden_size},
                   {"num_hidden_layers", c.num_hidden_layers},
                   {"num_experts", c.num_experts},
                   {"num_experts_per_tok", c.num_experts_per_tok}});
  }
  fmt::print("{}\n", out.dump(2));
}

void print_table(const std::vector<PresetInfo>& presets) {
  size_t name_w = 4, family_w = 6;
  for (const auto& p : presets) {
    name_w = std::max(name_w, p.name.size());
    family_w = std::max(family_w, p.family.size());
  }
  fmt::print("{:<{}}  {:<{}}  {:<4}  {:>6}  {:>6}  {:>4}  {:>5}  {}\n", "name", name_w, "family",
             family_w, "kind", "h", "layers", "E", "top_k", "description");
  for (const auto& p : presets) {
    const ModelConfig c = preset(p.name);
    // top_k means nothing without experts; a dash avoids suggesting a router.
    const std::string top_k = c.num_experts > 0 ? std::to_string(c.num_experts_per_tok) : "-";
    fmt::print("{:<{}}  {:<{}}  {:<4}  {:>6}  {:>6}  {:>4}  {:>5}  {}\n", p.name, name_w, p.family,
               family_w, p.tiny ? "tiny" : "real", c.hidden_size, c.num_hidden_layers,
               c.num_experts, top_k, p.description);
  }
}

}  // namespace

void register_presets_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("presets", "list the built-in model presets");
  sub->add_flag("--json", *json, "print the list as JSON");
  sub->callback([json] {
    const std::vector<PresetInfo> presets = list_presets();
    if (*json)
      print_json(presets);
    else
      print_table(presets);
    exit_code() = 0;
  });
}

}  // namespace bufferlab::cli
