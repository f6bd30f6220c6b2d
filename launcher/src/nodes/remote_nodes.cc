#include "nodes/remote_nodes.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "acc/common/error.h"
#include "acc/common/random.h"
#include "acc/launcher/nodes/cluster.h"
#include "acc/launcher/nodes/fanout.h"
#include "nodes/remote_job.h"
#include "output/console.h"
#include "output/log.h"
#include "process/spawn.h"

namespace acc::launcher {
namespace {

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
  char id[32];
  std::snprintf(id, sizeof(id), "acc-%08x", static_cast<unsigned>(random_u64()));
  return id;
}

FanoutJob make_job(const LaunchOptions& options, const std::vector<RemoteNode>& nodes,
                   const HostInfo& host) {
  FanoutJob job = resolve_fanout_job(options, nodes, new_rdzv_id());
  job.launcher_path = proc::Reader::machine().executable();
  ACC_CHECK(!job.launcher_path.empty(), LaunchError,
            "cannot find this executable through /proc/self/exe");
  job.working_dir = host.cwd;
  job.env =
      env_to_pass(host.environment, options.env_passthrough, env_file_entries(host.environment));
  return job;
}

std::vector<RemoteNode> nodes_of(const LaunchOptions& options) {
  return select_nodes(read_hostfile(options.hostfile), options.include_hosts,
                      options.exclude_hosts);
}

// A remote launcher: end of file on stdin means the head stopped us, or is gone. A thread with
// every signal blocked waits for it and raises SIGTERM at the process, which the agent reads from
// its signalfd: SIGTERM to the workers (the signal a training script checkpoints on, as when
// another worker fails), SIGKILL after --shutdown_timeout, exit 143.
void start_stdin_watch(Os& os) {
  std::thread([&os] {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
    char buffer[4096];
    for (;;) {
      const ssize_t got = ::read(STDIN_FILENO, buffer, sizeof(buffer));
      if (got == 0 || (got < 0 && errno != EINTR)) break;
    }
    os.signal_process(::getpid(), SIGTERM);
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

RemoteJobSettings remote_job_settings(const LaunchOptions& options, const std::string& search,
                                      const std::map<std::string, std::string>& environment) {
  RemoteJobSettings settings;
  settings.env = env_strings(environment);
  settings.path = search;
  settings.stop_grace = std::chrono::milliseconds(
      static_cast<int64_t>((options.shutdown_timeout + kStopGraceSeconds) * 1000));
  settings.kill_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options.kill_timeout * 1000));
  return settings;
}

std::vector<RemoteSession> probes_of(const std::vector<RemoteNode>& nodes, const SshSettings& ssh) {
  std::vector<RemoteSession> probes;
  for (const RemoteNode& node : nodes) probes.push_back({node, ssh_argv(ssh, node.host, "true")});
  return probes;
}

std::vector<RemoteSession> sessions_of(const std::vector<RemoteNode>& nodes, const SshSettings& ssh,
                                       const FanoutJob& job) {
  std::vector<RemoteSession> sessions;
  for (const RemoteNode& node : nodes)
    sessions.push_back({node, ssh_argv(ssh, node.host, node_shell_command(job, node))});
  return sessions;
}

}  // namespace

std::optional<int> fan_out_if_asked(const LaunchOptions& options, const HostInfo& host, Os& os) {
  if (options.stop_on_stdin_eof) {
    start_stdin_watch(os);
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
    os.replace_with(resolve_executable(argv.front(), search), argv);
  }

  SshSettings ssh{options.ssh_port, options.ssh_options};
  if (options.dry_run) {
    for (const RemoteNode& node : nodes)
      write_all(STDOUT_FILENO,
                quoted_command(ssh_argv(ssh, node.host, node_shell_command(job, node))) + "\n");
    return 0;
  }
  // The head's stop signals are taken from before the probe to the end of the job, so that a
  // stop at any stage is handled, not the default death that would leave the ssh processes
  // (each in its own process group) behind.
  os.take_signals(std::vector<int>(std::begin(kStopSignals), std::end(kStopSignals)));
  const RemoteJobSettings settings = remote_job_settings(options, search, environment);
  probe_hosts(os, probes_of(nodes, ssh), settings);
  log::info("starting {} nodes over ssh, store {}:{}, job {}", nodes.size(), job.master_addr,
            job.master_port, job.rdzv_id);
  return run_remote_job(os, sessions_of(nodes, ssh, job), settings);
}

}  // namespace acc::launcher
