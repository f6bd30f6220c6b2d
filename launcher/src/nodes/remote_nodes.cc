#include "nodes/remote_nodes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "acc/common/error.h"
#include "acc/common/unique_fd.h"
#include "acc/launcher/nodes/cluster.h"
#include "acc/launcher/nodes/fanout.h"
#include "acc/launcher/output/line_splitter.h"
#include "acc/launcher/plan/option_sources.h"
#include "output/console.h"
#include "output/log.h"
#include "process/spawn.h"

namespace acc::launcher {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Past the nodes' own --shutdown_timeout: how long the head waits for them to stop by
// themselves before it drops their connections.
constexpr double kStopGraceSeconds = 5;
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// ~/.acc-launch_env, then ./.acc-launch_env (the later wins, as with DeepSpeed's).
std::vector<std::pair<std::string, std::string>> env_file_entries(
    const std::map<std::string, std::string>& environment) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::vector<std::string> paths;
  if (auto home = environment.find("HOME"); home != environment.end())
    paths.push_back(home->second + "/.acc-launch_env");
  paths.push_back(".acc-launch_env");
  for (const std::string& path : paths)
    if (auto text = read_file(path))
      for (auto& entry : parse_env_file(*text, path)) entries.push_back(std::move(entry));
  return entries;
}

std::string new_rdzv_id() {
  std::random_device random;
  char id[32];
  std::snprintf(id, sizeof(id), "acc-%08x", static_cast<unsigned>(random()));
  return id;
}

std::vector<std::string> program_of(const LaunchOptions& options) {
  std::vector<std::string> program = {options.program};
  program.insert(program.end(), options.program_args.begin(), options.program_args.end());
  return program;
}

FanoutJob make_job(const LaunchOptions& options, const std::vector<RemoteNode>& nodes,
                   const HostInfo& host) {
  const std::map<std::string, std::string>& environment = host.environment;
  FanoutJob job;
  job.launcher_path = fs::read_symlink("/proc/self/exe").string();
  job.working_dir = host.cwd;
  job.nnodes = static_cast<int>(nodes.size());
  auto given = [&](const char* name) { return options.source_of(name) == Source::kCommandLine; };
  job.master_addr = given("master_addr") ? options.master_addr : nodes.front().host;
  job.rdzv_id = given("rdzv_id") ? options.rdzv_id : new_rdzv_id();
  // The port every node agrees on without a word: the one named (option_sources.h), else derived
  // from the job id, as a free port (0) cannot be agreed on.
  const std::optional<int> named = named_store_port(options);
  job.master_port = named && *named != 0 ? *named : port_for_job(job.rdzv_id);
  job.node_slots = node_slots_of(nodes);
  job.own_prefix = given("log_line_prefix_template");
  job.env = env_to_pass(environment, options.env_passthrough, env_file_entries(environment));
  job.program = program_of(options);
  job.forwarded_args = forwarded_launcher_args(options);
  return job;
}

std::vector<RemoteNode> nodes_of(const LaunchOptions& options) {
  return select_nodes(read_hostfile(options.hostfile), options.include_hosts,
                      options.exclude_hosts);
}

int exit_status_of(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

// Reads what is in a non-blocking pipe now; false at its end.
bool read_available(int fd, std::string& into) {
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got > 0) {
      into.append(buffer, static_cast<size_t>(got));
      continue;
    }
    return got < 0 && (errno == EAGAIN || errno == EINTR);
  }
}

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const size_t newline = text.find_last_of('\n');
  return newline == std::string::npos ? text : text.substr(newline + 1);
}

// The head's stop signals (and SIGCHLD) blocked and read from a signalfd, from before the probe
// to the end of the job, so that a stop at any stage is handled, not the default death that would
// leave the ssh processes (each in its own process group) behind.
UniqueFd take_stop_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  for (int s : kStopSignals) sigaddset(&mask, s);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  UniqueFd fd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  ACC_CHECK(fd, LaunchError, "signalfd: ", std::strerror(errno));
  ::signal(SIGPIPE, SIG_IGN);
  return fd;
}

