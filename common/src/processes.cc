#include "acc/common/processes.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "acc/common/error.h"
#include "acc/common/files.h"

namespace acc::processes {

std::string own_executable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  ACC_CHECK(n > 0, SystemError, "cannot read /proc/self/exe: ", std::strerror(errno));
  return std::string(path, static_cast<size_t>(n));
}

std::vector<std::string> own_arguments() {
  const std::string cmdline = read_file("/proc/self/cmdline");
  std::vector<std::string> args;
  for (size_t start = 0; start < cmdline.size();) {
    const size_t end = cmdline.find('\0', start);
    args.push_back(cmdline.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (!args.empty()) args.erase(args.begin());
  return args;
}

int own_thread_count() {
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return 0;
  int threads = 0;
  while (const dirent* entry = ::readdir(tasks))
    if (entry->d_name[0] != '.') ++threads;
  ::closedir(tasks);
  return threads;
}

bool exists(int pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

}  // namespace acc::processes
