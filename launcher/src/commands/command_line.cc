#include "commands/command_line.h"

#include <unistd.h>

#include <algorithm>

#include "acc/common/error.h"
#include "output/console.h"

namespace acc::launcher {

std::optional<int> parse_command_line(CLI::App& app, const std::vector<std::string>& args) {
  try {
    // CLI11 takes a vector of words last-first.
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));
  } catch (const CLI::CallForHelp&) {
    // help() of the top app shows the sub-subcommand that was named (`config default --help`).
    write_all(STDOUT_FILENO, app.help());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    while (!message.empty() && message.back() == ' ') message.pop_back();
    std::string command = app.get_name();
    for (const CLI::App* chosen = &app; !chosen->get_subcommands().empty();) {
      chosen = chosen->get_subcommands().front();
      command += " " + chosen->get_name();
    }
    throw ConfigError(message + " (see " + command + " --help)");
  }
  return std::nullopt;
}

}  // namespace acc::launcher
