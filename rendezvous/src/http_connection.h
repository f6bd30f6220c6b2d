#pragma once

// One keep-alive HTTP/1.1 connection to one server, for the JSON POSTs of etcd's gateway (and of
// https_post.h: Kubeflow Trainer's status server) and the GETs of http_get.h (a launcher's status
// server), in plain text or over TLS (https). The library's one HTTP client, built on
// Boost.Beast; every step is bounded by a deadline (Beast's timeouts apply to asynchronous
// operations only, so each call runs its own io_context until the step completes).

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "acc/rendezvous/http_get.h"

namespace acc::rendezvous {

class TlsContext;

class HttpConnection {
 public:
  // `address` is host:port. Does not connect yet. With `tls`, every connection is https: the
  // server's certificate verified against `tls` and the host as `address` names it. `server`
  // names the server in errors ("etcd at host:port: ...").
  explicit HttpConnection(std::string address, std::shared_ptr<TlsContext> tls = nullptr,
                          std::string server = "etcd");
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  using Reply = HttpReply;
  // Fields sent besides Host, Content-Type and Content-Length ("Authorization", "Bearer ...").
  using Headers = std::vector<std::pair<std::string, std::string>>;
  // Connects when not connected, POSTs `body` (JSON) to `target` with `headers` and reads the
  // reply: connecting within `timeout`, then the request and its reply within `timeout` again.
  // Throws HttpError (a NetworkError naming the address; http_get.h) when the server cannot be
  // reached, the connection breaks, the reply is not HTTP or the time runs out; the connection is
  // closed then and the next call connects again. Throws ConfigError (one line: the endpoint,
  // OpenSSL's reason and the fix) when the TLS handshake is refused, either way. Blocks.
  Reply post(std::string_view target, std::string_view body, std::chrono::milliseconds timeout,
             const Headers& headers = {});
  // As post(), a GET of `target` without a body.
  Reply get(std::string_view target, std::chrono::milliseconds timeout,
            const Headers& headers = {});

  const std::string& address() const { return address_; }

 private:
  struct Impl;
  enum class Method { kGet, kPost };
  // Resolves and connects (and with TLS, handshakes) within `timeout`; throws as post().
  void connect(std::chrono::milliseconds timeout);
  // post() and get(): a POST's `body` goes as JSON; a GET has none.
  Reply send(Method method, std::string_view target, std::string_view body,
             std::chrono::milliseconds timeout, const Headers& headers);

  std::string address_;
  std::shared_ptr<TlsContext> tls_;
  std::string server_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace acc::rendezvous
