// bufferlab — the command-line front end: the library bufferlab_cli (common/app.h) does it all.
#include "common/app.h"

int main(int argc, char** argv) { return bufferlab::cli::run_cli(argc, argv); }
