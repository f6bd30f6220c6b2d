#include "observe/health_check.h"

#include <fcntl.h>
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <thread>
// Boost 1.74 Asio uses std::exchange without including <utility> under C++20.
#include <utility>
// clang-format off
#include <boost/asio.hpp>
// clang-format on

#include "acc/common/error.h"

namespace acc::launcher {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// A request is a request line and headers; anything longer is not a probe.
constexpr std::size_t kMaxRequestBytes = 8192;
// How long one client may take to send its request and read the reply.
constexpr std::chrono::seconds kClientTime{5};
// Clients served at once; more are closed when accepted.
constexpr int kMaxClients = 16;
// After a failed accept (out of descriptors), the next try.
constexpr std::chrono::milliseconds kAcceptRetry{100};

const char* state_name(Liveness::State state) {
  switch (state) {
    case Liveness::State::kNoAttempt:
      return "no_attempt";
    case Liveness::State::kNotReporting:
      return "not_reporting";
    case Liveness::State::kProgress:
      return "progress";
    case Liveness::State::kNoProgress:
      return "no_progress";
  }
  return "unknown";
}

std::string decimal(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", value);
  return text;
}

void close_on_exec(int fd) {
  // Workers are spawned while the server runs: none may inherit its sockets.
  ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
}

}  // namespace

Liveness liveness_of(const std::vector<progress_file::Snapshot>& files, std::int64_t started_ns,
                     std::int64_t now_ns, std::chrono::milliseconds timeout) {
  Liveness liveness;
  std::int64_t last = started_ns;
  bool reporting = false;
  for (const progress_file::Snapshot& file : files) {
    if (file.writer_pid == 0) continue;
    reporting = true;
    last = std::max(last, file.last_progress_ns);
  }
  if (!reporting) {
    liveness.state = Liveness::State::kNotReporting;
    return liveness;
  }
  liveness.seconds_since_progress =
      static_cast<double>(std::max<std::int64_t>(0, now_ns - last)) / 1e9;
  liveness.state = liveness.seconds_since_progress * 1000 <= static_cast<double>(timeout.count())
                       ? Liveness::State::kProgress
                       : Liveness::State::kNoProgress;
  return liveness;
}

std::string health_check_reply(const Liveness& liveness, double unix_now,
                               std::chrono::milliseconds timeout) {
  const std::string body =
      std::string("{\"state\": \"") + state_name(liveness.state) +
      "\", \"last_progress_time\": " + decimal(unix_now - liveness.seconds_since_progress) +
      ", \"seconds_since_progress\": " + decimal(liveness.seconds_since_progress) +
      ", \"timeout_s\": " + decimal(static_cast<double>(timeout.count()) / 1000) + "}\n";
  const bool alive = liveness.state != Liveness::State::kNoProgress;
  return std::string(alive ? "HTTP/1.1 200 OK\r\n" : "HTTP/1.1 503 Service Unavailable\r\n") +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n" + body;
}

// --- WorkerProgress ------------------------------------------------------------------------------

struct WorkerProgress::Attempt {
  std::int64_t started_ns = 0;
  std::vector<std::unique_ptr<progress_file::Reader>> files;  // null: cannot be read
};

void WorkerProgress::attempt_started(const std::vector<std::string>& progress_files) {
  auto attempt = std::make_shared<Attempt>();
  attempt->started_ns = progress_file::now_ns();
  for (const std::string& path : progress_files) {
    try {
      attempt->files.push_back(std::make_unique<progress_file::Reader>(path));
    } catch (const Error&) {
      attempt->files.push_back(nullptr);
    }
  }
  const std::lock_guard lock(mutex_);
  attempt_ = std::move(attempt);
}

void WorkerProgress::attempt_ended() {
  const std::lock_guard lock(mutex_);
  attempt_.reset();
}

