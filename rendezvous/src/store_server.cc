#include "acc/rendezvous/store_server.h"

#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <utility>

#include "acc/common/error.h"
#include "acc/rendezvous/job_secret.h"
#include "store_event_loop.h"
#include "store_server_impl.h"

namespace acc::rendezvous {
namespace detail {
namespace {

void raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

Server::Server(StoreServerOptions opts)
    : options(std::move(opts)), state(options.max_keys, options.max_reply_bytes) {
  if (!options.log) {
    options.log = [](std::string_view line) {
      std::fprintf(stderr, "acc-launch store: %.*s\n", static_cast<int>(line.size()), line.data());
    };
  }
  if (!options.job_secret.empty()) state.require_job_secret(options.job_secret, random_salt());
  ACC_CHECK(!options.admit_members_only || !options.job_secret.empty(), ConfigError,
            "admitting only the job's members needs the job secret: the members are the "
            "addresses that prove it");
  if (options.admit_members_only) state.admit_members_only(options.member_hosts);
  if (options.raise_fd_limit) raise_fd_limit();
  // Every loop's eventfd exists before the first loop's thread copies the descriptor table,
  // so that each table has all of them: a loop wakes another by writing its descriptor.
  wake_fds.fill(-1);
  for (int& fd : wake_fds) {
    fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) close_descriptors();
    ACC_CHECK(fd >= 0, NetworkError,
              "cannot create the store server's event descriptors: ", std::strerror(errno));
  }
  try {
    listeners.listen(options);
  } catch (...) {
    close_descriptors();
    throw;
  }
}

Server::~Server() {
  close_descriptors();
}

void Server::close_descriptors() {
  for (int& fd : wake_fds) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  listeners.close();
}

std::string Server::start_loop(unsigned index) {
  loops[index] = std::make_unique<EventLoop>(*this, index);
  std::promise<std::string> ready;
  std::future<std::string> served = ready.get_future();
  ++running_loops;
  threads[index] = std::thread(
      [loop = loops[index].get(), ready = std::move(ready)]() mutable { loop->serve(&ready); });
  return served.get();
}

void Server::start_first_loop() {
  std::lock_guard lock(control_mutex);
  ACC_ASSERT(!running && !stopped);
  auto first = std::make_unique<EventLoop>(*this, 0);
  std::string error = first->make_descriptors();
  if (!error.empty()) {
    first->close_descriptors();
    throw NetworkError(error);
  }
  running = true;
  loops[0] = std::move(first);
  ++running_loops;
  threads[0] = std::thread([loop = loops[0].get()] { loop->serve(nullptr); });
}

bool Server::start_loop_after(unsigned index) {
  std::lock_guard lock(control_mutex);
  if (stop_requested.load() || index + 1 >= kMaxLoops || loops[index + 1]) return false;
  std::string error = start_loop(index + 1);
  if (error.empty()) return true;
  options.log("cannot start another store thread for more connections: " + error);
  return false;
}

void Server::loop_ended() {
  std::lock_guard lock(control_mutex);
  --running_loops;
  ended.notify_all();
}

void Server::ask_loops_to_stop() {
  if (stop_requested.exchange(true)) return;
  std::uint64_t one = 1;
  for (int fd : wake_fds) [[maybe_unused]] auto n = ::write(fd, &one, sizeof(one));
}

void Server::stop() {
  std::vector<std::thread> to_join;
  bool all = true;
  {
    std::lock_guard lock(control_mutex);
    if (stopped) return;
    stopped = true;
    if (running) ask_loops_to_stop();
    for (auto& thread : threads) {
      if (!thread.joinable()) continue;
      if (thread.get_id() == std::this_thread::get_id()) {
        all = false;
        continue;
      }
      to_join.push_back(std::move(thread));
    }
  }
  for (auto& thread : to_join) thread.join();
  if (!all) return;
  // Loop 0's descriptors and the listener, in this table (their last copies): the port is
  // free once stop() returns.
  if (loops[0]) loops[0]->close_descriptors();
  listeners.close();
}

}  // namespace detail

struct StoreServer::Impl : detail::Server {
  using Server::Server;
};

StoreServer::StoreServer(StoreServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

StoreServer::~StoreServer() {
  stop();
}

int StoreServer::port() const {
  return impl_->listeners.port();
}

std::string StoreServer::address() const {
  return impl_->listeners.addresses().front();
}

std::vector<std::string> StoreServer::addresses() const {
  return impl_->listeners.addresses();
}

std::uint64_t StoreServer::connection_capacity(std::uint64_t open_file_limit) {
  // Each table keeps stdin/out/err, the listener, the loops' eventfds, its epoll set, timers and
  // io_uring ring, and hands over to the next loop a few descriptors short of the limit.
  constexpr std::uint64_t kHeldBesides = 3 + 1 + detail::kMaxLoops + 8 + detail::kSpareDescriptors;
  return open_file_limit > kHeldBesides ? (open_file_limit - kHeldBesides) * detail::kMaxLoops : 0;
}

std::size_t StoreServer::num_connections() const {
  return impl_->num_connections.load(std::memory_order_relaxed);
}

std::vector<std::string> StoreServer::keys(std::string_view prefix) const {
  std::lock_guard lock(impl_->state_mutex);
  return impl_->state.keys_with_prefix(prefix);
}

void StoreServer::begin_key_space(std::string prefix, std::string when_set) {
  std::lock_guard lock(impl_->state_mutex);
  // As clients send it: "/" + the key (store_client.h).
  impl_->state.begin_key_space(std::move(prefix), when_set.empty() ? "" : "/" + when_set);
}

void StoreServer::start() {
  impl_->start_first_loop();
}

void StoreServer::run() {
  {
    std::lock_guard lock(impl_->control_mutex);
    if (impl_->stopped) return;
  }
  impl_->start_first_loop();
  std::unique_lock lock(impl_->control_mutex);
  impl_->ended.wait(lock,
                    [&] { return impl_->stop_requested.load() && impl_->running_loops == 0; });
}

void StoreServer::request_stop() {
  std::lock_guard lock(impl_->control_mutex);
  if (!impl_->stopped && impl_->running) impl_->ask_loops_to_stop();
}

void StoreServer::stop() {
  impl_->stop();
}

}  // namespace acc::rendezvous
