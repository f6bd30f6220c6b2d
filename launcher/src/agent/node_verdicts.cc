#include "agent/node_verdicts.h"

#include <signal.h>

#include <algorithm>

#include "acc/common/files.h"
#include "acc/common/strings.h"

namespace acc::launcher {

std::vector<std::string> names_of_this_node(const LaunchPlan& plan,
                                            const std::map<std::string, std::string>& environment) {
  std::vector<std::string> names = {plan.hostname};
  if (!plan.local_addr.empty()) names.push_back(plan.local_addr);
  if (const auto id = environment.find("ACC_NODE_ID");
      id != environment.end() && !id->second.empty())
    names.push_back(id->second);
  return names;
}

std::string excluding_line(const std::string& file_text, const std::vector<std::string>& names) {
  for (const std::string& line : split(file_text, '\n')) {
    const std::string entry = trim(line.substr(0, line.find('#')));
    if (!entry.empty() && std::find(names.begin(), names.end(), entry) != names.end()) return entry;
  }
  return "";
}

namespace {

// The command's verdict: "" when it exits 0 within the limit.
std::string health_verdict(Os& os, const std::string& command, const std::string& scratch_dir) {
  const std::string output = scratch_dir + "/node_health.out";
  const pid_t pid = os.start_program({"/bin/sh", "-c", command}, output);
  const std::string named = "--node_health_command '" + one_line(command, 80) + "'";
  if (pid < 0) return named + " could not start";
  const auto deadline = os.now() + kHealthCommandLimit;
  std::optional<int> status;
  while (!(status = os.exit_status(pid)) && os.now() < deadline)
    os.sleep_for(std::chrono::milliseconds(10));
  if (!status) {
    os.signal_process(pid, SIGKILL);
    while (!os.exit_status(pid)) os.sleep_for(std::chrono::milliseconds(10));
    return named + " did not end within " + std::to_string(kHealthCommandLimit.count()) + " s";
  }
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) return "";
  const std::vector<std::string> lines = split(read_file(output), '\n');
  const std::string said = lines.empty() ? "" : ": " + one_line(lines.front(), 160);
  const std::string how = WIFEXITED(*status)
                              ? "exited " + std::to_string(WEXITSTATUS(*status))
                              : "was killed by signal " + std::to_string(WTERMSIG(*status));
  return named + " " + how + said;
}

}  // namespace

std::string node_verdict(Os& os, const LaunchPlan& plan, const std::vector<std::string>& names,
                         const std::string& scratch_dir) {
  if (!plan.exclude_nodes_file.empty()) {
    const std::string entry = excluding_line(read_file(plan.exclude_nodes_file), names);
    if (!entry.empty())
      return "--exclude_nodes_file " + plan.exclude_nodes_file + " names this node (" + entry + ")";
  }
  if (!plan.node_health_command.empty())
    return health_verdict(os, plan.node_health_command, scratch_dir);
  return "";
}

}  // namespace acc::launcher
