#pragma once

// The command line of a subcommand (`acc-launch config|env|test|stacks|rendezvous ...`): a CLI11
// App per subcommand, parsed the same way for each.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace acc::launcher {

// Parses `args` (the words after the subcommand's name) into `app`. Returns 0 after printing the
// help to stdout for -h/--help (of `app` or of its chosen sub-subcommand), nullopt when the
// command should run. Throws ConfigError (exit 2) with one line naming the flag for a bad
// command line, ending "(see acc-launch <command> --help)".
std::optional<int> parse_command_line(CLI::App& app, const std::vector<std::string>& args);

}  // namespace acc::launcher
