// The `bufferlab` program as a library call: main() is run_cli(argc, argv), and tests call it
// in-process. Errors print "error: ..." on stderr and return 2.
#pragma once

namespace bufferlab::cli {

// Builds the command tree, parses argv (argv[0] is the program name), runs the chosen
// subcommand and returns the process exit code.
int run_cli(int argc, const char* const* argv);

}  // namespace bufferlab::cli
