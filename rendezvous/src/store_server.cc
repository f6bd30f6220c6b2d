#include "acc/rendezvous/store_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
// Boost 1.74 Asio uses std::exchange without including <utility> under C++20.
#include <utility>
// clang-format off
#include <boost/asio.hpp>
// clang-format on
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"
#include "acc/rendezvous/clock.h"
#include "acc/rendezvous/job_secret.h"
#include "send_ring.h"
#include "store_shard.h"
#include "store_state.h"

namespace acc::rendezvous {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using detail::ConnectionId;

// Reads go through one buffer shared by all connections: a connection's socket is read only when
// it is readable (reactor style), so thousands of idle connections cost no buffer each.
constexpr std::size_t kReadBufferBytes = 64 * 1024;
// Reads per readiness event before yielding to other connections.
constexpr int kReadsPerEvent = 4;
// Accepts per readiness event, for the same fairness.
constexpr int kAcceptsPerEvent = 256;
// Descriptors a shard with a table of its own keeps spare in it: it stops accepting (the next
// shard takes over) when an accepted socket's number comes this close to the open-file limit, so
// that what the thread opens later (its io_uring, a sanitizer's probe pipe) still fits.
constexpr int kSpareDescriptors = 8;
// Ready descriptors taken from the epoll set at once.
constexpr int kEventsPerPoll = 256;
// Tags of the loop's own descriptors in the epoll set; connection ids start above them.
constexpr std::uint64_t kWakeTag = 1;
constexpr std::uint64_t kSweepTag = 2;
constexpr std::uint64_t kAcceptRetryTag = 3;
constexpr std::uint64_t kFirstListenerTag = 4;  // listener i: kFirstListenerTag + i
constexpr ConnectionId kFirstConnectionId = 16;
// Listeners of one server (host and more_hosts): their tags fit below the connections'.
constexpr std::size_t kMaxListeners = kFirstConnectionId - kFirstListenerTag;
// A connection's buffers keep at most this much capacity once empty: one big reply must not pin
// its size for the rest of a connection that PyTorch's clients hold for the whole job.
constexpr std::size_t kKeptBufferBytes = 256 * 1024;

// The loop is the server's own: one level-triggered epoll set holds the listener, the
// connections (registered once), a timerfd for the stall sweep and an eventfd for stop(), and a
// round is one epoll_wait, a recv per ready connection and the round's replies. Asio only
// parses and resolves the listener's address. Through Asio's reactor a connection's readiness cost
// an epoll_ctl to re-arm, an operation allocated and a handler dispatched; with the connections in
// a set of their own behind Asio, a round still cost two epoll_waits and an epoll_ctl (Asio re-arms
// a descriptor it waits on), which at 8 clients was 0.8 system calls per request
// (bench/README.md, "Store server CPU per operation").
//
// Such a loop is a shard (store_shard.h): its thread has a descriptor table of its own, and the
// connections it accepted. Shard 0 starts with the server; the shard that runs out of descriptors
// stops accepting and starts the next. The key-value state is one, under a mutex; a reply that a
// request causes on another shard's connection (a WAIT's wake-up, a WATCH_KEY notification) goes
// into that shard's inbox, under the same mutex, and its eventfd wakes it.
struct Connection {
  Connection(int fd, ConnectionId id) : fd(fd), id(id) {}

  int fd;
  ConnectionId id;
  std::string peer;             // "host:port", for the lines
  std::string peer_host;        // its address alone, for admission
  bool host_told = false;       // the state knows peer_host (admission only)
  bool from_this_host = false;  // peer_host is the socket's own address
  bool dialect_known = false;
  Dialect dialect = Dialect::kV1_13;
  bool closed = false;
  std::string in;              // received bytes not yet parsed into a whole request
  std::size_t counted_in = 0;  // the memory of `in` counted in the shard's unfinished_bytes
  Clock::time_point partial_since;
  bool requests_held = false;  // whole requests wait in `in` for the replies to drain
  std::string out;             // reply bytes not yet written, from out_pos on
  std::size_t out_pos = 0;
  bool over_limit = false;     // replies were refused past max_pending_reply_bytes: close it
  bool reading = true;         // the epoll set watches it for readability
  bool write_waiting = false;  // the epoll set watches it for writability
  bool dirty = false;          // queued in Impl::dirty for a write attempt
  bool send_failed = false;    // a batched send failed with an error other than EAGAIN
  Clock::time_point write_blocked_since;

  std::size_t pending() const { return out.size() - out_pos; }
};

// Drops a buffer's memory once it is empty, if a big message left it large.
void release_if_large(std::string& buffer) {
  if (buffer.empty() && buffer.capacity() > kKeptBufferBytes) std::string().swap(buffer);
}

// The calling thread's involuntary context switches: how often a woken client preempted it.
double thread_preemptions() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_nivcsw);
}

void raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

