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

// The job secret a subcommand was given: in the file `flag_value` names (its --job_secret_file),
// else in the one $ACC_JOB_SECRET_FILE names; "" where neither is set. Throws ConfigError naming
// the setting (rendezvous::read_job_secret) for a file that cannot be read or others can read.
std::string given_job_secret(const std::string& flag_value);

}  // namespace acc::launcher
