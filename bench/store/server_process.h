#pragma once

// A store server in a process of its own, for store_bench: its CPU time (utime + stime from
// /proc/<pid>/stat) is then the server's alone. Every wait is bounded: a server that does not
// report its port in time, or does not exit when told, is killed, so the bench cannot hang on one.

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace acc::bench {

// utime + stime of a process (all its threads), in seconds, from /proc/<pid>/stat (fields 14 and
// 15, counted after the command name, which may hold spaces and parentheses).
inline double process_cpu_seconds(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::size_t end_of_name = stat.rfind(')');
  if (end_of_name == std::string::npos) return 0;
  const char* p = stat.c_str() + end_of_name + 1;
  // Fields 3 (state) to 13 come first: skip 11 of them.
  for (int field = 3; field <= 13 && p; ++field) p = std::strchr(p + 1, ' ');
  if (!p) return 0;
  char* next = nullptr;
  const unsigned long long utime = std::strtoull(p, &next, 10);
  const unsigned long long stime = std::strtoull(next, nullptr, 10);
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

class ServerProcess {
 public:
  // Forks; the child runs `serve` (which starts a server and returns its port) and lives until
  // this object is destroyed. Fork before the bench starts any thread. Exits the bench with one
  // line on stderr when the child reports no port within `start_timeout`.
  ServerProcess(std::string name, const std::function<int()>& serve,
                std::chrono::seconds start_timeout = std::chrono::seconds(60))
      : name_(std::move(name)) {
    int port_pipe[2], control[2];
    if (::pipe(port_pipe) != 0 || ::pipe(control) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::close(port_pipe[0]);
      ::close(control[1]);
      // The other servers' control pipes: holding them would keep those servers alive.
      for (int fd : control_fds()) ::close(fd);
      const int port = serve();
      [[maybe_unused]] auto n = ::write(port_pipe[1], &port, sizeof(port));
      char byte;
      while (::read(control[0], &byte, 1) > 0) {
      }
      ::_exit(0);  // the server's threads die with the process
    }
    ::close(port_pipe[1]);
    ::close(control[0]);
    control_ = control[1];
    control_fds().push_back(control_);
    pollfd ready{port_pipe[0], POLLIN, 0};
    const int waited = ::poll(&ready, 1, static_cast<int>(start_timeout.count() * 1000));
    if (waited != 1 || ::read(port_pipe[0], &port_, sizeof(port_)) != sizeof(port_)) {
      std::fprintf(stderr, "store_bench: timed out: server '%s' did not start in %lld s\n",
                   name_.c_str(), static_cast<long long>(start_timeout.count()));
      ::kill(pid_, SIGKILL);
      std::_Exit(124);
    }
    ::close(port_pipe[0]);
  }

  // Tells the child to exit, and kills it if it has not within 5 s.
  ~ServerProcess() {
    ::close(control_);
    std::erase(control_fds(), control_);
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& name() const { return name_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  static std::vector<int>& control_fds() {
    static std::vector<int> fds;
    return fds;
  }

  std::string name_;
  pid_t pid_ = -1;
  int port_ = 0;
  int control_ = -1;
};

}  // namespace acc::bench
