#include "commands/launchers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "commands/subcommands.h"

namespace acc::launcher {

bool owned_by_me(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && st.st_uid == ::getuid();
}

bool is_launcher(int pid, proc::Reader& proc) {
  if (pid == ::getpid() || proc.owner(pid) != static_cast<long>(::getuid())) return false;
  const std::vector<std::string> args = proc.command_line(pid);
  if (args.empty()) return false;
  const std::string& program = args[0];
  const size_t slash = program.rfind('/');
  if ((slash == std::string::npos ? program : program.substr(slash + 1)) != "acc-launch")
    return false;
  // A subcommand's process runs no job (`acc-launch top`); a PROGRAM's, or `launch`'s, does.
  const Subcommand* command = args.size() < 2 ? nullptr : find_subcommand(args[1]);
  return !command || command->runs_a_job;
}

std::vector<int> find_launchers(proc::Reader& proc) {
  std::vector<int> found;
  for (int pid : proc.processes())
    if (is_launcher(pid, proc)) found.push_back(pid);
  std::vector<int> launchers;
  for (int pid : found)
    if (std::find(found.begin(), found.end(), proc.stat(pid).parent) == found.end())
      launchers.push_back(pid);
  std::sort(launchers.begin(), launchers.end());
  return launchers;
}

}  // namespace acc::launcher
