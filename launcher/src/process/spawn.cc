#include "process/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <sstream>

#include "acc/common/error.h"
#include "acc/common/unique_fd.h"

namespace acc::launcher {
namespace {

// The descriptor a standby finds its channel on (ACC_STANDBY_FD says so too).
constexpr int kStandbyChannel = 3;

// Both ends owned: a failure anywhere before the hand-over closes them.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
  void open() {
    int fds[2];
    ACC_CHECK(::pipe2(fds, O_CLOEXEC) == 0, SystemError,
              "cannot create a pipe: ", std::strerror(errno));
    read.reset(fds[0]);
    write.reset(fds[1]);
  }
  // A pseudo-terminal instead: `read` its master, `write` its slave, raw output, `size` columns
  // and rows. Neither end makes it a controlling terminal (O_NOCTTY). Where none can be had
  // (no devpts), a pipe.
  void open_terminal(const winsize& size) {
    UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    char name[128];
    if (!master || ::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0 ||
        ::ptsname_r(master.get(), name, sizeof(name)) != 0)
      return open();
    UniqueFd slave(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!slave) return open();
    termios mode{};
    if (::tcgetattr(slave.get(), &mode) == 0) {
      mode.c_oflag &= ~static_cast<tcflag_t>(OPOST);  // bytes as written, as a pipe gives them
      ::tcsetattr(slave.get(), TCSANOW, &mode);
    }
    ::ioctl(master.get(), TIOCSWINSZ, &size);
    read = std::move(master);
    write = std::move(slave);
  }
};

// The child's report of what failed: vfork shares our memory, and we resume only once the child
// has exec'd or exited, so a store into our frame is the whole message (glibc's posix_spawn
// does the same; a status pipe cost three system calls and two descriptors per worker).
[[noreturn]] void child_fail(volatile int* report, int error) {
  *report = error;
  ::_exit(127);
}

// A CPU mask sized for the highest CPU asked for, built before vfork (the child may not
// allocate).
struct CpuMask {
  std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> set{nullptr, [](cpu_set_t* s) { CPU_FREE(s); }};
  size_t size = 0;
  explicit CpuMask(const std::vector<int>& cpus) {
    if (cpus.empty()) return;
    const int count = *std::max_element(cpus.begin(), cpus.end()) + 1;
    set.reset(CPU_ALLOC(count));
    ACC_CHECK(set != nullptr, LaunchError, "cannot allocate a CPU mask for ", count, " CPUs");
    size = CPU_ALLOC_SIZE(count);
    CPU_ZERO_S(size, set.get());
    for (int cpu : cpus) CPU_SET_S(cpu, size, set.get());
  }
};

[[noreturn]] void run_child(const SpawnRequest& request, char* const* argv, char* const* envp,
                            pid_t launcher, const Pipe& out, const Pipe& err, volatile int* report,
                            const CpuMask& cpus) {
  ::setpgid(0, 0);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(report, errno);
  if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl took hold
  // The launcher blocks the signals it reads through signalfd and ignores SIGPIPE; a worker
  // must start with the defaults.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  if (request.stdin_fd >= 0 && ::dup2(request.stdin_fd, STDIN_FILENO) < 0)
    child_fail(report, errno);
  if (request.capture_stdout && ::dup2(out.write.get(), STDOUT_FILENO) < 0)
    child_fail(report, errno);
  if (request.capture_stderr && ::dup2(err.write.get(), STDERR_FILENO) < 0)
    child_fail(report, errno);
  for (int fd : {STDOUT_FILENO, STDERR_FILENO})
    if (request.output_fd >= 0 && ::dup2(request.output_fd, fd) < 0) child_fail(report, errno);
  // dup2 onto itself keeps close-on-exec: cleared by hand then.
  if (request.channel_fd == kStandbyChannel && ::fcntl(kStandbyChannel, F_SETFD, 0) != 0)
    child_fail(report, errno);
  if (request.channel_fd >= 0 && request.channel_fd != kStandbyChannel &&
      ::dup2(request.channel_fd, kStandbyChannel) < 0)
    child_fail(report, errno);
  // Before exec, so that the worker and every thread it starts inherit it (C++ workers too).
  // A negative errno tells await_exec that the binding, not the exec, failed.
  if (cpus.set && ::sched_setaffinity(0, cpus.size, cpus.set.get()) != 0)
    child_fail(report, -errno);
  ::execve(request.executable.c_str(), argv, envp);
  child_fail(report, errno);
}

}  // namespace

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