tcp::endpoint resolve_endpoint(const std::string& host, int port) {
  ACC_CHECK(port >= 0 && port <= 65535, ConfigError, "store port ", port,
            " is out of range; use 0 to 65535");
  auto port_number = static_cast<unsigned short>(port);
  if (host.empty() || host == "0.0.0.0") return {tcp::v4(), port_number};
  if (host == "::") return {tcp::v6(), port_number};
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (!ec) return {address, port_number};
  asio::io_context io;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  ACC_CHECK(!ec && !results.empty(), ConfigError, "cannot resolve store host '", host,
            "': ", ec ? ec.message() : "no address", "; pass an IP address or a known name");
  return results.begin()->endpoint();
}

struct Server;

struct Shard : detail::ReplySink {
  Shard(Server& server, unsigned index);

  // The shard's epoll set and timers, registered. Empty, or what failed. Shard 0's are made by
  // the thread that starts the server, before its thread (so start() throws what fails, and
  // returns without waiting for the thread); the next shards' by their own threads.
  std::string make_descriptors();
  // The shard's thread: its own descriptor table, then the loop until stop(). A next shard's
  // makes its descriptors first and gives `ready` an empty string once it serves, or what failed.
  void serve(std::promise<std::string>* ready);
  void close_descriptors();

  // --- ReplySink: called by StoreState while it applies a request.
  std::string* buffer_for(ConnectionId id) override {
    if (detail::shard_of(id) != index) return foreign_buffer(id);
    auto it = connections.find(id);
    if (it == connections.end() || it->second->closed) return nullptr;
    Connection& conn = *it->second;
    if (!conn.dirty && !conn.write_waiting) {
      conn.dirty = true;
      dirty.push_back(it->second);
    }
    // Its own requests stop at pause_reading_bytes; past this bound only others' requests (wake-
    // ups, watch notifications) can bring more. It is closed at the next write attempt: dropping
    // a reply and going on would break its stream.
    if (conn.over_limit || conn.pending() > options.max_pending_reply_bytes) {
      conn.over_limit = true;
      if (!conn.dirty) {
        conn.dirty = true;
        dirty.push_back(it->second);
      }
      return nullptr;
    }
    return &conn.out;
  }

