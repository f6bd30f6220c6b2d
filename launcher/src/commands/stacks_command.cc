// `acc-launch stacks [LAUNCHER_PID...]`: the hang report of a running job, which goes on. It sends
// SIGUSR2 to the launcher, which collects its workers' stacks, writes the report to its stderr
// and to on_demand_report_path(pid), and this command prints that file. Without a pid it asks the
// one launcher started from this session or this directory: on a machine shared under one user
// (root in a container) the user's other launchers may be someone else's jobs.

#include "commands/stacks_command.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>

#include "acc/common/error.h"
#include "acc/common/files.h"
#include "acc/common/strings.h"
#include "commands/command_line.h"
#include "commands/commands.h"
#include "commands/launchers.h"
#include "hangs/stall_watch.h"
#include "output/console.h"
#include "process/real_os.h"

namespace acc::launcher {
namespace {

std::string ask_for_report(int pid, Os& os) {
  const std::string path = on_demand_report_path(pid);
  ::unlink(path.c_str());
  ACC_CHECK(os.signal_process(pid, SIGUSR2), ConfigError, "acc-launch stacks: cannot signal ", pid);
  // Stacks take a few seconds at most (stall_watch.cc); the rest is a hang guard.
  const auto deadline = os.now() + std::chrono::seconds(30);
  while (os.now() < deadline) {
    if (owned_by_me(path)) {
      std::string report = read_file(path);
      ::unlink(path.c_str());
      return report;
    }
    ACC_CHECK(os.signal_process(pid, 0), LaunchError, "acc-launch stacks: launcher ", pid,
              " ended before it wrote its report");
    os.sleep_for(std::chrono::milliseconds(50));
  }
  throw TimeoutError("acc-launch stacks: launcher " + std::to_string(pid) +
                     " wrote no report in 30 s");
}

// Of `launchers`, those started from the session of this command or from its working directory.
std::vector<int> launchers_here(const std::vector<int>& launchers, proc::Reader& proc) {
  const int session = proc.stat(::getpid()).session;
  const std::string directory = proc.working_directory(::getpid());
  std::vector<int> here;
  for (int pid : launchers)
    if ((session > 0 && proc.stat(pid).session == session) ||
        (!directory.empty() && proc.working_directory(pid) == directory))
      here.push_back(pid);
  return here;
}

// "  4242  started 2026-05-04 09:12:03  /usr/bin/acc-launch --nproc_per_node 8 train.py", as a
// user picks a job: by its start and its command line.
std::string launcher_line(int pid, proc::Reader& proc) {
  std::string line = "  " + std::to_string(pid) + "  started ";
  const std::time_t started = static_cast<std::time_t>(proc.stat(pid).started);
  std::tm local{};
  char text[32] = "?";
  if (started > 0 && ::localtime_r(&started, &local))
    std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  line += std::string(text) + "  " + escape_control(join(proc.command_line(pid), " "));
  constexpr size_t kWidest = 200;
  if (line.size() > kWidest) line = line.substr(0, kWidest - 3) + "...";
  return line + "\n";
}

}  // namespace

int run_stacks_command(const std::vector<std::string>& args) {
  RealOs os;
  return run_stacks_command(args, os);
}

int run_stacks_command(const std::vector<std::string>& args, Os& os) {
  std::vector<std::string> pids;
  CLI::App app{
      "Print the stack of every worker of a running job (which goes on). Without a pid: the "
      "acc-launch launcher started from this session or this directory.",
      "acc-launch stacks"};
  app.add_option("LAUNCHER_PID", pids, "the pid of an acc-launch launcher");
  if (std::optional<int> exit_code = parse_command_line(app, args)) return *exit_code;
  std::vector<int> launchers;
  for (const std::string& arg : pids) {
    char* end = nullptr;
    const long pid = std::strtol(arg.c_str(), &end, 10);
    ACC_CHECK(*end == '\0' && pid > 0, ConfigError, "acc-launch stacks: '", arg,
              "' is not a process id: acc-launch stacks [LAUNCHER_PID...]");
    // SIGUSR2 ends a process that does not handle it: send it to our launchers only.
    ACC_CHECK(is_launcher(static_cast<int>(pid), os.proc()), ConfigError,
              "acc-launch stacks: ", pid,
              " is not a running acc-launch launcher of yours (see `pgrep -a acc-launch`)");
    launchers.push_back(static_cast<int>(pid));
  }
  if (launchers.empty()) {
    const std::vector<int> all = find_launchers(os.proc());
    ACC_CHECK(!all.empty(), ConfigError,
              "acc-launch stacks: no running acc-launch launcher of yours on this machine");
    launchers = launchers_here(all, os.proc());
    ACC_CHECK(!launchers.empty(), ConfigError,
              "acc-launch stacks: no acc-launch launcher was started from this session or this "
              "directory; name one of the ",
              all.size(),
              " on this machine: acc-launch stacks LAUNCHER_PID (see `pgrep -a acc-launch`)");
    if (launchers.size() > 1) {
      std::string list = "acc-launch stacks: " + std::to_string(launchers.size()) +
                         " acc-launch launchers were started from this session or this directory; "
                         "name one: acc-launch stacks LAUNCHER_PID\n";
      for (int pid : launchers) list += launcher_line(pid, os.proc());
      write_all(STDERR_FILENO, list);
      return 2;
    }
  }
  for (int pid : launchers) {
    if (launchers.size() > 1) write_all(STDOUT_FILENO, "== launcher " + std::to_string(pid) + "\n");
    write_all(STDOUT_FILENO, ask_for_report(pid, os));
  }
  return 0;
}

}  // namespace acc::launcher
