#pragma once

// One plain-http GET, over the library's one HTTP client (the HttpConnection that etcd's gateway
// and https_post.h use), for the launcher's reads of another launcher's status server
// (`acc-launch top`: launcher/src/commands/top_command.cc). A new connection per call, closed
// after the reply.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "acc/common/error.h"

namespace acc::rendezvous {

struct HttpGet {
  std::string address;  // host:port ("[::1]:8080" for IPv6)
  std::string target;   // the path and query: "/api/job"
  std::string server;   // how errors name the server: "the status server"
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host and Connection
  std::chrono::milliseconds timeout{5000};  // for connecting, then again for the request and its
                                            // reply
};

struct HttpReply {
  int status = 0;      // 200, 401...
  std::string reason;  // the status line's words: "Unauthorized"
  std::string body;
};

// Which step of an HTTP exchange failed, for a caller that says so in its own words (to `top`, a
// server nobody answers at means the job has ended).
enum class HttpFailure {
  kUnreachable,     // the host does not resolve, or the connection is refused: nobody is there
  kConnectTimeout,  // the connection (with TLS, its handshake) was not made within the timeout
  kClosed,          // the server closed or reset the connection before its whole reply
  kReplyTimeout,    // connected, but the request and its reply were not through within the timeout
  kBadReply,        // what came back is not HTTP, or the exchange failed another way
};

// The NetworkError of an HTTP exchange (http_get, https_post, etcd's gateway). what() is one line
// naming the server, its address, the step and why; failure() is the step and reason() the why
// alone ("timed out", or the system's or Beast's words). Plain data, safe to copy.
class HttpError : public NetworkError {
 public:
  HttpError(HttpFailure failure, std::string reason, const std::string& what)
      : NetworkError(what), failure_(failure), reason_(std::move(reason)) {}
  HttpFailure failure() const { return failure_; }
  const std::string& reason() const { return reason_; }

 private:
  HttpFailure failure_;
  std::string reason_;
};

// Connects to `request.address`, GETs `request.target` (with "Connection: close"), reads the
// reply and closes: at most twice `request.timeout`. Blocks; safe to call from any thread (nothing
// is shared between calls). Throws HttpError when the server cannot be reached, the connection
// breaks, what comes back is not HTTP or the time runs out; ConfigError when `request.address` is
// not host:port. A reply of any status is returned, not thrown.
HttpReply http_get(const HttpGet& request);

}  // namespace acc::rendezvous