  bool watch(int fd, std::uint64_t tag, std::uint32_t events) {
    epoll_event event{};
    event.events = events;
    event.data.u64 = tag;
    return ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) == 0;
  }

  bool watch_listeners() {
    for (std::size_t i = 0; i < listen_fds.size(); ++i)
      if (!watch(listen_fds[i], kFirstListenerTag + i, EPOLLIN)) return false;
    return true;
  }

  void unwatch_listeners() {
    for (int fd : listen_fds) ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
  }

  // Registers the loop's descriptors and starts the sweep's clock. Loop thread, or before it.
  void arm() {
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

  // Serves until stop(): each round waits for readiness, serves it, and writes the replies.
  void loop() {
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

  // Serves one round of readiness, then writes the replies. True when more is waiting that the
  // next epoll_wait would not report at once (a full batch of events still counts on it).
  bool serve_round(const epoll_event* events, int ready) {
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

  // The listeners, the stop eventfd and the timers.
  void serve_own(std::uint64_t tag) {
    if (tag >= kFirstListenerTag) return accept_ready(listen_fds[tag - kFirstListenerTag]);
    std::uint64_t count;
    switch (tag) {
      case kWakeTag: {
        [[maybe_unused]] auto n = ::read(wake_fd, &count, sizeof(count));
        { StateLock lock(*this); }  // takes the replies other shards left in the inbox
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

  void accept_ready(int listen_fd) {
    for (int i = 0; i < kAcceptsPerEvent; ++i) {
      // accept4 makes the socket close-on-exec atomically, so a concurrent fork+exec in the
      // launcher's thread cannot leak it; Asio's own accept does not.
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE && hand_over()) return;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
          return out_of_descriptors(errno);
        return;  // EAGAIN: nothing more to accept now
      }
      out_of_descriptors_logged = false;
      add_connection(fd);
      // The table is full but for its spare descriptors (kSpareDescriptors): the next shard, with a
      // table of its own, accepts from now on. Where this thread could not have a table of its own,
      // neither can the next; it goes on to EMFILE. (ENFILE above is the whole system's limit:
      // another table does not help.)
      if (private_table && fd >= fd_limit - kSpareDescriptors) {
        if (!hand_over()) out_of_descriptors(EMFILE);
        return;
      }
    }
  }

  // This shard's table is full: the next shard, with a table of its own, takes the listeners.
  // False where there is none to take it (this thread has no table of its own, or no shard is
  // left).
  bool hand_over() {
    if (!private_table || !start_next_shard()) return false;
    unwatch_listeners();
    return true;
  }

  // Out of descriptors (`error`), or the last shard's table full but for its spare ones
  // (EMFILE): the listeners leave the set for 100 ms instead of spinning on a readiness that
  // stays. Said once until an accept succeeds again, not at each retry, with the limit and the way
  // to raise it.
  void out_of_descriptors(int error) {
    if (!out_of_descriptors_logged) {
      out_of_descriptors_logged = true;
      options.log(out_of_descriptors_message(error));
    }
    unwatch_listeners();
    retry_accept_soon();
  }

  // The listener is looked at again (has_spare_descriptors) in 100 ms.
  void retry_accept_soon() {
    itimerspec once{};
    once.it_value.tv_nsec = 100'000'000;
    ::timerfd_settime(accept_retry_fd, 0, &once, nullptr);
  }

  // Whether the table has a free descriptor below its spare ones, for the retry after
  // out_of_descriptors.
  bool has_spare_descriptors() const {
    if (!private_table) return true;
    const int probe = ::dup(wake_fd);
    if (probe >= 0) ::close(probe);
    return probe >= 0 && probe < fd_limit - kSpareDescriptors;
  }

  std::string out_of_descriptors_message(int error) const {
    std::string text = "cannot accept a connection: " + std::string(std::strerror(error)) + " (" +
                       std::to_string(total_connections.load()) + " connections open";
    rlimit limit{};
    if ((error == EMFILE || error == ENFILE) && ::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
      text += "; open-file limit " + std::to_string(limit.rlim_cur) + ", hard limit " +
              std::to_string(limit.rlim_max) +
              "); more clients wait in the listener's queue until connections close. "
              "Raise the hard limit (ulimit -Hn as root, LimitNOFILE=) for more";
    } else {
      text += "); retrying every 100 ms";
    }
    return text;
  }

  void add_connection(int fd) {
    int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    auto conn = std::make_shared<Connection>(fd, next_id);
    next_id += detail::kMaxShards;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = conn->id;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
      ::close(fd);
      return;
    }
    sockaddr_storage remote{};
    socklen_t length = sizeof(remote);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &length) == 0) {
      tcp::endpoint endpoint;
      endpoint.resize(length);
      std::memcpy(endpoint.data(), &remote, length);
      conn->peer_host = endpoint.address().to_string();
      conn->peer = format_endpoint(conn->peer_host, endpoint.port());
      // A peer at this socket's own address is on this host (node 0's workers reach MASTER_ADDR,
      // an address of node 0): admission takes it as loopback.
      sockaddr_storage own{};
      socklen_t own_length = sizeof(own);
      if (options.admit_members_only &&
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&own), &own_length) == 0) {
        tcp::endpoint local;
        local.resize(own_length);
        std::memcpy(local.data(), &own, own_length);
        conn->from_this_host = local.address() == endpoint.address();
      }
    } else {
      conn->peer = "?";
    }
    connections.emplace(conn->id, conn);
    total_connections.fetch_add(1, std::memory_order_relaxed);
  }

  // Reads what the connection has (up to kReadsPerEvent buffers) and applies the whole requests
  // in it. True if more may be waiting.
  bool read_some(Connection& conn) {
    bool eof = false;
    bool more = false;
    for (int i = 0;; ++i) {
      if (i == kReadsPerEvent) {
        more = true;
        break;
      }
      const ssize_t n = ::recv(conn.fd, read_buffer.get(), kReadBufferBytes, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) {
        eof = true;  // EOF or reset: serve what arrived before it, then close
        break;
      }
      if (conn.in.empty()) conn.partial_since = round_time;
      conn.in.append(read_buffer.get(), static_cast<std::size_t>(n));
      if (static_cast<std::size_t>(n) < kReadBufferBytes) break;
    }
    process(conn);
    if (eof) close(conn, {});
    count_unfinished(conn);
    return more && !conn.closed;
  }

  // Keeps unfinished_bytes up to date with `conn.in`, and sheds the oldest unfinished requests
  // when it passes max_unfinished_bytes.
  void count_unfinished(Connection& conn) {
    if (conn.closed) return;
    // The memory `in` holds: a large buffer's capacity (appends grow it up to twice its size).
    const std::size_t held =
        conn.in.capacity() > kKeptBufferBytes ? conn.in.capacity() : conn.in.size();
    unfinished_bytes = unfinished_bytes - conn.counted_in + held;
    conn.counted_in = held;
    if (unfinished_bytes > options.max_unfinished_bytes) shed_unfinished();
  }

  void shed_unfinished() {
    std::vector<std::shared_ptr<Connection>> holding;
    for (auto& [id, conn] : connections)
      if (conn->counted_in > 0) holding.push_back(conn);
    std::sort(holding.begin(), holding.end(),
              [](const auto& a, const auto& b) { return a->partial_since < b->partial_since; });
    const std::string limit = std::to_string(options.max_unfinished_bytes >> 20) + " MB";
    for (auto& conn : holding) {
      if (unfinished_bytes <= options.max_unfinished_bytes) break;
      close(*conn, "the store held more unfinished requests than its limit of " + limit +
                       ", and this one's was the oldest (" + std::to_string(conn->counted_in) +
                       " bytes)");
    }
  }

  void process(Connection& conn) {
    std::size_t pos = 0;
    std::string_view in = conn.in;
    if (!conn.dialect_known) {
      auto detection = detect_dialect(in, options.legacy_dialect);
      if (!detection.complete) return;
      conn.dialect_known = true;
      conn.dialect = detection.dialect;
      pos = detection.consumed;
    }
    std::string error;
    std::optional<StateLock> lock;  // taken at the first request, for all of this read's
    while (pos < in.size() && !conn.closed) {
      // Back-pressure: a client that does not read its replies gets no more of them. Its
      // requests wait here, and the rest in the kernel once reading is paused.
      if (conn.pending() >= options.pause_reading_bytes) {
        conn.requests_held = true;
        break;
      }
      auto result = parse_request(in.substr(pos), conn.dialect, options.limits, request);
      if (result.status == ParseStatus::kIncomplete) break;
      if (result.status == ParseStatus::kError) return close(conn, result.error);
      pos += result.consumed;
      if (!lock) lock.emplace(*this);
      if (options.admit_members_only && !conn.host_told) {
        state.connection_from(conn.id, conn.peer_host, conn.from_this_host);
        conn.host_told = true;
      }
      if (!state.apply(conn.id, conn.dialect, request, *this, error)) return close(conn, error);
    }
    if (pos > 0) {
      conn.in.erase(0, pos);
      conn.partial_since = round_time;
      release_if_large(conn.in);
    }
  }

  // Serves the requests that waited for their connection's replies to drain.
  void resume_held() {
    std::vector<std::shared_ptr<Connection>> batch;
    batch.swap(held);
    for (auto& conn : batch) {
      if (conn->closed || !conn->requests_held) continue;
      conn->requests_held = false;
      process(*conn);
      count_unfinished(*conn);
    }
  }

  // Writes the replies of a round. With two or more connections to answer, their first sends go
  // out together through the send ring (one system call) when `batching` finds that cheaper
  // here; try_write then finishes what is left (a partial send, a full socket) and does the
  // bookkeeping, as for a single reply.
  void flush_dirty() {
    flushing.swap(dirty);  // both keep their capacity: no allocation per round
    const bool adapt = options.batch_sends && options.adapt_batching;
    if (flushing.size() > 1 && options.batch_sends && send_ring().ok() &&
        (!adapt || batching.batch())) {
      send_together(flushing);
    }
    if (adapt && send_ring().ok()) batching.sent(flushing.size());
    for (auto& conn : flushing) {
      conn->dirty = false;
      if (conn->closed) continue;
      if (conn->send_failed) {
        close(*conn, {});
        continue;
      }
      try_write(conn);
    }
    flushing.clear();
    if (!round_closes.empty()) log_closes();
  }

  void send_together(std::vector<std::shared_ptr<Connection>>& batch) {
    auto on_done = [&](std::uint64_t index, int result) {
      Connection& conn = *batch[index];
      if (result > 0) {
        conn.out_pos += static_cast<std::size_t>(result);
        conn.write_blocked_since = round_time;
      } else if (result != -EAGAIN && result != -EWOULDBLOCK && result != -EINTR) {
        conn.send_failed = true;
      }
    };
    for (std::size_t i = 0; i < batch.size() && send_ring().ok(); ++i) {
      Connection& conn = *batch[i];
      if (conn.closed || conn.over_limit || conn.pending() == 0) continue;
      if (send_ring().full()) send_ring().flush(on_done);
      if (!send_ring().ok()) break;
      send_ring().send(conn.fd, conn.out.data() + conn.out_pos, conn.pending(), i);
    }
    send_ring().flush(on_done);
  }

  void try_write(const std::shared_ptr<Connection>& conn) {
    while (conn->out_pos < conn->out.size()) {
      const ssize_t n = ::send(conn->fd, conn->out.data() + conn->out_pos,
                               conn->out.size() - conn->out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) return close(*conn, {});
      conn->out_pos += static_cast<std::size_t>(n);
      conn->write_blocked_since = round_time;
    }
    if (conn->over_limit || conn->pending() > options.max_pending_reply_bytes) {
      return close(*conn, "its replies are not being read (" + std::to_string(conn->pending()) +
                              " bytes pending, over the limit of " +
                              std::to_string(options.max_pending_reply_bytes) + ")");
    }
    if (conn->pending() == 0) {
      conn->out.clear();
      conn->out_pos = 0;
      release_if_large(conn->out);
    }
    update_interest(*conn);
    if (!conn->closed && conn->requests_held && conn->pending() < options.pause_reading_bytes) {
      held.push_back(conn);
    }
  }

  // Watches a connection for what it can do: readable unless its replies are over
  // pause_reading_bytes, writable while replies wait for room in its socket. A call costs an
  // epoll_ctl only when that changes, which the one-request-one-reply clients never make it do.
  void update_interest(Connection& conn) {
    if (conn.closed) return;
    const bool want_out = conn.pending() > 0;
    const bool want_in = conn.pending() < options.pause_reading_bytes;
    if (want_out == conn.write_waiting && want_in == conn.reading) return;
    epoll_event event{};
    event.events = (want_in ? EPOLLIN : 0u) | (want_out ? EPOLLOUT : 0u);
    event.data.u64 = conn.id;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, conn.fd, &event) != 0) return close(conn, {});
    if (want_out && !conn.write_waiting) conn.write_blocked_since = round_time;
    conn.write_waiting = want_out;
    conn.reading = want_in;
  }

  // The round's closes that have a reason, one entry per cause (the reason up to its figures):
  // logged when the round's replies are out, one line per cause, so that a burst (every watcher
  // of a key past its bound at one SET, a sweep of many stalled clients) is one line, not one per
  // connection.
  struct Closes {
    std::string cause, peer, reason;  // the first connection's peer and reason
    std::size_t count = 0;
  };
  std::vector<Closes> round_closes;

  // Past kCloseLinesPerWindow lines in kCloseLogWindow (a flood of bad clients), the closes are
  // counted instead, by kind (the reason up to its first figure: "unknown opcode ", "not a member
  // of the job: "), and said in one line per kind when the window ends, so that a flood of one
  // kind never hides another (a stranger's refusal among garbage).
  static constexpr std::size_t kCloseLinesPerWindow = 10;
  static constexpr std::chrono::seconds kCloseLogWindow{10};
  Clock::time_point close_window_start;
  std::size_t close_lines = 0;
  std::vector<Closes> unsaid;  // per kind: the count and the first one's peer and reason

  static std::string kind_of(const std::string& reason) {
    return reason.substr(0, reason.find_first_of("0123456789"));
  }

  void log_closes() {
    say_unsaid_closes();
    for (const Closes& c : round_closes) {
      if (close_lines < kCloseLinesPerWindow) {
        ++close_lines;
        options.log(c.count == 1 ? "closed connection from " + c.peer + ": " + c.reason
                                 : "closed " + std::to_string(c.count) +
                                       " connections for the same cause, the first from " + c.peer +
                                       ": " + c.reason);
        continue;
      }
      const std::string kind = kind_of(c.reason);
      auto it = std::find_if(unsaid.begin(), unsaid.end(),
                             [&](const Closes& u) { return u.cause == kind; });
      if (it == unsaid.end())
        unsaid.push_back({kind, c.peer, c.reason, c.count});
      else
        it->count += c.count;
    }
    round_closes.clear();
  }

  // When the window has ended (or the store stops): the closes it did not log, one line per
  // kind; a new window begins.
  void say_unsaid_closes(bool stopping_now = false) {
    const auto now = Clock::steady().now();
    if (!stopping_now && now - close_window_start < kCloseLogWindow) return;
    for (const Closes& u : unsaid) {
      options.log("closed " + std::to_string(u.count) + " more connections in " +
                  std::to_string(kCloseLogWindow.count()) +
                  " s without a line each, the first from " + u.peer + ": " + u.reason);
    }
    unsaid.clear();
    close_lines = 0;
    close_window_start = now;
  }

  void close(Connection& conn, const std::string& reason) {
    if (conn.closed) return;
    conn.closed = true;
    unfinished_bytes -= conn.counted_in;
    conn.counted_in = 0;
    if (!reason.empty()) {
      const std::string cause = reason.substr(0, reason.find('('));
      auto it = std::find_if(round_closes.begin(), round_closes.end(),
                             [&](const Closes& c) { return c.cause == cause; });
      if (it == round_closes.end()) it = round_closes.insert(it, {cause, conn.peer, reason, 0});
      ++it->count;
    }
    // Out of the epoll set before the close: a worker forked meanwhile may still hold the socket.
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, conn.fd, nullptr);
    ::close(conn.fd);
    if (state_locked) {
      state.drop_connection(conn.id);
    } else {
      StateLock lock(*this);
      state.drop_connection(conn.id);
    }
    connections.erase(conn.id);  // may destroy conn's owner last reference after handlers run
    total_connections.fetch_sub(1, std::memory_order_relaxed);
  }

  std::chrono::milliseconds sweep_interval() const {
    auto interval = options.stall_timeout / 4;
    return std::clamp(interval, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  }

  // Closes connections that left a request half-sent, or replies unread, past the stall timeout.
  void sweep() {
    say_unsaid_closes();
    auto now = Clock::steady().now();
    std::vector<std::shared_ptr<Connection>> stalled;
    for (auto& [id, conn] : connections) {
      bool half_sent = !conn->in.empty() && now - conn->partial_since > options.stall_timeout;
      bool unread = conn->write_waiting && now - conn->write_blocked_since > options.stall_timeout;
      if (half_sent || unread) stalled.push_back(conn);
    }
    for (auto& conn : stalled) {
      close(*conn, conn->write_waiting
                       ? "it does not read its replies (" + std::to_string(conn->pending()) +
                             " bytes pending for " + std::to_string(options.stall_timeout.count()) +
                             " ms)"
                       : "it stalled in the middle of a request");
    }
  }

  void close_all() {
    stopping = true;
    std::vector<std::shared_ptr<Connection>> all;
    for (auto& [id, conn] : connections) all.push_back(conn);
    for (auto& conn : all) close(*conn, {});
    if (!round_closes.empty()) log_closes();  // a round that stop() cut short
    say_unsaid_closes(true);
  }

  Server& server;
  const StoreServerOptions& options;
  detail::StoreState& state;          // under state_locked
  const unsigned index;               // in Server::shards, and the low bits of its connections' ids
  const std::vector<int> listen_fds;  // the server's, in the epoll set of the shard that accepts
  const int wake_fd;                  // an eventfd: stop(), or replies in the inbox
  std::atomic<bool>& stop_requested;
  std::atomic<std::size_t>& total_connections;  // of all shards
  int epoll_fd = -1;           // the listener while this shard accepts, the connections, the rest
  int sweep_fd = -1;           // a periodic timerfd: the stall sweep
  int accept_retry_fd = -1;    // a one-shot timerfd: the listener back after running out of fds
  bool private_table = false;  // the thread has a descriptor table of its own
  int fd_limit = 0;            // the soft RLIMIT_NOFILE when the thread started
  bool out_of_descriptors_logged = false;  // accepts fail for want of descriptors; said once
  std::size_t unfinished_bytes = 0;        // every connection's counted_in (max_unfinished_bytes)

  // Holds Server::state_mutex: the state is this thread's to apply to, and the replies that other
  // shards left in the inbox are taken first, so that a connection's replies keep the order in
  // which the state made them. On release, wakes the shards this one left replies for.
  class StateLock {
   public:
    explicit StateLock(Shard& shard);
    ~StateLock();
    StateLock(const StateLock&) = delete;
    StateLock& operator=(const StateLock&) = delete;

   private:
    Shard& shard_;
  };
  bool state_locked = false;
  // Replies for this shard's connections made by other shards' requests, with the id of the
  // connection each is for. Under Server::state_mutex.
  std::vector<std::pair<ConnectionId, std::string>> inbox;
  std::vector<std::pair<ConnectionId, std::string>> incoming;  // the inbox being taken
  std::uint32_t to_wake = 0;  // shards (bits) this one left replies for while it held the state
  std::string* foreign_buffer(ConnectionId id);
  bool start_next_shard();
  // Not zeroed: its pages are touched by the first recv, not when a launch that no worker
  // connects to makes the server.
  std::unique_ptr<char[]> read_buffer;
  Request request;  // the request being applied (parse_request overwrites it)
  std::unordered_map<ConnectionId, std::shared_ptr<Connection>> connections;
  std::vector<std::shared_ptr<Connection>> dirty;
  std::vector<std::shared_ptr<Connection>> flushing;  // the dirty ones being written
  // Made at the first reply, in the loop's thread: a job whose workers never connect (a launch of
  // /bin/true, a script without torch.distributed) sets up no io_uring.
  std::optional<detail::SendRing> ring;
  detail::SendRing& send_ring() {
    if (!ring) ring.emplace(kEventsPerPoll);
    return *ring;
  }
  detail::BatchingChoice batching{thread_preemptions};
  std::vector<std::shared_ptr<Connection>> held;  // requests_held, and room again for replies
  ConnectionId next_id;
  // When the round being served began: the requests' and replies' times, to the stall sweep's
  // precision, for one clock read per round instead of several per request.
  Clock::time_point round_time;
  bool stopping = false;  // loop thread only
};

