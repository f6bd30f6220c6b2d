#include "store_event_loop.h"

#include <linux/close_range.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <limits>

#include "acc/common/error.h"
#include "store_server_impl.h"

namespace acc::rendezvous::detail {
namespace {

// Gives the calling thread a descriptor table of its own (unshare(CLONE_FILES)) and closes in it
// every descriptor but 0, 1, 2 and `keep`. The thread's earlier table (the launcher's, or the
// previous loop's full of its connections) loses nothing: those are copies. Closing them keeps a
// pipe of the launcher's from staying open in a copy of its table (its reader would never see its
// end). Returns an empty string, or what failed.
std::string use_own_descriptor_table(std::vector<int> keep) {
  if (::unshare(CLONE_FILES) != 0) {
    return "cannot give the store's thread a descriptor table of its own (unshare): " +
           std::string(std::strerror(errno));
  }
  keep.push_back(2);  // 0, 1 and 2 stay: the log goes to stderr
  std::sort(keep.begin(), keep.end());
  unsigned first = 3;
  for (int fd : keep) {
    if (fd < 0 || static_cast<unsigned>(fd) < first) continue;
    if (static_cast<unsigned>(fd) > first) {
      ::syscall(SYS_close_range, first, static_cast<unsigned>(fd) - 1, 0u);
    }
    first = static_cast<unsigned>(fd) + 1;
  }
  ::syscall(SYS_close_range, first, UINT_MAX, 0u);
  return {};
}

}  // namespace

EventLoop::EventLoop(Server& server, unsigned index)
    : server(server),
      options(server.options),
      state(server.state),
      index(index),
      listen_fds(server.listeners.fds()),
      wake_fd(server.wake_fds[index]),
      stop_requested(server.stop_requested),
      total_connections(server.num_connections),
      read_buffer(std::make_unique_for_overwrite<char[]>(kReadBufferBytes)),
      next_id(kFirstConnectionId + index) {}

std::string EventLoop::make_descriptors() {
  epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  sweep_fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  accept_retry_fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (epoll_fd < 0 || sweep_fd < 0 || accept_retry_fd < 0) {
    return "cannot create the store server's event descriptors: " +
           std::string(std::strerror(errno));
  }
  try {
    arm();
  } catch (const NetworkError& error) {
    return error.what();
  }
  return {};
}

void EventLoop::close_descriptors() {
  for (int* fd : {&epoll_fd, &sweep_fd, &accept_retry_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void EventLoop::serve(std::promise<std::string>* ready) {
  // How ps and top name the thread: the first as before, the others numbered.
  const std::string name = index == 0 ? "acc-store" : "acc-store-" + std::to_string(index);
  ::pthread_setname_np(::pthread_self(), name.c_str());
  // Keeps the server's listeners, every loop's eventfd and (loop 0) its own descriptors; the
  // rest of the copied table (the launcher's descriptors, or the previous loop's connections) is
  // closed in this one. Where the kernel or a seccomp profile refuses unshare, loop 0 serves from
  // the process's own table as before, and no further loop can have a table of its own.
  std::vector<int> keep(server.wake_fds.begin(), server.wake_fds.end());
  keep.insert(keep.end(), listen_fds.begin(), listen_fds.end());
  keep.insert(keep.end(), {epoll_fd, sweep_fd, accept_retry_fd});
  private_table = use_own_descriptor_table(keep).empty();
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  fd_limit = limit.rlim_cur >= static_cast<rlim_t>(std::numeric_limits<int>::max())
                 ? std::numeric_limits<int>::max()
                 : static_cast<int>(limit.rlim_cur);
  std::string error;
  if (ready != nullptr) {
    error = private_table ? make_descriptors()
                          : "a thread cannot have a descriptor table of its own here "
                            "(unshare(CLONE_FILES) is refused)";
    ready->set_value(error);
  }
  if (error.empty()) loop();
  // Its descriptors, closed here while the table is still the thread's (the thread's exit would
  // release a private table only after join() returns). Loop 0's, in a table shared with the
  // thread that made them, are closed by that one (Server::stop).
  ring.reset();
  if (private_table) {
    close_descriptors();
    for (int fd : listen_fds) ::close(fd);
  }
  server.loop_ended();
}

EventLoop::StateLock::StateLock(EventLoop& loop) : loop_(loop) {
  loop_.server.state_mutex.lock();
  loop_.state_locked = true;
  if (loop_.inbox.empty()) return;
  loop_.incoming.swap(loop_.inbox);
  for (auto& [id, bytes] : loop_.incoming) {
    if (std::string* buffer = loop_.buffer_for(id)) buffer->append(bytes);
  }
  loop_.incoming.clear();
}

EventLoop::StateLock::~StateLock() {
  loop_.state_locked = false;
  loop_.server.state_mutex.unlock();
  for (unsigned i = 0; loop_.to_wake != 0; ++i, loop_.to_wake >>= 1) {
    std::uint64_t one = 1;
    if (loop_.to_wake & 1u) [[maybe_unused]]
      auto n = ::write(loop_.server.wake_fds[i], &one, 8);
  }
}

std::string* EventLoop::foreign_buffer(ConnectionId id) {
  const unsigned owner = loop_of(id);
  EventLoop* loop = server.loops[owner].get();
  if (loop == nullptr) return nullptr;
  loop->inbox.emplace_back(id, std::string());
  to_wake |= 1u << owner;
  return &loop->inbox.back().second;
}

bool EventLoop::start_next_loop() {
  return server.start_loop_after(index);
}

double EventLoop::thread_preemptions() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_nivcsw);
}

bool EventLoop::watch(int fd, std::uint64_t tag, std::uint32_t events) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = tag;
  return ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) == 0;
}