// The stop signal waiting on `signal_fd`, 0 if none (SIGCHLD is read and dropped: the probes
// are reaped by pid).
int stop_signal_from(int signal_fd) {
  signalfd_siginfo info{};
  int stop = 0;
  while (::read(signal_fd, &info, sizeof(info)) == sizeof(info))
    if (info.ssi_signo != SIGCHLD && stop == 0) stop = static_cast<int>(info.ssi_signo);
  return stop;
}

// `ssh host true` on every host at once; the first host that fails is named in the error. A
// stop signal kills every probe, reaps it and throws InterruptedError (exit 128 + signal).
void probe_hosts(const std::vector<RemoteNode>& nodes, const SshSettings& ssh,
                 const std::string& ssh_path, const std::vector<std::string>& env, int signal_fd) {
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  std::vector<SpawnedProcess> probes;
  for (const RemoteNode& node : nodes) {
    SpawnRequest request;
    request.executable = ssh_path;
    request.argv = ssh_argv(ssh, node.host, "true");
    request.env = env;
    request.capture_stdout = false;
    request.stdin_fd = dev_null.get();
    probes.push_back(spawn_process(request));
    await_exec(probes.back());
  }
  dev_null.reset();
  std::optional<std::string> error;
  for (size_t i = 0; i < probes.size(); ++i) {
    std::string said;
    const UniqueFd err(probes[i].stderr_fd);
    pollfd fds[2] = {{err.get(), POLLIN, 0}, {signal_fd, POLLIN, 0}};
    while (read_available(err.get(), said)) {
      ::poll(fds, 2, -1);
      if (const int sig = (fds[1].revents & POLLIN) ? stop_signal_from(signal_fd) : 0) {
        for (size_t j = i; j < probes.size(); ++j) {
          ::kill(-probes[j].pid, SIGKILL);
          ::waitpid(probes[j].pid, nullptr, 0);
          if (j > i) ::close(probes[j].stderr_fd);
        }
        throw InterruptedError(sig, std::string("stopped by SIG") + sigabbrev_np(sig) +
                                        " while probing the hosts over ssh");
      }
    }
    int status = 0;
    ::waitpid(probes[i].pid, &status, 0);
    if (status != 0 && !error)
      error = "cannot reach host " + nodes[i].host + " over ssh: " +
              (said.empty() ? "ssh exited " + std::to_string(exit_status_of(status))
                            : last_line(said)) +
              " (check it with: ssh " + nodes[i].host + " true)";
  }
  if (error) throw NetworkError(*error);
}

// One node's ssh: its stdin (closed to stop it), its output relayed line by line.
struct NodeProcess {
  RemoteNode node;
  pid_t pid = -1;
  UniqueFd stdin_fd;
  UniqueFd out_fd;
  UniqueFd err_fd;
  bool running = true;
  int status = 0;
  std::unique_ptr<LineSplitter> out_lines;
  std::unique_ptr<LineSplitter> err_lines;
};

// Lines of a node's launcher that its workers did not write get the host's name too.
std::unique_ptr<LineSplitter> relay(const std::string& host, int console) {
  const std::string worker_prefix = "[" + host + " ";
  return std::make_unique<LineSplitter>([=](std::string_view line) {
    std::string text;
    if (line.rfind(worker_prefix, 0) != 0) text = "[" + host + "]: ";
    text += line;
    if (text.back() != '\n' && text.back() != '\r') text += '\n';
    write_all(console, text);
  });
}

class RemoteJob {
 public:
  RemoteJob(std::vector<RemoteNode> nodes, FanoutJob job, SshSettings ssh, double shutdown_timeout,
            UniqueFd signal_fd)
      : nodes_(std::move(nodes)),
        job_(std::move(job)),
        ssh_(std::move(ssh)),
        stop_grace_(shutdown_timeout + kStopGraceSeconds),
        signal_fd_(std::move(signal_fd)) {}