// What the shards share: the options, the listener, the state and its mutex, every shard's
// wake-up eventfd, and the shards' threads.
struct Server {
  explicit Server(StoreServerOptions opts)
      : options(std::move(opts)), state(options.max_keys, options.max_reply_bytes) {
    if (!options.log) {
      options.log = [](std::string_view line) {
        std::fprintf(stderr, "acc-launch store: %.*s\n", static_cast<int>(line.size()),
                     line.data());
      };
    }
    if (!options.job_secret.empty()) state.require_job_secret(options.job_secret, random_salt());
    ACC_CHECK(!options.admit_members_only || !options.job_secret.empty(), ConfigError,
              "admitting only the job's members needs the job secret: the members are the "
              "addresses that prove it");
    if (options.admit_members_only) state.admit_members_only(options.member_hosts);
    if (options.raise_fd_limit) raise_fd_limit();
    // Every shard's eventfd exists before the first shard's thread copies the descriptor table,
    // so that each table has all of them: a shard wakes another by writing its descriptor.
    wake_fds.fill(-1);
    for (int& fd : wake_fds) {
      fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (fd < 0) close_descriptors();
      ACC_CHECK(fd >= 0, NetworkError,
                "cannot create the store server's event descriptors: ", std::strerror(errno));
    }
    try {
      listen();
    } catch (...) {
      close_descriptors();
      throw;
    }
  }

