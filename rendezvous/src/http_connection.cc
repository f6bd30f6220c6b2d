#include "http_connection.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <optional>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"
#include "tls_context.h"

namespace acc::rendezvous {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

enum class Step { kConnect, kHandshake, kRequest, kReply };

const char* step_name(Step step) {
  switch (step) {
    case Step::kConnect:
      return "connect";
    case Step::kHandshake:
      return "TLS handshake";
    case Step::kRequest:
      return "request";
    case Step::kReply:
      return "reply";
  }
  return "";
}

// What `ec` at `step` means to a caller (http_get.h): a refused connection is nobody there, a
// connection that ends before the reply is a server that went, anything else in an exchange is
// what a server of HTTP would not do.
HttpFailure failure_of(Step step, const beast::error_code& ec) {
  const bool connecting = step == Step::kConnect || step == Step::kHandshake;
  if (ec == beast::error::timeout)
    return connecting ? HttpFailure::kConnectTimeout : HttpFailure::kReplyTimeout;
  if (step == Step::kConnect) return HttpFailure::kUnreachable;
  if (ec == http::error::end_of_stream || ec == asio::error::eof ||
      ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
      ec == asio::ssl::error::stream_truncated)
    return HttpFailure::kClosed;
  return HttpFailure::kBadReply;
}

}  // namespace

struct HttpConnection::Impl {
  asio::io_context io;
  std::optional<beast::tcp_stream> stream;                         // plain http
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_stream;  // https
  beast::flat_buffer buffer;  // kept across replies: a read may take bytes of the next
  std::string host, port;
  std::string server;  // as errors name it: "etcd"

  beast::tcp_stream& tcp() { return tls_stream ? beast::get_lowest_layer(*tls_stream) : *stream; }
  bool connected() const { return stream || tls_stream; }
  void close() {
    stream.reset();
    tls_stream.reset();
    buffer.clear();
  }

  // Runs the asynchronous step `start` began until it completes; its error, if any, is thrown:
  // ConfigError when a side refused the other's certificate (a setting to fix, the same on every
  // try; with TLS 1.3 a server's refusal comes with the first reply).
  void finish(beast::error_code& ec, const std::string& address, Step step, const TlsContext* tls) {
    io.restart();
    io.run();
    if (!ec) return;
    std::string why = ec == beast::error::timeout ? "timed out" : ec.message();
    if (tls && is_tls_refusal(ec)) {
      const long verified = tls_stream ? SSL_get_verify_result(tls_stream->native_handle()) : 0;
      if (verified != X509_V_OK)
        why += std::string(" (") + X509_verify_cert_error_string(verified) + ")";
      close();
      throw ConfigError(tls->failure(address, why));
    }
    close();
    throw HttpError(
        failure_of(step, ec), why,
        acc::detail::concat(server, " at ", address, ": ", step_name(step), " failed: ", why));
  }

  // Sends `request` and reads the reply on whichever stream is open.
  template <typename Stream>
  http::response<http::string_body> exchange(Stream& s, http::request<http::string_body>& request,
                                             const std::string& address, const TlsContext* tls) {
    beast::error_code ec;
    http::async_write(s, request, [&](beast::error_code e, size_t) { ec = e; });
    finish(ec, address, Step::kRequest, tls);
    http::response<http::string_body> response;
    http::async_read(s, buffer, response, [&](beast::error_code e, size_t) { ec = e; });
    finish(ec, address, Step::kReply, tls);
    return response;
  }
};

HttpConnection::HttpConnection(std::string address, std::shared_ptr<TlsContext> tls,
                               std::string server)
    : address_(std::move(address)),
      tls_(std::move(tls)),
      server_(std::move(server)),
      impl_(std::make_unique<Impl>()) {
  const Endpoint endpoint = parse_endpoint(address_, 2379, server_ + " endpoint");
  impl_->host = endpoint.host;
  impl_->port = std::to_string(endpoint.port);
  impl_->server = server_;
}

HttpConnection::~HttpConnection() = default;

void HttpConnection::connect(std::chrono::milliseconds timeout) {
  Impl& c = *impl_;
  beast::error_code ec;
  tcp::resolver resolver(c.io);
  auto endpoints = resolver.resolve(c.host, c.port, ec);
  if (ec)
    throw HttpError(HttpFailure::kUnreachable, ec.message(),
                    server_ + " at " + address_ + ": " + ec.message());
  if (tls_)
    c.tls_stream.emplace(c.io, tls_->native());
  else
    c.stream.emplace(c.io);
  c.tcp().expires_after(timeout);
  c.tcp().async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
  c.finish(ec, address_, Step::kConnect, tls_.get());
  if (!tls_) return;
  // SNI for a host name only; the certificate must name the host as given: OpenSSL's own check
  // (expect_host, as the watches' sessions), which names a mismatch in the error.
  expect_host(c.tls_stream->native_handle(), c.host);
  c.tls_stream->async_handshake(asio::ssl::stream_base::client,
                                [&](beast::error_code e) { ec = e; });
  c.finish(ec, address_, Step::kHandshake, tls_.get());
}

HttpConnection::Reply HttpConnection::post(std::string_view target, std::string_view body,
                                           std::chrono::milliseconds timeout,
                                           const Headers& headers) {
  return send(Method::kPost, target, body, timeout, headers);
}

HttpConnection::Reply HttpConnection::get(std::string_view target,
                                          std::chrono::milliseconds timeout,
                                          const Headers& headers) {
  return send(Method::kGet, target, {}, timeout, headers);
}

HttpConnection::Reply HttpConnection::send(Method method, std::string_view target,
                                           std::string_view body, std::chrono::milliseconds timeout,
                                           const Headers& headers) {
  Impl& c = *impl_;
  if (!c.connected()) connect(timeout);
  const http::verb verb = method == Method::kPost ? http::verb::post : http::verb::get;
  http::request<http::string_body> request{verb, std::string(target), 11};
  request.set(http::field::host, c.host);
  if (method == Method::kPost) request.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = std::string(body);
  request.prepare_payload();
  c.tcp().expires_after(timeout);
  auto response = c.tls_stream ? c.exchange(*c.tls_stream, request, address_, tls_.get())
                               : c.exchange(*c.stream, request, address_, tls_.get());
  if (response.need_eof()) c.close();
  return Reply{static_cast<int>(response.result_int()), std::string(response.reason()),
               std::move(response.body())};
}

}  // namespace acc::rendezvous
