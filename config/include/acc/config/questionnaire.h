#pragma once

// The `acc-launch config` questionnaire: Accelerate's LOCAL_MACHINE question flow
// (accelerate/commands/config/cluster.py; reference/accelerate.md §1.2), with its prompts,
// choices, defaults and branches, for the settings acc-launch runs. The flow is pure logic over a
// Prompter, so it is driven the same way by a terminal, a pipe or a test.

#include <memory>
#include <string>
#include <vector>

#include "acc/config/cluster_config.h"

namespace acc::config {

// How many invalid answers in a row a question takes before the questionnaire gives up (an input
// that never answers, such as `yes garbage | acc-launch config`, would otherwise loop forever).
inline constexpr int kMaxInvalidAnswers = 3;

// Throws the ConfigError of a question given up on: one line naming it; nothing is written.
[[noreturn]] void give_up(const std::string& prompt);

// Asks the user. Implementations: a terminal with arrow-key menus, and plain lines (pipes).
class Prompter {
 public:
  virtual ~Prompter() = default;
  // Shows `prompt` and returns one line of answer (without the newline). Blocks until the user
  // answers. Throws ConfigError when the input ends.
  virtual std::string ask(const std::string& prompt) = 0;
  // Shows a menu and returns the chosen index (default_index when the user just presses Enter).
  // Throws ConfigError when the input ends, the user interrupts, or (over lines) after
  // kMaxInvalidAnswers answers that name no option.
  virtual int choose(const std::string& prompt, const std::vector<std::string>& options,
                     int default_index) = 0;
  // Prints a line of information.
  virtual void say(const std::string& line) = 0;
};

// A prompter over file descriptors: a terminal menu (raw mode, arrows and digits) when `in_fd`
// is a terminal, else numbered menus that read an index or the option's text per line.
// Not thread-safe; owns nothing (the descriptors stay open).
std::unique_ptr<Prompter> make_prompter(int in_fd, int out_fd);

// What the flow needs to know about the machine.
struct MachineFacts {
  int gpu_count = 0;
};

// Runs the flow and returns the config to write. Invalid answers are asked again, up to
// kMaxInvalidAnswers times in a row; then throws ConfigError (give_up).
ClusterConfig run_questionnaire(Prompter& prompter, const MachineFacts& facts);

}  // namespace acc::config