void EventLoop::arm() {
  ACC_CHECK(watch_listeners() && watch(wake_fd, kWakeTag, EPOLLIN) &&
                watch(sweep_fd, kSweepTag, EPOLLIN) &&
                watch(accept_retry_fd, kAcceptRetryTag, EPOLLIN),
            NetworkError, "cannot watch the store server's descriptors: ", std::strerror(errno));
  const auto interval = std::chrono::duration_cast<std::chrono::nanoseconds>(sweep_interval());
  itimerspec every{};
  every.it_interval.tv_sec = static_cast<time_t>(interval.count() / 1'000'000'000);
  every.it_interval.tv_nsec = static_cast<long>(interval.count() % 1'000'000'000);
  every.it_value = every.it_interval;
  ::timerfd_settime(sweep_fd, 0, &every, nullptr);
}

void EventLoop::loop() {
  epoll_event events[kEventsPerPoll];
  bool again = false;
  while (!stopping) {
    int ready;
    do {
      ready = ::epoll_wait(epoll_fd, events, kEventsPerPoll, again ? 0 : -1);
    } while (ready < 0 && errno == EINTR);
    if (ready < 0) {
      options.log("epoll_wait failed: " + std::string(std::strerror(errno)) + "; stopping");
      break;
    }
    again = serve_round(events, ready);
  }
  close_all();
}

bool EventLoop::serve_round(const epoll_event* events, int ready) {
  round_time = Clock::steady().now();
  bool again = ready == kEventsPerPoll;
  resume_held();
  for (int i = 0; i < ready; ++i) {
    const std::uint64_t tag = events[i].data.u64;
    if (tag < kFirstConnectionId) {
      serve_own(tag);
      if (stopping) return false;
      continue;
    }
    auto it = connections.find(tag);
    if (it == connections.end()) continue;
    std::shared_ptr<Connection> conn = it->second;
    if (events[i].events & EPOLLOUT) try_write(conn);
    if (conn->closed || !(events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
    if (read_some(*conn)) again = true;
  }
  flush_dirty();
  return again || !held.empty();
}

void EventLoop::serve_own(std::uint64_t tag) {
  if (tag >= kFirstListenerTag) return accept_ready(listen_fds[tag - kFirstListenerTag]);
  std::uint64_t count;
  switch (tag) {
    case kWakeTag: {
      [[maybe_unused]] auto n = ::read(wake_fd, &count, sizeof(count));
      { StateLock lock(*this); }  // takes the replies other loops left in the inbox
      if (stop_requested.load()) stopping = true;
      break;
    }
    case kSweepTag:
      if (::read(sweep_fd, &count, sizeof(count)) == sizeof(count)) sweep();
      break;
    case kAcceptRetryTag:
      if (::read(accept_retry_fd, &count, sizeof(count)) != sizeof(count)) break;
      if (has_spare_descriptors()) {
        watch_listeners();
      } else {
        retry_accept_soon();
      }
      break;
  }
}

std::chrono::milliseconds EventLoop::sweep_interval() const {
  auto interval = options.stall_timeout / 4;
  return std::clamp(interval, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
}

void EventLoop::sweep() {
  close_log.end_window();
  auto now = Clock::steady().now();
  std::vector<std::shared_ptr<Connection>> stalled;
  for (auto& [id, conn] : connections) {
    bool half_sent = !conn->in.empty() && now - conn->partial_since > options.stall_timeout;
    bool unread = conn->write_waiting && now - conn->write_blocked_since > options.stall_timeout;
    if (half_sent || unread) stalled.push_back(conn);
  }
  for (auto& conn : stalled) {
    close(*conn, conn->write_waiting ? "it does not read its replies (" +
                                           std::to_string(conn->pending()) + " bytes pending for " +
                                           std::to_string(options.stall_timeout.count()) + " ms)"
                                     : "it stalled in the middle of a request");
  }
}

void EventLoop::close_all() {
  stopping = true;
  std::vector<std::shared_ptr<Connection>> all;
  for (auto& [id, conn] : connections) all.push_back(conn);
  for (auto& conn : all) close(*conn, {});
  close_log.end_round();  // a round that stop() cut short
  close_log.end_window(true);
}

}  // namespace acc::rendezvous::detail
