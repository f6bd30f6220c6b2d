#include "nodes/remote_job.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string_view>

#include "acc/common/error.h"
#include "acc/common/unique_fd.h"
#include "output/log.h"
#include "process/supervisor.h"

namespace acc::launcher {
namespace {

int remote_exit_status(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

std::string seconds_of(Os::Clock::duration duration) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(duration).count());
}

// One host's ssh as the supervisor runs it, and what the head keeps of it.
struct Session : Child {
  RemoteNode node;
  UniqueFd stdin_fd;                  // the write end: closed to stop the node
  std::deque<std::string> err_lines;  // the probe's: what ssh said, for the error
};

std::unique_ptr<Session> new_session(const RemoteNode& node) {
  auto session = std::make_unique<Session>();
  session->node = node;
  return session;
}

// The probes: every `ssh host true` at once, each waited for; a stop signal kills them all.
class Probe : private Supervisor::Listener {
 public:
  Probe(Os& os, const RemoteJobSettings& settings)
      : os_(os), settings_(settings), supervisor_(os, *this, "ssh probes", settings.kill_timeout) {}

  void run(const std::vector<RemoteSession>& probes) {
    const UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    try {
      for (const RemoteSession& probe : probes) {
        sessions_.push_back(new_session(probe.node));
        Session& session = *sessions_.back();
        session.err.tail = &session.err_lines;
        SpawnRequest request;
        request.argv = probe.argv;
        request.env = settings_.env;
        request.capture_stdout = false;
        request.stdin_fd = dev_null.get();
        SpawnedProcess spawned = supervisor_.spawn(session, std::move(request), settings_.path);
        os_.await_exec(spawned);
      }
    } catch (...) {
      supervisor_.end_now();
      throw;
    }
    while (supervisor_.running()) supervisor_.wait_once(std::nullopt);
    supervisor_.finish();
    if (interrupted_by_)
      throw InterruptedError(interrupted_by_, std::string("stopped by SIG") +
                                                  sigabbrev_np(interrupted_by_) +
                                                  " while probing the hosts over ssh");
    for (const auto& session : sessions_)
      if (session->status != 0) throw NetworkError(unreachable(*session));
  }

 private:
  static std::string unreachable(const Session& session) {
    std::string said;
    for (const std::string& line : session.err_lines)
      if (!line.empty()) said = line;
    const std::string& host = session.node.host;
    return "cannot reach host " + host + " over ssh: " +
           (said.empty() ? "ssh exited " + std::to_string(remote_exit_status(session.status))
                         : said) +
           " (check it with: ssh " + host + " true)";
  }

  void on_signal(int sig) override {
    if (!interrupted_by_) interrupted_by_ = sig;
    supervisor_.kill();
  }
  void on_exit(Child&) override {}
  void notice(const std::string& message) override { log::info(message); }

  Os& os_;
  const RemoteJobSettings& settings_;
  std::vector<std::unique_ptr<Session>> sessions_;
  int interrupted_by_ = 0;
  Supervisor supervisor_;
};

class RemoteJob : private Supervisor::Listener {
 public:
  RemoteJob(Os& os, const RemoteJobSettings& settings)
      : os_(os),
        settings_(settings),
        supervisor_(os, *this, "ssh sessions", settings.kill_timeout) {}

  int run(const std::vector<RemoteSession>& sessions) {
    try {
      for (const RemoteSession& session : sessions) start(session);
    } catch (...) {
      supervisor_.end_now();
      throw;
    }
    while (supervisor_.running()) supervisor_.wait_once(std::nullopt);
    supervisor_.finish();
    for (const auto& session : sessions_)
      if (session->unkillable)
        log::warn("the ssh to " + session->node.host + " did not end " +
                  seconds_of(settings_.kill_timeout) + " s after SIGKILL; not waiting for it");
    if (interrupted_by_) {
      log::info(std::string("stopped by ") + sigabbrev_np(interrupted_by_) +
                "; stopped every node");
      return 128 + interrupted_by_;
    }
    if (!root_cause_) return 0;
    root_cause_ = origin(*root_cause_);
    const int status = remote_exit_status(root_cause_->status);
    log::error("node " + std::to_string(root_cause_->node.node_rank) + " (" +
               root_cause_->node.host + ") failed" +
               (status == 255 ? " or its ssh connection broke (ssh exited 255)"
                              : " with exit status " + std::to_string(status)) +
               "; stopped the other nodes");
    return status;
  }

