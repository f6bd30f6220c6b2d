#include "status/http_server.h"

#include <fcntl.h>
#include <pthread.h>

#include <chrono>
#include <thread>
// Boost 1.74 Asio uses std::exchange without including <utility> under C++20.
#include <utility>
// clang-format off
#include <boost/asio.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
// clang-format on

#include "acc/common/error.h"

namespace acc::launcher {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// A request is a request line and headers (read by Boost.Beast's parser); anything longer is not
// one of ours.
constexpr std::size_t kMaxRequestBytes = 8192;
// How long one client may take to send its request and read the reply.
constexpr std::chrono::seconds kClientTime{5};
// Clients served at once; more are closed when accepted.
constexpr int kMaxClients = 16;
// After a failed accept (out of descriptors), the next try.
constexpr std::chrono::milliseconds kAcceptRetry{100};

void close_on_exec(int fd) {
  // Workers are spawned while the server runs: none may inherit its sockets.
  ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
}

const char* reason_of(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

}  // namespace

std::string http_reply(int status, const std::string& content_type, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason_of(status) +
         "\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n" + body;
}

std::string path_of_target(std::string_view target) {
  return std::string(target.substr(0, target.find_first_of("?#")));
}

// Members in this order: the io_context goes before `clients` and `handler`, so that the clients
// it still holds when it is destroyed find both.
struct HttpServer::Impl {
  int clients = 0;
  Handler handler;
  std::function<void()> periodic;
  std::chrono::milliseconds period{0};
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  asio::steady_timer periodic_timer{io};
  std::thread thread;

  error_code open(const tcp::endpoint& endpoint, bool both_families) {
    error_code ec;
    acceptor.close(ec);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) close_on_exec(acceptor.native_handle());
    // Both families on one socket; where IPv6 is off, the IPv4 socket below.
    if (!ec && both_families) acceptor.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    return ec;
  }

  void accept();
  void run_periodic() {
    try {
      periodic();
    } catch (const std::exception&) {
      // A failed run is skipped; the next one tries again.
    }
    periodic_timer.expires_after(period);
    periodic_timer.async_wait([this](const error_code& ec) {
      if (!ec) run_periodic();
    });
  }
  std::string answer(const HttpRequest& request) {
    try {
      return handler(request);
    } catch (const std::exception&) {
      return http_reply(500, "text/plain", "");
    }
  }
};

namespace {

HttpRequest request_of(const http::request<http::empty_body>& message, const tcp::socket& socket) {
  HttpRequest request;
  const std::string_view target(message.target().data(), message.target().size());
  request.path = path_of_target(target);
  if (const auto mark = target.find('?'); mark != std::string_view::npos)
    request.query = std::string(target.substr(mark + 1, target.find('#', mark) - mark - 1));
  if (const auto field = message.find(http::field::authorization); field != message.end())
    request.authorization = std::string(field->value());
  error_code ec;
  asio::ip::address peer = socket.remote_endpoint(ec).address();
  if (!ec && peer.is_v6() && peer.to_v6().is_v4_mapped())
    peer = asio::ip::make_address_v4(asio::ip::v4_mapped, peer.to_v6());
  request.from_loopback = !ec && peer.is_loopback();
  return request;
}

// One connection: read the request (up to its blank line), write the reply, close. The timer
// closes it after kClientTime whatever it is doing.
class Client : public std::enable_shared_from_this<Client> {
 public:
  Client(tcp::socket socket, int& clients, std::function<std::string(const HttpRequest&)> answer)
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
    parser_.header_limit(kMaxRequestBytes);
    http::async_read(
        socket_, buffer_, parser_,
        [self = shared_from_this()](const error_code& ec, std::size_t) { self->on_request(ec); });
  }

 private:
  void on_request(const error_code& ec) {
    if (ec) return close();  // gone, not HTTP, too long, or out of time
    reply_ = answer_(request_of(parser_.get(), socket_));
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
  std::function<std::string(const HttpRequest&)> answer_;
  beast::flat_buffer buffer_{kMaxRequestBytes};
  http::request_parser<http::empty_body> parser_;
  std::string reply_;
};

}  // namespace

void HttpServer::Impl::accept() {
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
      std::make_shared<Client>(std::move(socket), clients, [this](const HttpRequest& request) {
        return answer(request);
      })->start();
    accept();  // a client over the limit is closed as `socket` goes
  });
}

HttpServer::HttpServer(const std::string& host, int port, Handler handler,
                       const std::string& serves)
    : impl_(std::make_unique<Impl>()) {
  impl_->handler = std::move(handler);
  const auto port_number = static_cast<unsigned short>(port);
  error_code ec;
  if (host.empty()) {
    ec = impl_->open(tcp::endpoint(tcp::v6(), port_number), true);
    if (ec && ec != asio::error::address_in_use)
      ec = impl_->open(tcp::endpoint(tcp::v4(), port_number), false);
  } else {
    const asio::ip::address address =
        asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
    ACC_CHECK(!ec, ConfigError, "cannot serve ", serves, ": '", host,
              "' is not an IP address (an address of this host, e.g. 127.0.0.1 or 0.0.0.0)");
    ec = impl_->open(tcp::endpoint(address, port_number), false);
    ACC_CHECK(ec != boost::system::errc::address_not_available, ConfigError, "cannot serve ",
              serves, ": ", host, " is not an address of this host");
  }
  ACC_CHECK(!ec, NetworkError, "cannot serve ", serves, ": ", ec.message(),
            "; free the port or set another one");
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] {
    ::pthread_setname_np(::pthread_self(), "acc-http");  // how ps and top name the thread
    try {
      impl->io.run();
    } catch (const std::exception&) {
      // Nothing is thrown by the handlers; should Asio throw, the server stops and the job goes
      // on: a client then sees the port closed.
    }
  });
}

void HttpServer::every(int period_ms, std::function<void()> task) {
  asio::post(impl_->io, [impl = impl_.get(), period_ms, task = std::move(task)]() mutable {
    impl->periodic = std::move(task);
    impl->period = std::chrono::milliseconds(period_ms);
    impl->run_periodic();
  });
}

HttpServer::~HttpServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  error_code ignored;
  impl_->acceptor.close(ignored);
}

}  // namespace acc::launcher
