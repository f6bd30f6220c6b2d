#include "process/proc.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include "acc/common/files.h"

namespace acc::launcher::proc {
namespace {

std::string path(int pid, const std::string& file, int tid) {
  std::string p = "/proc/" + std::to_string(pid);
  if (tid > 0) p += "/task/" + std::to_string(tid);
  return p + "/" + file;
}

std::vector<int> numeric_entries(const std::string& directory) {
  std::vector<int> numbers;
  if (DIR* dir = ::opendir(directory.c_str())) {
    while (const dirent* entry = ::readdir(dir))
      if (const int n = std::atoi(entry->d_name); n > 0) numbers.push_back(n);
    ::closedir(dir);
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

// The machine's boot, in seconds since the epoch (btime of /proc/stat); 0 when not known.
long long boot_time() {
  static const long long kBoot = [] {
    const std::string text = read_file("/proc/stat");
    const size_t at = text.find("\nbtime ");
    return at == std::string::npos ? 0LL : std::atoll(text.c_str() + at + 7);
  }();
  return kBoot;
}

}  // namespace

std::string read(int pid, const std::string& file, int tid) {
  return read_file(path(pid, file, tid));
}

Stat stat(int pid, int tid) {
  Stat result;
  const std::string text = read(pid, "stat", tid);
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses; the fields follow the last ')'.
  // The stall watch reads this for every worker at every poll: split in place, no stream.
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return result;
  std::string_view rest(text);
  rest.remove_prefix(close + 2);
  // Fields 3 to 22 of proc(5): the state, the parent, ..., utime and stime, ..., starttime.
  constexpr size_t kFields = 20;
  std::vector<std::string> f;
  f.reserve(kFields);
  while (f.size() < kFields) {
    const size_t start = rest.find_first_not_of(" \n");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const size_t end = std::min(rest.find_first_of(" \n"), rest.size());
    f.emplace_back(rest.substr(0, end));
    rest.remove_prefix(end);
  }
  if (f.size() < kFields) return result;
  result.ok = true;
  result.state = f[0];
  result.parent = std::atoi(f[1].c_str());
  result.session = std::atoi(f[3].c_str());
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  result.cpu_seconds =
      (std::strtod(f[11].c_str(), nullptr) + std::strtod(f[12].c_str(), nullptr)) / ticks;
  if (f.size() == kFields) {
    result.start_ticks = std::strtoull(f[19].c_str(), nullptr, 10);
    if (boot_time() > 0)
      result.started =
          boot_time() + static_cast<long long>(static_cast<double>(result.start_ticks) / ticks);
  }
  return result;
}

std::string name(int pid) {
  std::string text = read(pid, "comm");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "?" : text;
}

std::vector<std::string> command_line(int pid) {
  std::vector<std::string> args;
  std::istringstream in(read(pid, "cmdline"));
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  return args;
}

std::string working_directory(int pid) {
  std::error_code error;
  return std::filesystem::read_symlink(path(pid, "cwd", 0), error).string();
}

bool catches_signal(int pid, int signal) {
  std::istringstream status(read(pid, "status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    const unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (mask >> (signal - 1)) & 1;
  }
  return false;
}

std::vector<int> processes() {
  return numeric_entries("/proc");
}

std::vector<int> threads(int pid) {
  return numeric_entries("/proc/" + std::to_string(pid) + "/task");
}

std::vector<std::pair<int, int>> descendants(int pid) {
  // One pass over /proc for every process's parent: /proc/PID/task/TID/children needs a kernel
  // option that not every kernel has.
  std::multimap<int, int> children;
  for (int child : processes())
    if (const int parent = stat(child).parent; parent > 0) children.emplace(parent, child);
  std::vector<std::pair<int, int>> found;
  std::vector<int> frontier = {pid};
  while (!frontier.empty()) {
    std::vector<int> next;
    for (int parent : frontier) {
      const auto [begin, end] = children.equal_range(parent);
      for (auto it = begin; it != end; ++it) {
        found.emplace_back(it->second, parent);
        next.push_back(it->second);
      }
    }
    frontier = std::move(next);
  }
  return found;
}

bool has_open(int pid, const std::string& path) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (int fd : numeric_entries(dir)) {
    char target[4096];
    const ssize_t n = ::readlink((dir + "/" + std::to_string(fd)).c_str(), target, sizeof(target));
    if (n > 0 && path.compare(0, std::string::npos, target, static_cast<size_t>(n)) == 0)
      return true;
  }
  return false;
}

std::vector<int> children(int pid) {
  std::istringstream in(read(pid, "children", pid));
  std::vector<int> found;
  for (int child; in >> child;) found.push_back(child);
  return found;
}

Reader& Reader::machine() {
  struct Machine final : Reader {
    Stat stat(int pid) override { return proc::stat(pid); }
    Stat thread_stat(int pid, int tid) override { return proc::stat(pid, tid); }
    std::string thread_file(int pid, int tid, const std::string& file) override {
      return proc::read(pid, file, tid);
    }
    std::vector<int> threads(int pid) override { return proc::threads(pid); }
    std::string name(int pid) override { return proc::name(pid); }
    std::vector<std::string> command_line(int pid) override { return proc::command_line(pid); }
    std::string working_directory(int pid) override { return proc::working_directory(pid); }
    bool catches_signal(int pid, int signal) override { return proc::catches_signal(pid, signal); }
    std::vector<int> processes() override { return proc::processes(); }
    std::vector<std::pair<int, int>> descendants(int pid) override {
      return proc::descendants(pid);
    }
    std::vector<int> children(int pid) override { return proc::children(pid); }
    long owner(int pid) override {
      struct stat st {};
      return ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0
                 ? static_cast<long>(st.st_uid)
                 : -1;
    }
    bool has_open(int pid, const std::string& path) override { return proc::has_open(pid, path); }
    std::string executable() override {
      std::error_code error;
      return std::filesystem::read_symlink("/proc/self/exe", error).string();
    }
    long long nr_open() override {
      long long most = 0;
      std::ifstream("/proc/sys/fs/nr_open") >> most;
      return std::max(most, 0LL);
    }
    double resident_bytes(int pid) override {
      long long size = 0, resident = 0;
      std::ifstream(path(pid, "statm", 0)) >> size >> resident;
      return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
    }
    double available_memory_bytes() override {
      std::ifstream meminfo("/proc/meminfo");
      std::string key, unit;
      long long kib = 0;
      while (meminfo >> key >> kib >> unit)
        if (key == "MemAvailable:") return static_cast<double>(kib) * 1024;
      return 0;
    }
    std::string pid_space() override {
      std::string boot = read_file("/proc/sys/kernel/random/boot_id");
      while (!boot.empty() && (boot.back() == '\n' || boot.back() == ' ')) boot.pop_back();
      std::error_code error;
      const std::string pids = std::filesystem::read_symlink("/proc/self/ns/pid", error).string();
      return boot.empty() || pids.empty() ? "" : boot + " " + pids;
    }
  };
  static Machine* const kMachine = new Machine;
  return *kMachine;
}

}  // namespace acc::launcher::proc