Liveness WorkerProgress::look() const {
  std::shared_ptr<const Attempt> attempt;
  {
    const std::lock_guard lock(mutex_);
    attempt = attempt_;
  }
  if (!attempt) return Liveness{};
  std::vector<progress_file::Snapshot> files;
  for (const auto& file : attempt->files)
    if (file) files.push_back(file->snapshot(false));
  return liveness_of(files, attempt->started_ns, progress_file::now_ns(), timeout_);
}

// --- HealthCheckServer ---------------------------------------------------------------------------

// Members in this order: the io_context goes before `clients` and `reply`, so that the clients
// it still holds when it is destroyed find both.
struct HealthCheckServer::Impl {
  int clients = 0;
  std::function<std::string()> reply;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::thread thread;

  error_code open(const tcp& protocol, int port) {
    error_code ec;
    acceptor.close(ec);
    acceptor.open(protocol, ec);
    if (!ec) close_on_exec(acceptor.native_handle());
    // Both families on one socket; where IPv6 is off, the IPv4 socket below.
    if (!ec && protocol == tcp::v6()) acceptor.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(tcp::endpoint(protocol, static_cast<unsigned short>(port)), ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    return ec;
  }

  void accept();
  std::string answer() {
    try {
      return reply();
    } catch (const std::exception&) {
      return "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    }
  }
};

namespace {

// One connection: read the request (up to its blank line), write the reply, close. The timer
// closes it after kClientTime whatever it is doing.
class Client : public std::enable_shared_from_this<Client> {
 public:
  Client(tcp::socket socket, int& clients, std::function<std::string()> answer)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        clients_(clients),
        answer_(std::move(answer)) {
    ++clients_;
    close_on_exec(socket_.native_handle());
  }
  ~Client() { --clients_; }

  void start() {
    timer_.expires_after(kClientTime);
    timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (!ec) self->close();
    });
    asio::async_read_until(
        socket_, asio::dynamic_buffer(request_, kMaxRequestBytes), "\r\n\r\n",
        [self = shared_from_this()](const error_code& ec, std::size_t) { self->on_request(ec); });
  }

 private:
  void on_request(const error_code& ec) {
    if (ec) return close();  // gone, too long, or out of time
    reply_ = answer_();
    asio::async_write(
        socket_, asio::buffer(reply_),
        [self = shared_from_this()](const error_code&, std::size_t) { self->close(); });
  }

  void close() {
    error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  int& clients_;
  std::function<std::string()> answer_;
  std::string request_;
  std::string reply_;
};

}  // namespace

void HealthCheckServer::Impl::accept() {
  acceptor.async_accept([this](const error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      accept_retry.expires_after(kAcceptRetry);
      accept_retry.async_wait([this](const error_code& e) {
        if (!e) accept();
      });
      return;
    }
    if (clients < kMaxClients)
      std::make_shared<Client>(std::move(socket), clients, [this] { return answer(); })->start();
    accept();  // a client over the limit is closed as `socket` goes
  });
}

HealthCheckServer::HealthCheckServer(int port, std::function<std::string()> reply)
    : impl_(std::make_unique<Impl>()) {
  impl_->reply = std::move(reply);
  error_code ec = impl_->open(tcp::v6(), port);
  if (ec && ec != asio::error::address_in_use) ec = impl_->open(tcp::v4(), port);
  ACC_CHECK(!ec, NetworkError, "cannot serve the health check on port ", port,
            " (TORCHELASTIC_HEALTH_CHECK_PORT): ", ec.message(),
            "; free the port or set another one");
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] {
    ::pthread_setname_np(::pthread_self(), "acc-health");  // how ps and top name the thread
    try {
      impl->io.run();
    } catch (const std::exception&) {
      // Nothing is thrown by the handlers; should Asio throw, the check stops and the job goes
      // on: a probe then sees the port closed.
    }
  });
}

HealthCheckServer::~HealthCheckServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  error_code ignored;
  impl_->acceptor.close(ignored);
}

}  // namespace acc::launcher