  ~Server() { close_descriptors(); }

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // In the table of the thread that made the server (the shards close their own copies).
  void close_descriptors() {
    for (int& fd : wake_fds) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
    close_listeners();
  }

  void close_listeners() {
    for (int fd : listen_fds) ::close(fd);
    listen_fds.clear();
  }

  // Plain sockets: Asio's acceptor would start Asio's reactor (an epoll set, an eventfd and a
  // timerfd of its own) that the loop never uses. host's listener picks the port where it is 0;
  // the others take the same, and where one finds it taken (another process listens there on
  // that address alone) every listener tries a fresh port, a few times.
  void listen() {
    std::vector<std::string> hosts{options.host.empty() ? "0.0.0.0" : options.host};
    hosts.insert(hosts.end(), options.more_hosts.begin(), options.more_hosts.end());
    ACC_CHECK(hosts.size() <= kMaxListeners, ConfigError, "the store listens on at most ",
              kMaxListeners, " addresses, not ", hosts.size());
    for (int tries = 1;; ++tries) {
      bound_port = options.port;
      try {
        for (const std::string& host : hosts) {
          listen_fds.push_back(listen_on(host, bound_port));
          if (bound_port == 0) bound_port = port_of(listen_fds.back());
        }
        break;
      } catch (const NetworkError&) {
        close_listeners();
        if (options.port != 0 || hosts.size() == 1 || tries == 8) throw;
      }
    }
    for (const std::string& host : hosts)
      bound_addresses.push_back(format_endpoint(host, bound_port));
    bound_address = bound_addresses.front();
  }

