// run_cli: the `bufferlab` command tree (every subcommand registers itself) and the one place
// errors become "error: ..." and exit code 2.
#include "common/app.h"

#include <cstdio>
#include <exception>

#include "bufferlab/core/error.h"
#include "common/commands.h"

namespace bufferlab::cli {

int& exit_code() {
  static int code = 0;
  return code;
}

int run_cli(int argc, const char* const* argv) {
  exit_code() = 0;
  CLI::App app{"bufferlab: size, lay out, verify and exercise an inference engine's workspace"};
  app.require_subcommand(1);
  register_presets_command(app);
  register_config_command(app);
  register_plan_command(app);
  register_compare_command(app);
  register_verify_command(app);
  register_fuzz_command(app);
  register_sinkhorn_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
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
