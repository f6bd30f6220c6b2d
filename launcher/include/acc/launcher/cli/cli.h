#pragma once

// Parsing of `acc-launch [launch] [options] PROGRAM [program args...]`.

#include <string>
#include <vector>

#include "acc/launcher/cli/options.h"

namespace acc::launcher {

// The outcome of parsing: either options to launch with, or a message to print and an exit code
// (help and version exit 0; a bad flag exits 2 with one line that names it).
struct ParseResult {
  LaunchOptions options;
  bool exit_now = false;
  int exit_code = 0;
  std::string message;  // printed to stdout when exit_code is 0, else to stderr
};

// Parses the arguments after the program name (and after an optional "launch"). Reads the PET_*
// mirrors and PYTHON_EXEC from the process environment. Never throws for bad input.
ParseResult parse_launch_args(const std::vector<std::string>& args);

}  // namespace acc::launcher
