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

// One subcommand of acc-launch and its line in --help (the table is commands/subcommands.h's).
struct SubcommandHelp {
  std::string name;
  std::string summary;
};

// Parses the arguments after the program name (and after an optional "launch"). Reads the PET_*
// mirrors, PYTHON_EXEC and ACC_PYTHON_HOOK from the process environment. `launcher_binary` is the
// running acc-launch's file (proc::Reader::executable), where a python beside it is the default
// interpreter; "": none. --help's usage lists `subcommands`, in their order. Never throws for
// bad input.
ParseResult parse_launch_args(const std::vector<std::string>& args,
                              const std::string& launcher_binary = "",
                              const std::vector<SubcommandHelp>& subcommands = {});

// `acc-launch help TOPIC`: the usage and the flags of one group (torchrun, accelerate,
// multi-node, hangs, output, status, or all), exit code 0; for an unknown topic one error line
// naming the topics, exit code 2.
struct HelpResult {
  std::string text;
  int exit_code = 0;
};
HelpResult launch_help(const std::string& topic,
                       const std::vector<SubcommandHelp>& subcommands = {});

// Sets options.python and python_source from, in order: --python (given on the command line),
// $PYTHON_EXEC, `beside_binary` (the python beside the acc-launch binary; empty: none), python3
// on PATH.
void resolve_python(LaunchOptions& options, const std::string& beside_binary);

}  // namespace acc::launcher
