#include "agent/standbys.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "acc/common/error.h"
#include "acc/common/strings.h"
#include "agent/worker_environment.h"
#include "output/log.h"

namespace acc::launcher {
namespace {

// Set anew for each attempt (the torchrun contract, plan.h's torchrun_contract, and the rounds'
// GLOO_SOCKET_IFNAME).
constexpr const char* kAttemptVariables[] = {"RANK",
                                             "GROUP_RANK",
                                             "ROLE_RANK",
                                             "WORLD_SIZE",
                                             "GROUP_WORLD_SIZE",
                                             "ROLE_WORLD_SIZE",
                                             "MASTER_ADDR",
                                             "MASTER_PORT",
                                             "TORCHELASTIC_RESTART_COUNT",
                                             "TORCHELASTIC_USE_AGENT_STORE",
                                             "GLOO_SOCKET_IFNAME"};

}  // namespace

std::map<std::string, std::string> import_environment(std::map<std::string, std::string> env,
                                                      const std::string& run_dir) {
  for (const char* key : kAttemptVariables) env.erase(key);
  const std::string attempts = run_dir + "/attempt_";
  std::erase_if(env, [&](const auto& kv) { return kv.second.find(attempts) != std::string::npos; });
  return env;
}

bool Standbys::wanted(const LaunchPlan& plan) {
  return !plan.python.empty() && !plan.single_process && !plan.no_warm_workers &&
         !plan.no_python_hook && (plan.max_restarts > 0 || plan.min_nodes != plan.max_nodes);
}

std::string Standbys::memory_refusal(const LaunchPlan& plan, proc::Reader& proc) {
  const double need = kGbEach * plan.nproc_per_node;
  const double available = proc.available_memory_bytes() / 1e9;
  if (available < 2 * need)
    return "they would hold about " + fixed(need, 1) + " GB and " + fixed(available, 1) +
           " GB is available (MemAvailable); twice that is needed";
  return "";
}

Standbys::Standbys(Os& os, const LaunchPlan& plan,
                   const std::map<std::string, std::string>& environment, std::string run_dir,
                   std::string python_hook_dir)
    : os_(os),
      plan_(plan),
      environment_(environment),
      run_dir_(std::move(run_dir)),
      python_hook_dir_(std::move(python_hook_dir)) {
  ::mkdir((run_dir_ + "/standby").c_str(), 0777);
}

Standbys::~Standbys() {
  for (auto& [local_rank, standby] : standbys_) end(standby.pid, standby.channel);
}

void Standbys::replenish(const Round& round) {
  round_ = round;
  for (const WorkerSpec& spec : plan_.workers) {
    const auto it = standbys_.find(spec.local_rank);
    if (it != standbys_.end() && !it->second.ended &&
        (it->second.awaiting_heir ? read_news(it->second)
                                  : alive(it->second.pid, it->second.channel)))
      continue;
    if (it != standbys_.end()) {
      end(it->second.pid, it->second.channel);
      standbys_.erase(it);
    }
    const std::string dir = run_dir_ + "/attempt_" + std::to_string(round.restart_count) + "/" +
                            std::to_string(spec.local_rank);
    std::string why;
    std::optional<Standby> standby = spawn(
        spec,
        import_environment(
            worker_environment(plan_, spec, round, environment_, {run_dir_, dir, python_hook_dir_}),
            run_dir_),
        /*now=*/false, why);
    if (!standby)
      log::info("warm workers: no standby for local rank " + std::to_string(spec.local_rank) +
                ": " + why);
    else
      standbys_[spec.local_rank] = std::move(*standby);
  }
}

std::optional<Standbys::Taken> Standbys::start_now(const WorkerSpec& spec,
                                                   const std::map<std::string, std::string>& env) {
  std::string why;  // the worker's cold spawn says it again where it is the worker's own
  std::optional<Standby> standby =
      spawn(spec, import_environment(env, run_dir_), /*now=*/true, why);
  if (!standby) return std::nullopt;
  Taken taken;
  taken.pid = standby->pid;
  taken.channel = std::move(standby->channel);
  taken.import_env = std::move(standby->import_env);
  return taken;
}

std::optional<Standbys::Standby> Standbys::spawn(const WorkerSpec& spec,
                                                 std::map<std::string, std::string> import_env,
                                                 bool now, std::string& why) {
  Standby standby;
  standby.import_env = std::move(import_env);
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
    why = std::string("socketpair: ") + std::strerror(errno);
    return std::nullopt;
  }
  standby.channel.reset(ends[0]);
  const UniqueFd theirs(ends[1]);
  const std::string log_path = run_dir_ + "/standby/" + std::to_string(spec.local_rank) + ".log";
  // Appended to: a line that sends the user here may name the log of the standby this one replaces.
  const UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  const UniqueFd nothing(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  SpawnRequest request;
  request.argv = spec.argv;
  for (const auto& [key, value] : standby.import_env) request.env.push_back(key + "=" + value);
  request.env.push_back("ACC_STANDBY_FD=3");
  if (now) request.env.push_back("ACC_STANDBY_NOW=1");
  request.capture_stdout = request.capture_stderr = false;
  request.output_fd = log.get();
  request.stdin_fd = nothing.get();
  request.channel_fd = theirs.get();
  if (spec.local_rank < static_cast<int>(plan_.worker_cpus.size()))
    request.cpus = plan_.worker_cpus[spec.local_rank];
  const auto path = standby.import_env.find("PATH");
  try {
    SpawnedProcess process = os_.spawn(
        std::move(request), path == standby.import_env.end() ? "/usr/bin:/bin" : path->second);
    standby.pid = process.pid;
    os_.await_exec(process);
  } catch (const std::exception& e) {
    why = e.what();
    end(standby.pid, standby.channel);
    return std::nullopt;
  }
  return standby;
}

std::optional<Standbys::Taken> Standbys::take(int local_rank,
                                              const std::map<std::string, std::string>& env,
                                              std::string& why) {
  const auto it = standbys_.find(local_rank);
  if (it == standbys_.end()) return std::nullopt;  // the first attempt, or a new node
  Standby standby = std::move(it->second);
  standbys_.erase(it);
  if (standby.awaiting_heir) {
    const bool coming = read_news(standby);
    if (standby.awaiting_heir) {
      why = coming ? "its standby, the last worker's fork, has not come yet"
                   : "the last worker left no standby (see " + run_dir_ + "/standby/" +
                         std::to_string(local_rank) + ".log)";
      end(standby.pid, standby.channel);
      return std::nullopt;
    }
  }
  if (!alive(standby.pid, standby.channel)) {
    why = "its standby has ended (see " + run_dir_ + "/standby/" + std::to_string(local_rank) +
          ".log)";
    end(standby.pid, standby.channel);
    return std::nullopt;
  }
  // Its import runs at the lowest CPU priority: a worker waiting on it could wait long.
  read_news(standby);
  if (!standby.ready) {
    why = "its standby has not imported torch yet";
    end(standby.pid, standby.channel);
    return std::nullopt;
  }
  const std::map<std::string, std::string> wanted = import_environment(env, run_dir_);
  if (wanted != standby.import_env) {
    std::string key;
    for (const auto& [k, v] : wanted)
      if (auto s = standby.import_env.find(k); s == standby.import_env.end() || s->second != v) {
        key = k;
        break;
      }
    for (const auto& [k, v] : standby.import_env)
      if (key.empty() && !wanted.count(k)) key = k;
    why = "its environment at import differs in " + key;
    end(standby.pid, standby.channel);
    return std::nullopt;
  }
  Taken taken;
  taken.pid = standby.pid;
  taken.channel = std::move(standby.channel);
  taken.import_env = std::move(standby.import_env);
  return taken;
}

void Standbys::handed_over(int local_rank, Taken taken) {
  Standby& heir = standbys_[local_rank];
  heir = Standby{};
  heir.channel = std::move(taken.channel);
  heir.import_env = std::move(taken.import_env);
  heir.awaiting_heir = true;
}

std::vector<int> Standbys::channels() const {
  std::vector<int> fds;
  for (const auto& [local_rank, standby] : standbys_)
    if (standby.channel && !standby.ended) fds.push_back(standby.channel.get());
  return fds;
}

bool Standbys::read_news(int fd) {
  for (auto& [local_rank, standby] : standbys_) {
    if (standby.channel.get() != fd || standby.ended) continue;
    if (read_news(standby)) return true;
    standby.ended = true;
    // A worker that left no heir: a standby that imports torch takes its place.
    if (standby.awaiting_heir && round_) {
      const int rank = local_rank;  // the key goes with its entry
      end(standby.pid, standby.channel);
      standbys_.erase(rank);
      replenish(*round_);
    }
    return false;
  }
  return false;
}

WarmWorkersStatus Standbys::status() {
  WarmWorkersStatus status;
  for (const auto& [local_rank, standby] : standbys_) {
    ++status.waiting;
    status.ready += standby.ready;
    if (!standby.awaiting_heir) status.resident_bytes += os_.proc().resident_bytes(standby.pid);
  }
  return status;
}

// The standby says "ready" once torch is imported; it holds its end until it runs a worker or
// ends, so a hang-up means it has ended (and may be reaped by anyone: its pid is not ours now).
bool Standbys::alive(pid_t pid, const UniqueFd& channel) {
  if (!channel || pid < 0) return false;
  pollfd fd{channel.get(), POLLIN, 0};
  return ::poll(&fd, 1, 0) >= 0 && !(fd.revents & (POLLHUP | POLLERR));
}

bool Standbys::read_news(Standby& standby) {
  if (standby.awaiting_heir && !take_heir(standby)) return false;
  if (standby.awaiting_heir) return true;  // not yet
  char text[64];
  while (standby.channel) {
    const ssize_t n = ::recv(standby.channel.get(), text, sizeof(text), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
    if (n < 0) return true;
    if (std::string_view(text, n) == "ready") standby.ready = true;
  }
  return false;
}

bool Standbys::take_heir(Standby& standby) {
  char text[64];
  iovec data{text, sizeof(text)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(standby.channel.get(), &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  UniqueFd channel;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header))
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header), sizeof(fd));
      channel.reset(fd);
    }
  constexpr std::string_view kHeir = "heir ";
  const std::string_view said(text, n > 0 ? n : 0);
  pid_t pid = -1;
  if (!channel || !said.starts_with(kHeir) ||
      std::from_chars(said.data() + kHeir.size(), said.data() + said.size(), pid).ec !=
          std::errc() ||
      pid <= 0)
    return false;
  os_.adopt_standby(pid);
  standby.pid = pid;
  standby.channel = std::move(channel);
  standby.awaiting_heir = false;
  return true;
}

// One that has ended is left to whoever reaps next (an attempt's supervisor reaps every child
// that exits): its pid may be another process's by now.
void Standbys::end(pid_t pid, UniqueFd& channel) {
  if (pid > 0 && alive(pid, channel)) {
    os_.signal_group(pid, SIGKILL);
    os_.reap(pid);
  }
  if (pid > 0) os_.forget(pid);
  channel.reset();
}

void Standbys::end(Taken& taken) {
  end(taken.pid, taken.channel);
  taken.pid = -1;
}

}  // namespace acc::launcher
