// bufferlab — the command-line front end. Errors print "error: ..." and exit 2.
#include <cstdio>
#include <exception>

#include "bufferlab/core/error.h"
#include "commands.h"

namespace bufferlab::cli {

int& exit_code() {
  static int code = 0;
  return code;
}

}  // namespace bufferlab::cli

int main(int argc, char** argv) {
  CLI::App app{"bufferlab: size, lay out, verify and exercise an inference engine's workspace"};
  app.require_subcommand(1);
  bufferlab::cli::register_presets_command(app);
  bufferlab::cli::register_config_command(app);
  bufferlab::cli::register_plan_command(app);
  bufferlab::cli::register_compare_command(app);
  bufferlab::cli::register_verify_command(app);
  bufferlab::cli::register_fuzz_command(app);
  bufferlab::cli::register_sinkhorn_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const bufferlab::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return 2;
  }
  return bufferlab::cli::exit_code();
}