  // A listening socket on host:port. Throws as the constructor.
  static int listen_on(const std::string& host, int port) {
    const tcp::endpoint endpoint = resolve_endpoint(host, port);
    const std::string where = format_endpoint(host, port);
    const int fd = ::socket(endpoint.protocol().family(),
                            SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    ACC_CHECK(fd >= 0, NetworkError, "cannot open a socket for ", where, ": ",
              std::strerror(errno));
    int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (endpoint.address().is_v6() && endpoint.address().is_unspecified()) {
      int off = 0;
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    }
    const int bound = ::bind(fd, endpoint.data(), static_cast<socklen_t>(endpoint.size()));
    const int bind_error = errno;
    const int listened = bound == 0 ? ::listen(fd, SOMAXCONN) : -1;
    const int error = errno;
    if (listened != 0) ::close(fd);
    ACC_CHECK(bound == 0 || bind_error != EADDRINUSE, NetworkError, "address ", where,
              " is already in use; stop the process that holds it or choose another port");
    ACC_CHECK(bound == 0, NetworkError, "cannot listen on ", where, ": ",
              std::strerror(bind_error));
    ACC_CHECK(listened == 0, NetworkError, "cannot listen on ", where, ": ", std::strerror(error));
    return fd;
  }

  static int port_of(int fd) {
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
    return ntohs(local.ss_family == AF_INET6
                     ? reinterpret_cast<const sockaddr_in6&>(local).sin6_port
                     : reinterpret_cast<const sockaddr_in&>(local).sin_port);
  }

  // Makes shard `index` (> 0) and its thread, and waits until it serves. Under control_mutex.
  // Returns an empty string, or what failed (its thread has ended then, or is ending: stop()
  // joins it).
  std::string start_shard(unsigned index) {
    shards[index] = std::make_unique<Shard>(*this, index);
    std::promise<std::string> ready;
    std::future<std::string> served = ready.get_future();
    ++running_shards;
    threads[index] = std::thread([shard = shards[index].get(), ready = std::move(ready)]() mutable {
      shard->serve(&ready);
    });
    return served.get();
  }

  // Starts shard 0 for start() and run(): its descriptors here (throwing what fails), its loop on
  // a thread of its own, without waiting for it.
  void start_first_shard() {
    std::lock_guard lock(control_mutex);
    ACC_ASSERT(!running && !stopped);
    auto first = std::make_unique<Shard>(*this, 0);
    std::string error = first->make_descriptors();
    if (!error.empty()) {
      first->close_descriptors();
      throw NetworkError(error);
    }
    running = true;
    shards[0] = std::move(first);
    ++running_shards;
    threads[0] = std::thread([shard = shards[0].get()] { shard->serve(nullptr); });
  }

  // From shard `index`'s thread, out of descriptors: starts the next shard. False if there is
  // none to start (the last, stopping, or it failed before).
  bool start_shard_after(unsigned index) {
    std::lock_guard lock(control_mutex);
    if (stop_requested.load() || index + 1 >= detail::kMaxShards || shards[index + 1]) return false;
    std::string error = start_shard(index + 1);
    if (error.empty()) return true;
    options.log("cannot start another store thread for more connections: " + error);
    return false;
  }

  // A shard's thread, at its end.
  void shard_ended() {
    std::lock_guard lock(control_mutex);
    --running_shards;
    ended.notify_all();
  }

  // Wakes every shard to close everything and end; once. Under control_mutex.
  void ask_loop_to_stop() {
    if (stop_requested.exchange(true)) return;
    std::uint64_t one = 1;
    for (int fd : wake_fds) [[maybe_unused]] auto n = ::write(fd, &one, sizeof(one));
  }

  void stop() {
    std::vector<std::thread> to_join;
    bool all = true;
    {
      std::lock_guard lock(control_mutex);
      if (stopped) return;
      stopped = true;
      if (running) ask_loop_to_stop();
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
    // Shard 0's descriptors and the listener, in this table (their last copies): the port is
    // free once stop() returns.
    if (shards[0]) shards[0]->close_descriptors();
    close_listeners();
  }

  StoreServerOptions options;
  detail::StoreState state;     // under state_mutex
  std::mutex state_mutex;       // the state, and every shard's inbox
  std::vector<int> listen_fds;  // non-blocking; in the epoll set of the shard that accepts
  std::array<int, detail::kMaxShards> wake_fds{};
  int bound_port = 0;
  std::string bound_address;
  std::vector<std::string> bound_addresses;
  std::atomic<bool> stop_requested{false};
  std::atomic<std::size_t> num_connections{0};
  // Written once each, under control_mutex, before the shard's thread starts; read by other
  // shards (a reply to one of its connections) only after that.
  std::array<std::unique_ptr<Shard>, detail::kMaxShards> shards;

  std::mutex control_mutex;  // guards running, stopped, threads, running_shards
  bool running = false;
  bool stopped = false;
  std::array<std::thread, detail::kMaxShards> threads;
  int running_shards = 0;
  std::condition_variable ended;  // running_shards went down
};

Shard::Shard(Server& server, unsigned index)
    : server(server),
      options(server.options),
      state(server.state),
      index(index),
      listen_fds(server.listen_fds),
      wake_fd(server.wake_fds[index]),
      stop_requested(server.stop_requested),
      total_connections(server.num_connections),
      read_buffer(std::make_unique_for_overwrite<char[]>(kReadBufferBytes)),
      next_id(kFirstConnectionId + index) {}

std::string Shard::make_descriptors() {
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

void Shard::close_descriptors() {
  for (int* fd : {&epoll_fd, &sweep_fd, &accept_retry_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void Shard::serve(std::promise<std::string>* ready) {
  // How ps and top name the thread: the first as before, the others numbered.
  const std::string name = index == 0 ? "acc-store" : "acc-store-" + std::to_string(index);
  ::pthread_setname_np(::pthread_self(), name.c_str());
  // Keeps the server's listeners, every shard's eventfd and (shard 0) its own descriptors; the
  // rest of the copied table (the launcher's descriptors, or the previous shard's connections) is
  // closed in this one. Where the kernel or a seccomp profile refuses unshare, shard 0 serves from
  // the process's own table as before, and no further shard can have a table of its own.
  std::vector<int> keep(server.wake_fds.begin(), server.wake_fds.end());
  keep.insert(keep.end(), listen_fds.begin(), listen_fds.end());
  keep.insert(keep.end(), {epoll_fd, sweep_fd, accept_retry_fd});
  private_table = detail::use_own_descriptor_table(keep).empty();
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
  // release a private table only after join() returns). Shard 0's, in a table shared with the
  // thread that made them, are closed by that one (Server::stop).
  ring.reset();
  if (private_table) {
    close_descriptors();
    for (int fd : listen_fds) ::close(fd);
  }
  server.shard_ended();
}

Shard::StateLock::StateLock(Shard& shard) : shard_(shard) {
  shard_.server.state_mutex.lock();
  shard_.state_locked = true;
  if (shard_.inbox.empty()) return;
  shard_.incoming.swap(shard_.inbox);
  for (auto& [id, bytes] : shard_.incoming) {
    if (std::string* buffer = shard_.buffer_for(id)) buffer->append(bytes);
  }
  shard_.incoming.clear();
}

Shard::StateLock::~StateLock() {
  shard_.state_locked = false;
  shard_.server.state_mutex.unlock();
  for (unsigned i = 0; shard_.to_wake != 0; ++i, shard_.to_wake >>= 1) {
    std::uint64_t one = 1;
    if (shard_.to_wake & 1u) [[maybe_unused]]
      auto n = ::write(shard_.server.wake_fds[i], &one, 8);
  }
}

std::string* Shard::foreign_buffer(ConnectionId id) {
  const unsigned owner = detail::shard_of(id);
  Shard* shard = server.shards[owner].get();
  if (shard == nullptr) return nullptr;
  shard->inbox.emplace_back(id, std::string());
  to_wake |= 1u << owner;
  return &shard->inbox.back().second;
}

bool Shard::start_next_shard() {
  return server.start_shard_after(index);
}

}  // namespace

struct StoreServer::Impl : Server {
  using Server::Server;
};

StoreServer::StoreServer(StoreServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

StoreServer::~StoreServer() {
  stop();
}

int StoreServer::port() const {
  return impl_->bound_port;
}

std::string StoreServer::address() const {
  return impl_->bound_address;
}

std::vector<std::string> StoreServer::addresses() const {
  return impl_->bound_addresses;
}

std::uint64_t StoreServer::connection_capacity(std::uint64_t open_file_limit) {
  // Each table keeps stdin/out/err, the listener, the shards' eventfds, its epoll set, timers and
  // io_uring ring, and hands over to the next shard a few descriptors short of the limit.
  constexpr std::uint64_t kHeldBesides = 3 + 1 + detail::kMaxShards + 8 + kSpareDescriptors;
  return open_file_limit > kHeldBesides ? (open_file_limit - kHeldBesides) * detail::kMaxShards : 0;
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
  impl_->start_first_shard();
}

void StoreServer::run() {
  {
    std::lock_guard lock(impl_->control_mutex);
    if (impl_->stopped) return;
  }
  impl_->start_first_shard();
  std::unique_lock lock(impl_->control_mutex);
  impl_->ended.wait(lock,
                    [&] { return impl_->stop_requested.load() && impl_->running_shards == 0; });
}

void StoreServer::request_stop() {
  std::lock_guard lock(impl_->control_mutex);
  if (!impl_->stopped && impl_->running) impl_->ask_loop_to_stop();
}

void StoreServer::stop() {
  impl_->stop();
}

}  // namespace acc::rendezvous
