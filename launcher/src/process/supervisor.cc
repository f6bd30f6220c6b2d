#include "process/supervisor.h"

#include <signal.h>

#include <algorithm>
#include <utility>

namespace acc::launcher {

Supervisor::Supervisor(Os& os, Listener& listener, std::string children,
                       Clock::duration kill_timeout)
    : os_(os),
      listener_(listener),
      children_name_(std::move(children)),
      kill_timeout_(kill_timeout) {}

SpawnedProcess Supervisor::spawn(Child& child, SpawnRequest request, const std::string& path) {
  return adopt(child, os_.spawn(std::move(request), path));
}

SpawnedProcess Supervisor::hand_over(Child& child, SpawnRequest request, pid_t standby,
                                     int channel) {
  return adopt(child, os_.hand_over(std::move(request), standby, channel));
}

SpawnedProcess Supervisor::adopt(Child& child, SpawnedProcess process) {
  child.pid = process.pid;
  child.running = true;
  child.out.fd.reset(process.stdout_fd);
  child.err.fd.reset(process.stderr_fd);
  children_.push_back(&child);
  return process;
}

bool Supervisor::running() const {
  return std::any_of(children_.begin(), children_.end(), [](const Child* c) { return c->running; });
}

void Supervisor::wait_once(std::optional<Clock::time_point> wake) {
  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  for (Child* c : children_) {
    for (Stream* s : {&c->out, &c->err}) {
      if (!s->fd) continue;
      fds.push_back({s->fd.get(), POLLIN, 0});
      streams.push_back(s);
    }
  }
  auto earliest = [&wake](Clock::time_point t) { wake = wake ? std::min(*wake, t) : t; };
  if (stopping_ && !killed_) earliest(kill_deadline_);
  if (killed_ && running()) earliest(given_up_after_);

  const size_t first_watched = fds.size();
  for (int fd : watched_fds_) fds.push_back({fd, POLLIN, 0});
  const std::vector<int> signals = os_.wait(fds, wake);
  for (size_t i = first_watched; i < fds.size(); ++i)
    if (fds[i].revents & POLLIN) listener_.on_readable(fds[i].fd);
  fds.resize(first_watched);
  read_streams(fds, streams);
  listener_.on_output(false);
  for (int sig : signals) {
    if (sig == SIGCHLD) {
      reap_children();
    } else {
      listener_.on_signal(sig);
    }
  }
  if (stopping_ && !killed_ && os_.now() >= kill_deadline_) {
    listener_.notice(kill_why_);
    kill();
  }
  if (killed_ && running() && os_.now() >= given_up_after_) give_up_on_unkillable();
}

void Supervisor::read_streams(const std::vector<pollfd>& fds, const std::vector<Stream*>& streams) {
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Stream* stream = streams[i];
    if (stream->read_some() == Stream::Read::kEnd) {
      stream->splitter.finish();
      if (stream->dedup) stream->dedup->finish_source(stream->local_rank);
      stream->flush_console();
      stream->fd.reset();
    }
  }
}

void Supervisor::reap_children() {
  while (std::optional<pid_t> pid = os_.exited_child()) {
    Child* child = find_child(*pid);
    // While the exited leader is unreaped its group id cannot be reused: clear out whatever
    // the child left running in its group.
    if (child) os_.signal_group(child->pid, SIGKILL);
    long peak_rss_kib = -1;
    const int status = os_.reap(*pid, &peak_rss_kib);
    if (child) {
      child->peak_rss_kib = peak_rss_kib;
      os_.forget(child->pid);
      child->running = false;
      child->status = status;
      listener_.on_exit(*child);
    }
  }
}

Child* Supervisor::find_child(pid_t pid) {
  for (Child* c : children_)
    if (c->pid == pid && c->running) return c;
  return nullptr;
}

// A process that SIGKILL does not end sleeps in the kernel (a GPU driver, RDMA, NFS): waiting
// for it would hold the launcher, and the allocation, forever. The owner names it and ends.
void Supervisor::give_up_on_unkillable() {
  for (Child* c : children_) {
    if (!c->running) continue;
    c->running = false;
    c->unkillable = true;
  }
}

void Supervisor::kill_at(Clock::time_point deadline, std::string why) {
  stopping_ = true;
  kill_deadline_ = deadline;
  kill_why_ = std::move(why);
}

void Supervisor::kill() {
  if (!killed_) given_up_after_ = os_.now() + kill_timeout_;
  killed_ = true;
  signal_all(SIGKILL);
}

void Supervisor::signal_all(int sig) {
  for (Child* c : children_)
    if (c->running) os_.signal_group(c->pid, sig);
}

void Supervisor::end_now() {
  kill();
  while (running()) wait_once(std::nullopt);
  finish();
}

void Supervisor::finish() {
  for (Child* c : children_) {
    c->out.close_all();
    c->err.close_all();
  }
  listener_.on_output(true);
  // Whatever the children started outside their groups and left behind was reparented to us
  // (a subreaper): end it, so that nothing outlives the launcher and no zombie is left; but
  // wait no longer than the kill bound, as for the children themselves.
  const Clock::time_point bound = os_.now() + kill_timeout_;
  for (;;) {
    std::vector<pid_t> left = os_.orphans();
    std::erase_if(left, [this](pid_t pid) {
      return std::any_of(children_.begin(), children_.end(),
                         [pid](const Child* c) { return c->unkillable && c->pid == pid; });
    });
    if (left.empty()) return;
    for (pid_t pid : left) os_.signal_process(pid, SIGKILL);
    while (std::optional<pid_t> pid = os_.exited_child()) os_.reap(*pid);
    if (os_.now() >= bound) {
      listener_.notice(std::to_string(left.size()) + " process(es) the " + children_name_ +
                       " left behind did not end after SIGKILL; not waiting for them");
      return;
    }
    std::vector<pollfd> none;
    os_.wait(none, std::min(bound, os_.now() + std::chrono::milliseconds(100)));
  }
}

}  // namespace acc::launcher
