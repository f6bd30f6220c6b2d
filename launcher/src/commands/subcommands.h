#pragma once

// acc-launch's subcommands, one row each: main runs a command line's by its row, --help lists
// the rows that have a summary, and `stacks` tells a job's launcher from a subcommand's process by
// them. Adding a subcommand is a row here and its function.

#include <string>
#include <string_view>
#include <vector>

#include "acc/launcher/cli/cli.h"

namespace acc::launcher {

struct Subcommand {
  const char* name;
  const char* summary;  // its line in --help; nullptr: hidden (the launcher's own helpers)
  // Runs it with the words after its name and returns the exit status; nullptr for `launch` and
  // `help`, which main runs itself.
  int (*run)(const std::vector<std::string>& args);
  bool runs_a_job;  // its process is a job's launcher, which `stacks` may ask for a report
};

// Every subcommand, in the order --help lists them, the hidden ones last.
const std::vector<Subcommand>& subcommands();

// The subcommand named `name`; nullptr where none is (a PROGRAM to launch).
const Subcommand* find_subcommand(std::string_view name);

// The name and summary of each subcommand --help lists.
std::vector<SubcommandHelp> subcommand_help();

}  // namespace acc::launcher