  int run(const std::string& ssh_path, const std::vector<std::string>& env) {
    for (const RemoteNode& node : nodes_) start(node, ssh_path, env);
    while (any_running()) wait_for_events();
    for (auto& p : processes_) {
      drain(p->out_fd, *p->out_lines);
      drain(p->err_fd, *p->err_lines);
    }
    if (interrupted_by_) {
      notice(std::string("stopped by ") + sigabbrev_np(interrupted_by_) + "; stopped every node");
      return 128 + interrupted_by_;
    }
    if (!root_cause_) return 0;
    const int status = exit_status_of(root_cause_->status);
    log::error("node " + std::to_string(root_cause_->node.node_rank) + " (" +
               root_cause_->node.host + ") failed" +
               (status == 255 ? " or its ssh connection broke (ssh exited 255)"
                              : " with exit status " + std::to_string(status)) +
               "; stopped the other nodes");
    return status;
  }

 private:
  void notice(const std::string& message) { log::info(message); }

  void start(const RemoteNode& node, const std::string& ssh_path,
             const std::vector<std::string>& env) {
    int fds[2];
    ACC_CHECK(::pipe2(fds, O_CLOEXEC) == 0, LaunchError, "pipe: ", std::strerror(errno));
    UniqueFd stdin_read(fds[0]);
    UniqueFd stdin_write(fds[1]);
    SpawnRequest request;
    request.executable = ssh_path;
    request.argv = ssh_argv(ssh_, node.host, node_shell_command(job_, node));
    request.env = env;
    request.stdin_fd = stdin_read.get();
    SpawnedProcess spawned = spawn_process(request);
    stdin_read.reset();
    auto process = std::make_unique<NodeProcess>();
    process->node = node;
    process->pid = spawned.pid;
    process->stdin_fd = std::move(stdin_write);
    process->out_fd.reset(spawned.stdout_fd);
    process->err_fd.reset(spawned.stderr_fd);
    process->out_lines = relay(node.host, STDOUT_FILENO);
    process->err_lines = relay(node.host, STDERR_FILENO);
    processes_.push_back(std::move(process));
    await_exec(spawned);
  }

  bool any_running() const {
    for (const auto& p : processes_)
      if (p->running) return true;
    return false;
  }

  void wait_for_events() {
    std::vector<pollfd> fds{{signal_fd_.get(), POLLIN, 0}};
    std::vector<std::pair<UniqueFd*, LineSplitter*>> streams;
    for (auto& p : processes_) {
      for (auto [fd, lines] :
           {std::pair{&p->out_fd, p->out_lines.get()}, std::pair{&p->err_fd, p->err_lines.get()}}) {
        if (!*fd) continue;
        fds.push_back({fd->get(), POLLIN, 0});
        streams.emplace_back(fd, lines);
      }
    }
    int timeout = -1;
    if (stopping_ && !killed_) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(kill_deadline_ - Clock::now());
      timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
      throw LaunchError(std::string("poll: ") + std::strerror(errno));
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [fd, lines] = streams[i - 1];
      std::string got;
      const bool open = read_available(fd->get(), got);
      lines->feed(got);
      if (!open) {
        lines->finish();
        fd->reset();
      }
    }
    if (fds[0].revents & POLLIN) handle_signals();
    if (stopping_ && !killed_ && Clock::now() >= kill_deadline_) {
      notice("nodes still running " + std::to_string(static_cast<int>(stop_grace_)) +
             " s after they were told to stop; dropping their connections");
      kill_all();
    }
  }

  void handle_signals() {
    signalfd_siginfo info{};
    while (::read(signal_fd_.get(), &info, sizeof(info)) == sizeof(info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) {
        reap();
      } else if (stopping_) {
        kill_all();  // asked twice: stop waiting
      } else {
        interrupted_by_ = sig;
        begin_stop();
      }
    }
  }

  void reap() {
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      for (auto& p : processes_) {
        if (p->pid != pid || !p->running) continue;
        p->running = false;
        p->status = status;
        if (status != 0 && !stopping_) {
          root_cause_ = p.get();
          begin_stop();
        }
      }
    }
  }

  // End of file on every node's stdin: each stops its workers and exits (--stop_on_stdin_eof).
  void begin_stop() {
    stopping_ = true;
    kill_deadline_ =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(stop_grace_ * 1000));
    for (auto& p : processes_) p->stdin_fd.reset();
  }

  // Ending ssh drops the connection: the remote launcher still sees the end of its stdin.
  void kill_all() {
    killed_ = true;
    for (auto& p : processes_)
      if (p->running) ::kill(-p->pid, SIGKILL);
  }

  static void drain(UniqueFd& fd, LineSplitter& lines) {
    if (!fd) return;
    std::string got;
    read_available(fd.get(), got);
    lines.feed(got);
    lines.finish();
    fd.reset();
  }

  std::vector<RemoteNode> nodes_;
  FanoutJob job_;
  SshSettings ssh_;
  double stop_grace_;
  UniqueFd signal_fd_;
  std::vector<std::unique_ptr<NodeProcess>> processes_;
  NodeProcess* root_cause_ = nullptr;
  bool stopping_ = false;
  bool killed_ = false;
  int interrupted_by_ = 0;
  Clock::time_point kill_deadline_;
};