 private:
  void start(const RemoteSession& remote) {
    int fds[2];
    ACC_CHECK(::pipe2(fds, O_CLOEXEC) == 0, LaunchError, "pipe: ", std::strerror(errno));
    UniqueFd stdin_read(fds[0]);
    sessions_.push_back(new_session(remote.node));
    Session& session = *sessions_.back();
    session.stdin_fd.reset(fds[1]);
    // Lines of a node's launcher that its workers did not write get the host's name too.
    for (auto [stream, console] :
         {std::pair{&session.out, STDOUT_FILENO}, std::pair{&session.err, STDERR_FILENO}}) {
      stream->console_fd = console;
      stream->prefix = "[" + remote.node.host + "]: ";
      stream->prefixed_already = "[" + remote.node.host + " ";
    }
    SpawnRequest request;
    request.argv = remote.argv;
    request.env = settings_.env;
    request.stdin_fd = stdin_read.get();
    session.err.tail = &session.err_lines;
    SpawnedProcess spawned = supervisor_.spawn(session, std::move(request), settings_.path);
    stdin_read.reset();
    os_.await_exec(spawned);
  }

  // The node whose failure ended the job. The first ssh to end non-zero may be another node's:
  // a failure reaches every node at once, and a node ended by another's failure exits with the
  // same status, after its line "node N (host H) ended the job: ..." (describe_job_end).
  Session* origin(Session& first_failed) {
    static constexpr std::string_view kMarker = "error: node ";
    for (auto line = first_failed.err_lines.rbegin(); line != first_failed.err_lines.rend();
         ++line) {
      const std::size_t at = line->find(kMarker);
      if (at == std::string::npos || line->find(" ended the job: ") == std::string::npos) continue;
      const int node = std::atoi(line->c_str() + at + kMarker.size());
      for (auto& session : sessions_)
        if (session->node.node_rank == node && session->status != 0) return session.get();
      break;
    }
    return &first_failed;
  }

  // End of file on every node's stdin: each stops its workers and exits (--stop_on_stdin_eof);
  // SIGKILL drops the connections of those still running after the grace.
  void begin_stop() {
    supervisor_.kill_at(os_.now() + settings_.stop_grace,
                        "nodes still running " + seconds_of(settings_.stop_grace) +
                            " s after they were told to stop; dropping their connections");
    for (auto& session : sessions_) session->stdin_fd.reset();
  }

  void on_signal(int sig) override {
    if (supervisor_.stopping()) {
      supervisor_.kill();  // asked twice: stop waiting
    } else {
      interrupted_by_ = sig;
      begin_stop();
    }
  }

  void on_exit(Child& child) override {
    if (child.status == 0 || supervisor_.stopping()) return;
    root_cause_ = static_cast<Session*>(&child);
    begin_stop();
  }

  void notice(const std::string& message) override { log::info(message); }

  Os& os_;
  const RemoteJobSettings& settings_;
  std::vector<std::unique_ptr<Session>> sessions_;
  Session* root_cause_ = nullptr;
  int interrupted_by_ = 0;
  Supervisor supervisor_;
};

}  // namespace

void probe_hosts(Os& os, const std::vector<RemoteSession>& probes,
                 const RemoteJobSettings& settings) {
  Probe(os, settings).run(probes);
}

int run_remote_job(Os& os, const std::vector<RemoteSession>& sessions,
                   const RemoteJobSettings& settings) {
  return RemoteJob(os, settings).run(sessions);
}

}  // namespace acc::launcher
