#include "acc/rendezvous/store_server.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
// Boost 1.74 Asio uses std::exchange without including <utility> under C++20.
#include <utility>
// clang-format off
#include <boost/asio.hpp>
// clang-format on
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"
#include "store_state.h"

namespace acc::rendezvous {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using detail::ConnectionId;

// Reads go through one buffer shared by all connections: a connection's socket is read only when
// it is readable (reactor style), so thousands of idle connections cost no buffer each.
constexpr std::size_t kReadBufferBytes = 64 * 1024;
// Reads per readiness event before yielding to other connections.
constexpr int kReadsPerEvent = 4;
// Accepts per readiness event, for the same fairness.
constexpr int kAcceptsPerEvent = 256;

struct Connection {
  Connection(asio::io_context& io, ConnectionId id) : socket(io), id(id) {}

  tcp::socket socket;
  ConnectionId id;
  std::string peer;
  bool dialect_known = false;
  Dialect dialect = Dialect::kV1_13;
  bool closed = false;
  std::string in;  // received bytes not yet parsed into a whole request
  Clock::time_point partial_since;
  std::string out;  // reply bytes not yet written, from out_pos on
  std::size_t out_pos = 0;
  bool write_waiting = false;  // an async_wait for writability is in flight
  bool dirty = false;          // queued in Impl::dirty_ for a write attempt
  Clock::time_point write_blocked_since;
};

void raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

tcp::endpoint resolve_endpoint(asio::io_context& io, const std::string& host, int port) {
  ACC_CHECK(port >= 0 && port <= 65535, ConfigError, "store port ", port,
            " is out of range; use 0 to 65535");
  auto port_number = static_cast<unsigned short>(port);
  if (host.empty() || host == "0.0.0.0") return {tcp::v4(), port_number};
  if (host == "::") return {tcp::v6(), port_number};
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (!ec) return {address, port_number};
  tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  ACC_CHECK(!ec && !results.empty(), ConfigError, "cannot resolve store host '", host,
            "': ", ec ? ec.message() : "no address", "; pass an IP address or a known name");
  return results.begin()->endpoint();
}

}  // namespace

struct StoreServer::Impl : detail::ReplySink {
  explicit Impl(StoreServerOptions opts)
      : options(std::move(opts)),
        acceptor(io),
        sweep_timer(io),
        accept_retry_timer(io),
        state(options.max_keys),
        read_buffer(kReadBufferBytes) {
    if (!options.log) {
      options.log = [](std::string_view line) {
        std::fprintf(stderr, "acc-launch store: %.*s\n", static_cast<int>(line.size()),
                     line.data());
      };
    }
    if (options.raise_fd_limit) raise_fd_limit();
    listen();
  }

