#include "launcher_harness.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace acc::testing {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Orphans of the processes under test come to the test process, which can then prove that
// they are gone rather than lost to init.
[[maybe_unused]] const bool kSubreaper = [] {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

// A variable of the machine running the tests that would change what the launcher does.
bool leaks(const std::string& name) {
  for (const char* prefix :
       {"SLURM_", "OMPI_", "PMI_", "PMIX_", "PET_", "KUBERNETES_", "SKYPILOT_"})
    if (name.rfind(prefix, 0) == 0) return true;
  for (const char* exact : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                            "HF_HOME", "TORCHELASTIC_HEALTH_CHECK_PORT"})
    if (name == exact) return true;
  return false;
}

pid_t spawn(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
            int out_fd, int err_fd, int in_fd = -1) {
  std::vector<std::string> full = {launcher_binary()};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (!env.count(key) && !leaks(key)) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : env)
    if (!v.empty()) env_strings.push_back(k + "=" + v);  // empty: unset
  // A developer's own `accelerate config` file must not leak into the tests.
  if (!env.count("HF_HOME")) env_strings.push_back("HF_HOME=/nonexistent/acc-launch-tests");
  std::vector<char*> argv, envp;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // a signal we send the launcher reaches it alone
    if (in_fd >= 0) ::dup2(in_fd, STDIN_FILENO);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

int decode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t size = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string launcher_binary() {
  return ACC_LAUNCH_BIN;
}
std::string worker_binary() {
  return ACC_TEST_WORKER_BIN;
}

LaunchRun run_launcher(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& extra_env,
                       std::chrono::seconds timeout) {
  return run_launcher(args, extra_env, "", timeout);
}

LaunchRun run_launcher(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& extra_env,
                       const std::string& input, std::chrono::seconds timeout) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe");
  // stdin from a file, so that input of any size never blocks the test.
  const TempDir io;
  const int in = ::open(io.file("stdin", input).c_str(), O_RDONLY | O_CLOEXEC);
  const auto start = Clock::now();
  const pid_t pid = spawn(args, extra_env, out[1], err[1], in);
  ::close(in);
  ::close(out[1]);
  ::close(err[1]);
  LaunchRun run;
  std::string* sinks[] = {&run.out, &run.err};
  pollfd fds[] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  const auto deadline = start + timeout;
  while (open_fds > 0 && Clock::now() < deadline) {
    ::poll(fds, 2, 100);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buffer[65536];
      const ssize_t got = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (got > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(got));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  if (open_fds > 0) {
    ::kill(pid, SIGKILL);
    for (auto& f : fds)
      if (f.fd >= 0) ::close(f.fd);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  run.exit_code = decode(status);
  return run;
}

pid_t start_launcher(const std::vector<std::string>& args, const std::string& dir) {
  return start_launcher(args, dir, {});
}

pid_t start_launcher(const std::vector<std::string>& args, const std::string& dir,
                     const std::map<std::string, std::string>& extra_env) {
  const int out = ::open((dir + "/launcher.out").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  const int err = ::open((dir + "/launcher.err").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  const pid_t pid = spawn(args, extra_env, out, err);
  ::close(out);
  ::close(err);
  return pid;
}

int wait_launcher(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return decode(status);
}

bool wait_for_file(const std::string& path, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!fs::exists(path)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

namespace {
// The whole file; "" when it cannot be read. A /proc file of a process that exited after it was
// listed fails mid-read (ESRCH), which libstdc++ reports by throwing from the stream buffer.
std::string read_all(const fs::path& path) {
  try {
    std::ifstream file(path);
    return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    return "";
  }
}

template <typename Predicate>
std::vector<pid_t> processes_where(Predicate keep) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_all(entry.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    std::istringstream fields(stat.substr(close + 2));
    char state = 0;
    pid_t parent = 0;
    fields >> state >> parent;
    if (keep(entry.path(), state, parent)) found.push_back(std::stoi(name));
  }
  return found;
}
}  // namespace

std::vector<pid_t> processes_mentioning(const std::string& marker) {
  return processes_where([&](const fs::path& dir, char state, pid_t) {
    return state != 'Z' && read_all(dir / "cmdline").find(marker) != std::string::npos;
  });
}

std::vector<pid_t> zombie_children() {
  const pid_t self = ::getpid();
  return processes_where(
      [&](const fs::path&, char state, pid_t parent) { return state == 'Z' && parent == self; });
}

void reap_exited_children() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

bool reap_until_no_children(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const pid_t got = ::waitpid(-1, nullptr, WNOHANG);
    if (got < 0 && errno == ECHILD) return true;
    if (got > 0) continue;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string make_temp_dir() {
  std::string pattern = (fs::temp_directory_path() / "acc-launch-test-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp");
  return pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string TempDir::file(const std::string& name, const std::string& text) const {
  const std::string path = path_ + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<TorchPython> torch_pythons() {
  return {{"torch1_13", "/usr/bin/python3"}, {"torch2", torch2_python()}};
}

void PrintTo(const TorchPython& peer, std::ostream* os) {
  *os << peer.name << " (" << (peer.python.empty() ? "none" : peer.python) << ")";
}

std::string torch2_python() {
  return ACC_TORCH2_PYTHON;
}

bool python_has_torch(const std::string& python) {
  static std::map<std::string, bool> known;
  if (python.empty()) return false;
  auto it = known.find(python);
  if (it == known.end()) {
    const std::string probe = "'" + python + "' -c 'import torch.distributed' >/dev/null 2>&1";
    it = known.emplace(python, std::system(probe.c_str()) == 0).first;
  }
  return it->second;
}

std::string shared_configs() {
  return std::string(ACC_SOURCE_DIR) + "/../shared/accelerate-configs";
}

DryRun parse_dry_run(const std::string& out) {
  DryRun d;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# acc-launch dry run:", 0) == 0) {
      d.header = line;
    } else if (line.rfind("# rank ", 0) == 0) {
      d.workers.emplace_back();
    } else if (line.rfind("command:", 0) == 0) {
      d.commands.push_back(line);
    } else if (!d.workers.empty() && line.find('=') != std::string::npos) {
      const size_t eq = line.find('=');
      d.workers.back()[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  return d;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> worker(std::vector<std::string> launcher_args,
                                const std::vector<std::string>& worker_args) {
  launcher_args.push_back("--no_python");
  launcher_args.push_back(worker_binary());
  launcher_args.insert(launcher_args.end(), worker_args.begin(), worker_args.end());
  return launcher_args;
}

void expect_nothing_left(const std::string& marker) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!processes_mentioning(marker).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(processes_mentioning(marker).empty()) << "processes left running for " << marker;
  EXPECT_TRUE(zombie_children().empty()) << "the launcher left unreaped children";
  reap_exited_children();
}

std::string read_text(const std::string& path) {
  return read_all(path);
}

}  // namespace acc::testing