std::string resolve_executable(const std::string& program, const std::string& path) {
  auto runnable = [](const std::string& candidate) {
    struct stat info {};
    return ::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
           ::access(candidate.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    ACC_CHECK(runnable(program), LaunchError, "cannot run ", program, ": ",
              ::access(program.c_str(), F_OK) == 0 ? "not an executable file" : "no such file");
    return program;
  }
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (runnable(candidate)) return candidate;
  }
  throw LaunchError("cannot run " + program + ": not found in PATH");
}

namespace {

// The captured streams `request` asks for, opened.
void open_streams(const SpawnRequest& request, Pipe& out, Pipe& err) {
  if (request.capture_stdout && request.stdout_terminal)
    out.open_terminal(*request.stdout_terminal);
  else if (request.capture_stdout)
    out.open();
  if (request.capture_stderr && request.stderr_terminal)
    err.open_terminal(*request.stderr_terminal);
  else if (request.capture_stderr)
    err.open();
}

// The read ends of the streams, non-blocking, as the process's.
void keep_read_ends(Pipe& out, Pipe& err, SpawnedProcess& process) {
  // A read end's status flags are O_RDONLY alone (O_CLOEXEC is a descriptor flag).
  for (const UniqueFd* fd : {&out.read, &err.read})
    if (*fd) ::fcntl(fd->get(), F_SETFL, O_RDONLY | O_NONBLOCK);
  process.stdout_fd = out.read.release();
  process.stderr_fd = err.read.release();
}

}  // namespace

SpawnedProcess spawn_process(const SpawnRequest& request) {
  const CpuMask cpus(request.cpus);
  Pipe out, err;
  open_streams(request, out, err);
  std::vector<char*> argv = c_strings(request.argv);
  std::vector<char*> envp = c_strings(request.env);
  const pid_t launcher = ::getpid();

  // vfork: no copy of the launcher's page tables (the child only makes system calls until it
  // execs, on its own stack frame); the launcher resumes once the child has exec'd or failed.
  volatile int child_error = 0;
  const pid_t pid = ::vfork();
  if (pid == 0)
    run_child(request, argv.data(), envp.data(), launcher, out, err, &child_error, cpus);
  const int error = errno;
  out.write.reset();
  err.write.reset();
  if (pid < 0) throw SystemError(std::string("cannot fork a worker: ") + std::strerror(error));
  // Also set here so that the group exists before we might signal it.
  ::setpgid(pid, pid);
  SpawnedProcess process;
  process.pid = pid;
  keep_read_ends(out, err, process);
  process.exec_error = child_error;
  process.name = request.argv.front();
  return process;
}

SpawnedProcess hand_over(const SpawnRequest& request, pid_t pid, int channel) {
  Pipe out, err;
  open_streams(request, out, err);
  // The environment, "KEY=VALUE" entries each ended by a NUL; the three descriptors beside it.
  std::string text;
  for (const std::string& entry : request.env) text.append(entry).push_back('\0');
  const int fds[3] = {request.stdin_fd >= 0 ? request.stdin_fd : STDIN_FILENO,
                      request.capture_stdout ? out.write.get() : STDOUT_FILENO,
                      request.capture_stderr ? err.write.get() : STDERR_FILENO};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(fds))] = {};
  iovec data{text.data(), text.size()};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(header), fds, sizeof(fds));
  // A channel whose buffer is empty (the standby sends nothing more) takes it whole at once.
  ACC_CHECK(::sendmsg(channel, &message, MSG_DONTWAIT | MSG_NOSIGNAL) ==
                static_cast<ssize_t>(text.size()),
            SystemError, "cannot hand the worker to its standby: ", std::strerror(errno));
  SpawnedProcess process;
  process.pid = pid;
  keep_read_ends(out, err, process);
  process.name = request.argv.front();
  return process;
}

void await_exec(SpawnedProcess& process) {
  const int child_errno = process.exec_error;
  ACC_CHECK(child_errno >= 0, LaunchError, "cannot bind ", process.name,
            " to its CPUs: ", std::strerror(-child_errno));
  ACC_CHECK(child_errno == 0, LaunchError, "cannot run ", process.name, ": ",
            std::strerror(child_errno));
}

}  // namespace acc::launcher
