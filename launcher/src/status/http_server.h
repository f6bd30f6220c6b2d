#pragma once

// The launcher's tiny HTTP server, on its own thread and io_context (Boost.Asio, requests read by
// Boost.Beast's parser): one reply per connection (Connection: close), whatever the method; a
// client gets 5 s to send its request and read the reply, 16 are served at once (more are closed at
// once), so a slow or broken client never holds up anything but itself, and the agent's thread
// never waits on the server. It serves torchelastic's health check (health_check.h) and the job's
// status (status_server.h).

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace acc::launcher {

// The whole HTTP/1.1 reply (Connection: close, Cache-Control: no-store) with `status` (200,
// 404, 503...), `content_type` and `body`. Pure.
std::string http_reply(int status, const std::string& content_type, const std::string& body);

// The path of a request's target: "/metrics" for "/metrics?x=1". Pure.
std::string path_of_target(std::string_view target);

// What a handler is told of a request.
struct HttpRequest {
  std::string path;            // path_of_target of the target
  std::string query;           // what follows "?" in the target, up to a "#"
  std::string authorization;   // the Authorization header's value, if any
  bool from_loopback = false;  // the client's address is a loopback one (IPv4-mapped included)
};

class HttpServer {
 public:
  // Called on the server's thread with the request; returns the whole reply (http_reply).
  using Handler = std::function<std::string(const HttpRequest& request)>;

  // Binds `port` (0: one the system picks) on `host`: empty for every address of this host (IPv6
  // and IPv4, or IPv4 alone where there is no IPv6), else a numeric address of this host. Then
  // serves `handler`. `serves` names what it serves in errors ("the health check on port 8080
  // (TORCHELASTIC_HEALTH_CHECK_PORT)"). Throws ConfigError for a host that is not an address of
  // this host, NetworkError when the port cannot be bound (in use). Start it after the launcher
  // has blocked the signals it handles, so that its thread never runs a handler.
  HttpServer(const std::string& host, int port, Handler handler, const std::string& serves);
  // Stops serving and closes the port; joins the thread.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Runs `task` on the server's thread every `period_ms` until the server goes (the status
  // server's sampling); call before any request can depend on it.
  void every(int period_ms, std::function<void()> task);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace acc::launcher
