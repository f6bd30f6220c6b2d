#include "commands/command_line.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "acc/common/error.h"
#include "acc/common/strings.h"
#include "acc/launcher/plan/plan.h"
#include "acc/rendezvous/job_secret.h"
#include "cli/help_format.h"
#include "output/console.h"

namespace acc::launcher {

namespace {

// A word where a command that needs a subcommand expects one, naming none of them: CLI11 would
// say only that a subcommand is required.
void check_subcommand(const CLI::App& app, const std::vector<std::string>& args) {
  if (app.get_require_subcommand_min() == 0 || args.empty() || args.front().empty() ||
      args.front()[0] == '-')
    return;
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->check_name(args.front())) return;
    names.push_back(sub->get_name());
  }
  throw ConfigError(app.get_name() + " " + escape_control(args.front()) + ": no such command; " +
                    (names.size() == 1 ? "the one command is " + names.front()
                                       : "the commands are " + join(names, ", ")) +
                    " (see " + app.get_name() + " --help)");
}

// Every (sub-)subcommand's --help in the launch's plain words (cli/help_format.h): a subcommand
// takes its parent's formatter when it is added, before this one is set.
void use_plain_help(CLI::App& app, const std::shared_ptr<CLI::FormatterBase>& formatter) {
  app.formatter(formatter);
  for (CLI::App* sub : app.get_subcommands({})) use_plain_help(*sub, formatter);
}

}  // namespace

std::optional<int> parse_command_line(CLI::App& app, const std::vector<std::string>& args) {
  use_plain_help(app, std::make_shared<PlainHelpFormatter>());
  check_subcommand(app, args);
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

std::string given_job_secret(const std::string& flag_value) {
  if (!flag_value.empty()) return rendezvous::read_job_secret(flag_value, "--job_secret_file");
  const char* variable = std::getenv(kJobSecretFileVar);
  if (!variable || !*variable) return "";
  return rendezvous::read_job_secret(variable, std::string(kJobSecretFileVar) + "=" + variable);
}

}  // namespace acc::launcher
