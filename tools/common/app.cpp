// run_cli: the `bufferlab` command tree (every subcommand registers itself) and the one place
// errors become "error: ..." and exit code 2 — including a mistyped command or option, which
// is named with the nearest real one ("unknown command 'plna'; did you mean 'plan'?").
#include "common/app.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "bufferlab/core/error.h"
#include "common/command_help.h"
#include "common/commands.h"
#include "common/suggest.h"

namespace bufferlab::cli {
namespace {

std::vector<std::string> command_names(CLI::App& app) {
  std::vector<std::string> names;
  const std::function<bool(CLI::App*)> all = [](CLI::App*) { return true; };
  for (const CLI::App* sub : app.get_subcommands(all)) names.push_back(sub->get_name());
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  const auto near = closest_name(word, candidates);
  return near ? "; did you mean '" + *near + "'?" : "";
}

// The first argument must name a command: anything else is refused here, before CLI11 would
// answer only "A subcommand is required". Throws Error; nothing for -h / --help.
void require_known_command(CLI::App& app, int argc, const char* const* argv) {
  const std::vector<std::string> commands = command_names(app);
  if (argc < 2)
    throw Error("a command is required: " + joined(commands) +
                " (bufferlab --help describes them)");
  const std::string first = argv[1];
  if (first == "-h" || first == "--help") return;
  for (const auto& c : commands)
    if (first == c) return;
  if (first.rfind('-', 0) == 0) {
    const std::string bare = first.substr(std::min(first.find_first_not_of('-'), first.size()));
    throw Error("unknown option '" + first + "': bufferlab takes a command first (" +
                joined(commands) + ")" + suggestion(bare, commands));
  }
  const std::string hint = suggestion(first, commands);
  throw Error("unknown command '" + first + "'" +
              (hint.empty()
                   ? " (commands: " + joined(commands) + "; bufferlab --help describes them)"
                   : hint));
}

// The options a command takes, as typed: "--preset", "--json", "-h", "--help".
std::vector<std::string> option_spellings(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : command.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// CLI11's "The following arguments were not expected: ..." as one line naming the first
// unexpected argument and, for an option, the nearest option of that command.
std::string unexpected_argument(CLI::App& app) {
  const std::vector<std::string> extras = app.remaining(true);
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  if (extras.empty() || chosen.empty()) return "";
  const CLI::App& command = *chosen.front();
  const std::string where = "bufferlab " + command.get_name();
  const std::string& arg = extras.front();
  if (arg.rfind('-', 0) != 0)
    return "unexpected argument '" + arg + "' for '" + where + "' (it takes options only; " +
           where + " --help lists them)";
  const std::string name = arg.substr(0, arg.find('='));
  const std::string hint = suggestion(name, option_spellings(command));
  return "unknown option '" + name + "' for '" + where + "'" +
         (hint.empty() ? " (" + where + " --help lists its options)" : hint);
}

}  // namespace

int& exit_code() {
  static int code = 0;
  return code;
}

int run_cli(int argc, const char* const* argv) {
  exit_code() = 0;
  // Named "bufferlab" whatever path ran it: help shows "Usage: bufferlab ...", never a build path.
  CLI::App app{"bufferlab: size, lay out, verify and exercise an inference engine's workspace",
               "bufferlab"};
  app.require_subcommand(1);
  register_presets_command(app);
  register_config_command(app);
  register_plan_command(app);
  register_compare_command(app);
  register_verify_command(app);
  register_fuzz_command(app);
  register_sinkhorn_command(app);
  try {
    apply_command_help(app);
    require_known_command(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    const std::string named = unexpected_argument(app);
    std::fprintf(stderr, "error: %s\n", named.empty() ? e.what() : named.c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return 2;
  }
  return exit_code();
}

}  // namespace bufferlab::cli
