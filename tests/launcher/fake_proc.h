#pragma once

// A /proc whose processes a test sets: each one's stat line (state, parent, session, CPU time,
// start), threads, name, command line, working directory, owner, the signals it catches and the
// files of its threads (wchan, comm). A pid the test has not set is gone, as on the machine: it
// reads as empty. Children and descendants follow the parents the test sets, as the machine's walk
// does.

#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "process/proc.h"

namespace acc::launcher::testing {

class FakeProc final : public proc::Reader {
 public:
  struct Process {
    proc::Stat stat;
    std::string name = "python3";
    std::vector<std::string> command_line;
    std::string working_directory = "/home/user";
    long owner = static_cast<long>(::getuid());
    std::set<int> catches;                                           // signals it has a handler for
    std::map<int, std::map<std::string, std::string>> thread_files;  // tid -> file -> text
    std::set<std::string> open_files;                                // has_open()
  };

  // Sets (or replaces the stat line of) process `pid`: alive, in `state`, with `cpu_seconds`.
  Process& set(int pid, const std::string& state = "S", double cpu_seconds = 0, int parent = 1) {
    Process& p = processes_[pid];
    p.stat.ok = true;
    p.stat.state = state;
    p.stat.parent = parent;
    p.stat.cpu_seconds = cpu_seconds;
    return p;
  }
  void remove(int pid) { processes_.erase(pid); }
  Process& at(int pid) { return processes_.at(pid); }

  int looks = 0;  // stat() calls: each is a /proc read on the machine
  std::string binary = "/opt/acc-launch/bin/acc-launch";
  long long open_files = 1048576;
  std::string space = "boot-1 pid:[4026531836]";  // pid_space()
  std::map<int, double> resident;                 // resident_bytes()
  double available_memory = 64e9;                 // available_memory_bytes()

  // --- proc::Reader ----------------------------------------------------------------------------

  proc::Stat stat(int pid) override {
    ++looks;
    const Process* p = find(pid);
    return p ? p->stat : proc::Stat{};
  }
  proc::Stat thread_stat(int pid, int tid) override {
    const Process* p = find(pid);
    return p && p->thread_files.count(tid) ? p->stat : proc::Stat{};
  }
  std::string thread_file(int pid, int tid, const std::string& file) override {
    const Process* p = find(pid);
    if (!p || !p->thread_files.count(tid)) return "";
    const auto& files = p->thread_files.at(tid);
    const auto found = files.find(file);
    return found == files.end() ? "" : found->second;
  }
  std::vector<int> threads(int pid) override {
    std::vector<int> tids;
    if (const Process* p = find(pid))
      for (const auto& [tid, files] : p->thread_files) tids.push_back(tid);
    return tids;
  }
  std::string name(int pid) override {
    const Process* p = find(pid);
    return p ? p->name : "?";
  }
  std::vector<std::string> command_line(int pid) override {
    const Process* p = find(pid);
    return p ? p->command_line : std::vector<std::string>{};
  }
  std::string working_directory(int pid) override {
    const Process* p = find(pid);
    return p ? p->working_directory : "";
  }
  bool catches_signal(int pid, int signal) override {
    const Process* p = find(pid);
    return p && p->catches.count(signal);
  }
  std::vector<int> processes() override {
    std::vector<int> pids;
    for (const auto& [pid, p] : processes_) pids.push_back(pid);
    return pids;
  }
  std::vector<int> children(int pid) override {
    std::vector<int> found;
    for (const auto& [child, p] : processes_)
      if (p.stat.parent == pid) found.push_back(child);
    return found;
  }
  std::vector<std::pair<int, int>> descendants(int pid) override {
    std::vector<std::pair<int, int>> found;
    std::vector<int> frontier = {pid};
    while (!frontier.empty()) {
      std::vector<int> next;
      for (int parent : frontier)
        for (int child : children(parent)) {
          found.emplace_back(child, parent);
          next.push_back(child);
        }
      frontier = std::move(next);
    }
    return found;
  }
  long owner(int pid) override {
    const Process* p = find(pid);
    return p ? p->owner : -1;
  }
  bool has_open(int pid, const std::string& path) override {
    const auto it = processes_.find(pid);
    return it != processes_.end() && it->second.open_files.count(path) > 0;
  }
  std::string executable() override { return binary; }
  long long nr_open() override { return open_files; }
  std::string pid_space() override { return space; }
  double resident_bytes(int pid) override { return resident.count(pid) ? resident.at(pid) : 0; }
  double available_memory_bytes() override { return available_memory; }

 private:
  const Process* find(int pid) const {
    const auto found = processes_.find(pid);
    return found == processes_.end() ? nullptr : &found->second;
  }

  std::map<int, Process> processes_;
};

}  // namespace acc::launcher::testing