  void listen() {
    tcp::endpoint endpoint = resolve_endpoint(io, options.host, options.port);
    std::string where = format_endpoint(options.host, options.port);
    boost::system::error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    ACC_CHECK(!ec, NetworkError, "cannot open a socket for ", where, ": ", ec.message());
    // Workers forked by the launcher must not inherit the listener (it would keep the port).
    ::fcntl(acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (endpoint.address().is_v6() && endpoint.address().is_unspecified()) {
      acceptor.set_option(asio::ip::v6_only(false), ec);
    }
    acceptor.bind(endpoint, ec);
    ACC_CHECK(ec != asio::error::address_in_use, NetworkError, "address ", where,
              " is already in use; stop the process that holds it or choose another port");
    ACC_CHECK(!ec, NetworkError, "cannot listen on ", where, ": ", ec.message());
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
    ACC_CHECK(!ec, NetworkError, "cannot listen on ", where, ": ", ec.message());
    acceptor.non_blocking(true, ec);
    bound_port = acceptor.local_endpoint(ec).port();
    bound_address = format_endpoint(options.host.empty() ? "0.0.0.0" : options.host, bound_port);
  }

  // --- ReplySink: called by StoreState while it applies a request.
  std::string* buffer_for(ConnectionId id) override {
    auto it = connections.find(id);
    if (it == connections.end() || it->second->closed) return nullptr;
    Connection& conn = *it->second;
    if (!conn.dirty && !conn.write_waiting) {
      conn.dirty = true;
      dirty.push_back(it->second);
    }
    return &conn.out;
  }

  void arm() {
    wait_accept();
    arm_sweep();
  }

  void wait_accept() {
    acceptor.async_wait(tcp::acceptor::wait_read, [this](boost::system::error_code ec) {
      if (stopping || ec == asio::error::operation_aborted) return;
      accept_ready();
    });
  }

  void accept_ready() {
    for (int i = 0; i < kAcceptsPerEvent; ++i) {
      // accept4 makes the socket close-on-exec atomically, so a concurrent fork+exec in the
      // launcher's thread cannot leak it; Asio's own accept does not.
      int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: back off instead of spinning on a listener that stays readable.
          options.log("cannot accept a connection: " + std::string(std::strerror(errno)));
          accept_retry_timer.expires_after(std::chrono::milliseconds(100));
          accept_retry_timer.async_wait([this](boost::system::error_code ec) {
            if (!stopping && !ec) wait_accept();
          });
          return;
        }
        break;  // EAGAIN: nothing more to accept now
      }
      add_connection(fd);
    }
    wait_accept();
  }

  void add_connection(int fd) {
    auto conn = std::make_shared<Connection>(io, next_id++);
    boost::system::error_code ec;
    conn->socket.assign(acceptor.local_endpoint(ec).protocol(), fd, ec);
    if (ec) {
      ::close(fd);
      return;
    }
    conn->socket.non_blocking(true, ec);
    conn->socket.set_option(tcp::no_delay(true), ec);
    auto remote = conn->socket.remote_endpoint(ec);
    conn->peer = ec ? "?" : format_endpoint(remote.address().to_string(), remote.port());
    connections.emplace(conn->id, conn);
    num_connections.store(connections.size(), std::memory_order_relaxed);
    wait_read(conn);
  }

  void wait_read(const std::shared_ptr<Connection>& conn) {
    conn->socket.async_wait(tcp::socket::wait_read, [this, conn](boost::system::error_code ec) {
      if (conn->closed || ec == asio::error::operation_aborted) return;
      if (ec) return close(*conn, {});
      on_readable(conn);
    });
  }

  void on_readable(const std::shared_ptr<Connection>& conn, bool retry = false) {
    bool eof = false;
    bool got = false;
    for (int i = 0; i < kReadsPerEvent; ++i) {
      boost::system::error_code ec;
      std::size_t n = conn->socket.read_some(asio::buffer(read_buffer), ec);
      if (ec == asio::error::would_block) break;
      if (ec) {
        eof = true;  // EOF or reset: serve what arrived before it, then close
        break;
      }
      if (conn->in.empty()) conn->partial_since = Clock::now();
      conn->in.append(read_buffer.data(), n);
      got = true;
      if (n < read_buffer.size()) break;
    }
    process(*conn);
    if (eof) close(*conn, {});
    flush_dirty();
    if (conn->closed) return;
    if (got && !retry && !conn->in.empty()) {
      // PyTorch's clients send a request in several writes (the opcode alone, then the rest).
      // Having read only its head, look again after the other ready connections, when the rest
      // has usually arrived, instead of paying another trip through epoll for it.
      asio::post(io, [this, conn] {
        if (!conn->closed && !stopping) on_readable(conn, /*retry=*/true);
      });
      return;
    }
    wait_read(conn);
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
    while (pos < in.size() && !conn.closed) {
      auto result = parse_request(in.substr(pos), conn.dialect, options.limits, request);
      if (result.status == ParseStatus::kIncomplete) break;
      if (result.status == ParseStatus::kError) return close(conn, result.error);
      pos += result.consumed;
      if (!state.apply(conn.id, conn.dialect, request, *this, error)) return close(conn, error);
    }
    if (pos > 0) {
      conn.in.erase(0, pos);
      conn.partial_since = Clock::now();
    }
  }

  void flush_dirty() {
    std::vector<std::shared_ptr<Connection>> batch;
    batch.swap(dirty);
    for (auto& conn : batch) {
      conn->dirty = false;
      if (!conn->closed) try_write(conn);
    }
  }

  void try_write(const std::shared_ptr<Connection>& conn) {
    while (conn->out_pos < conn->out.size()) {
      boost::system::error_code ec;
      std::size_t n = conn->socket.write_some(
          asio::buffer(conn->out.data() + conn->out_pos, conn->out.size() - conn->out_pos), ec);
      if (ec == asio::error::would_block) break;
      if (ec) return close(*conn, {});
      conn->out_pos += n;
      conn->write_blocked_since = Clock::now();
    }
    if (conn->out_pos == conn->out.size()) {
      conn->out.clear();
      conn->out_pos = 0;
      return;
    }
    if (conn->out.size() - conn->out_pos > options.max_pending_reply_bytes) {
      return close(*conn, "it does not read its replies (" +
                              std::to_string(conn->out.size() - conn->out_pos) + " bytes pending)");
    }
    if (conn->write_waiting) return;
    conn->write_waiting = true;
    conn->socket.async_wait(tcp::socket::wait_write, [this, conn](boost::system::error_code ec) {
      conn->write_waiting = false;
      if (conn->closed || ec == asio::error::operation_aborted) return;
      if (ec) return close(*conn, {});
      try_write(conn);
    });
  }

  void close(Connection& conn, const std::string& reason) {
    if (conn.closed) return;
    conn.closed = true;
    if (!reason.empty()) options.log("closed connection from " + conn.peer + ": " + reason);
    boost::system::error_code ec;
    conn.socket.close(ec);
    state.drop_connection(conn.id);
    connections.erase(conn.id);  // may destroy conn's owner last reference after handlers run
    num_connections.store(connections.size(), std::memory_order_relaxed);
  }

  std::chrono::milliseconds sweep_interval() const {
    auto interval = options.stall_timeout / 4;
    return std::clamp(interval, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  }

  void arm_sweep() {
    sweep_timer.expires_after(sweep_interval());
    sweep_timer.async_wait([this](boost::system::error_code ec) {
      if (stopping || ec) return;
      sweep();
      arm_sweep();
    });
  }

  // Closes connections that left a request half-sent, or replies unread, past the stall timeout.
  void sweep() {
    auto now = Clock::now();
    std::vector<std::shared_ptr<Connection>> stalled;
    for (auto& [id, conn] : connections) {
      bool half_sent = !conn->in.empty() && now - conn->partial_since > options.stall_timeout;
      bool unread = conn->write_waiting && now - conn->write_blocked_since > options.stall_timeout;
      bool overfull = conn->out.size() - conn->out_pos > options.max_pending_reply_bytes;
      if (half_sent || unread || overfull) stalled.push_back(conn);
    }
    for (auto& conn : stalled) {
      close(*conn, !conn->in.empty() ? "it stalled in the middle of a request"
                                     : "it does not read its replies");
    }
  }

  void close_all() {
    stopping = true;
    boost::system::error_code ec;
    acceptor.close(ec);
    sweep_timer.cancel();
    accept_retry_timer.cancel();
    std::vector<std::shared_ptr<Connection>> all;
    for (auto& [id, conn] : connections) all.push_back(conn);
    for (auto& conn : all) close(*conn, {});
  }

  StoreServerOptions options;
  // One thread runs the loop: the hint lets Asio skip waking other threads (posting stays safe).
  asio::io_context io{1};
  tcp::acceptor acceptor;
  asio::steady_timer sweep_timer;
  asio::steady_timer accept_retry_timer;
  detail::StoreState state;
  std::vector<char> read_buffer;
  Request request;  // the request being applied (parse_request overwrites it)
  std::unordered_map<ConnectionId, std::shared_ptr<Connection>> connections;
  std::vector<std::shared_ptr<Connection>> dirty;
  ConnectionId next_id = 1;
  int bound_port = 0;
  std::string bound_address;
  bool stopping = false;  // loop thread only
  std::atomic<std::size_t> num_connections{0};

  std::mutex control_mutex;  // guards running, stopped, thread
  bool running = false;
  bool stopped = false;
  std::thread thread;
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

std::size_t StoreServer::num_connections() const {
  return impl_->num_connections.load(std::memory_order_relaxed);
}

void StoreServer::start() {
  std::lock_guard lock(impl_->control_mutex);
  ACC_ASSERT(!impl_->running && !impl_->stopped);
  impl_->running = true;
  impl_->arm();
  impl_->thread = std::thread([impl = impl_.get()] {
    ::pthread_setname_np(::pthread_self(), "acc-store");  // how ps and top name the thread
    impl->io.run();
  });
}

void StoreServer::run() {
  {
    std::lock_guard lock(impl_->control_mutex);
    ACC_ASSERT(!impl_->running);
    if (impl_->stopped) return;
    impl_->running = true;
    impl_->arm();
  }
  impl_->io.run();
}

void StoreServer::stop() {
  std::thread to_join;
  {
    std::lock_guard lock(impl_->control_mutex);
    if (impl_->stopped) return;
    impl_->stopped = true;
    if (impl_->running) {
      // The loop closes everything itself; with nothing left to wait for, io.run() returns.
      asio::post(impl_->io, [impl = impl_.get()] { impl->close_all(); });
      if (impl_->thread.joinable() && impl_->thread.get_id() != std::this_thread::get_id()) {
        to_join = std::move(impl_->thread);
      }
    } else {
      impl_->close_all();
    }
  }
  if (to_join.joinable()) to_join.join();
}

}  // namespace acc::rendezvous