// A remote launcher: end of file on stdin means the head stopped us, or is gone. A thread with
// every signal blocked waits for it and raises SIGTERM at the process, which the agent reads from
// its signalfd: SIGTERM to the workers (the signal a training script checkpoints on, as when
// another worker fails), SIGKILL after --shutdown_timeout, exit 143.
void start_stdin_watch() {
  std::thread([] {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
    char buffer[4096];
    for (;;) {
      const ssize_t got = ::read(STDIN_FILENO, buffer, sizeof(buffer));
      if (got == 0 || (got < 0 && errno != EINTR)) break;
    }
    ::kill(::getpid(), SIGTERM);
  }).detach();
}

std::string quoted_command(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) line += (line.empty() ? "" : " ") + quote_for_shell(arg);
  return line;
}

std::vector<std::string> env_strings(const std::map<std::string, std::string>& environment) {
  std::vector<std::string> env;
  for (const auto& [name, value] : environment) env.push_back(name + "=" + value);
  return env;
}

}  // namespace

std::optional<int> fan_out_if_asked(const LaunchOptions& options, const HostInfo& host) {
  if (options.stop_on_stdin_eof) {
    start_stdin_watch();
    return std::nullopt;
  }
  if (!wants_fanout(options)) return std::nullopt;
  const std::map<std::string, std::string>& environment = host.environment;
  const std::vector<RemoteNode> nodes = nodes_of(options);
  check_slots_agree(options, nodes);
  const FanoutJob job = make_job(options, nodes, host);
  auto path = environment.find("PATH");
  const std::string search = path == environment.end() ? "/usr/bin:/bin" : path->second;

  if (options.launcher != "ssh") {
    std::vector<std::string> argv = single_command_argv(options.launcher, job, nodes);
    if (options.dry_run) {
      write_all(STDOUT_FILENO, quoted_command(argv) + "\n");
      return 0;
    }
    const std::string executable = resolve_executable(argv.front(), search);
    std::vector<char*> c_argv;
    for (std::string& arg : argv) c_argv.push_back(arg.data());
    c_argv.push_back(nullptr);
    ::execv(executable.c_str(), c_argv.data());
    throw LaunchError("cannot run " + executable + ": " + std::strerror(errno));
  }

  SshSettings ssh{options.ssh_port, options.ssh_options};
  if (options.dry_run) {
    for (const RemoteNode& node : nodes)
      write_all(STDOUT_FILENO,
                quoted_command(ssh_argv(ssh, node.host, node_shell_command(job, node))) + "\n");
    return 0;
  }
  const std::string ssh_path = resolve_executable("ssh", search);
  const std::vector<std::string> env = env_strings(environment);
  UniqueFd signal_fd = take_stop_signals();
  probe_hosts(nodes, ssh, ssh_path, env, signal_fd.get());
  log::info("starting {} nodes over ssh, store {}:{}, job {}", nodes.size(), job.master_addr,
            job.master_port, job.rdzv_id);
  return RemoteJob(nodes, job, ssh, options.shutdown_timeout, std::move(signal_fd))
      .run(ssh_path, env);
}

}  // namespace acc::launcher
