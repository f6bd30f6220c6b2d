#include "http_connection.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"

namespace acc::rendezvous {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpConnection::Impl {
  asio::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;  // kept across replies: a read may take bytes of the next
  std::string host, port;

  // Runs the asynchronous step `start` began until it completes; its error, if any, is thrown.
  void finish(beast::error_code& ec, const std::string& address, std::string_view step) {
    io.restart();
    io.run();
    if (ec) {
      stream.reset();
      buffer.clear();
      throw NetworkError(acc::detail::concat(
          "etcd at ", address, ": ", step,
          " failed: ", ec == beast::error::timeout ? "timed out" : ec.message()));
    }
  }
};

HttpConnection::HttpConnection(std::string address)
    : address_(std::move(address)), impl_(std::make_unique<Impl>()) {
  const Endpoint endpoint = parse_endpoint(address_, 2379, "etcd endpoint");
  impl_->host = endpoint.host;
  impl_->port = std::to_string(endpoint.port);
}

HttpConnection::~HttpConnection() = default;

HttpConnection::Reply HttpConnection::post(std::string_view target, std::string_view body,
                                           std::chrono::milliseconds timeout) {
  Impl& c = *impl_;
  beast::error_code ec;
  if (!c.stream) {
    tcp::resolver resolver(c.io);
    auto endpoints = resolver.resolve(c.host, c.port, ec);
    if (ec) throw NetworkError("etcd at " + address_ + ": " + ec.message());
    c.stream.emplace(c.io);
    c.stream->expires_after(timeout);
    c.stream->async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
    c.finish(ec, address_, "connect");
  }
  http::request<http::string_body> request{http::verb::post, std::string(target), 11};
  request.set(http::field::host, c.host);
  request.set(http::field::content_type, "application/json");
  request.body() = std::string(body);
  request.prepare_payload();
  c.stream->expires_after(timeout);
  http::async_write(*c.stream, request, [&](beast::error_code e, size_t) { ec = e; });
  c.finish(ec, address_, "request");
  http::response<http::string_body> response;
  http::async_read(*c.stream, c.buffer, response, [&](beast::error_code e, size_t) { ec = e; });
  c.finish(ec, address_, "reply");
  if (response.need_eof()) {
    c.stream.reset();
    c.buffer.clear();
  }
  return Reply{static_cast<int>(response.result_int()), std::move(response.body())};
}

}  // namespace acc::rendezvous
