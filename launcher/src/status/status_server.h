#pragma once

// What `--status_port` serves (the HttpServer, http_server.h, runs it on its thread):
//   /metrics   Prometheus' text format (prometheus_text)
//   /api/job   the same as JSON (job_json)
//   /          the page (status_page)
// and where `acc-launch top` finds a launcher of this machine: the URL in a file named by the
// launcher's pid, there while the launcher serves. On a job of several nodes the status exchange
// puts each node's status in node 0's store, and node 0's server shows every node.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "acc/rendezvous/clock.h"
#include "status/job_status.h"

namespace acc::launcher {

struct HttpRequest;

// The reply to `request`: one of the three above, 404 otherwise. /metrics is anyone's (as the
// health check is); the page and /api/job are this host's clients' (loopback), and another
// host's only with `token` (status_token of the job's secret), sent as "Authorization: Bearer
// <token>" or "?token=<token>" (the page passes its own query on to /api/job): 401 without it,
// 403 where the job has no secret (`token` empty).
std::string status_reply(const StatusBoard& board, const HttpRequest& request,
                         const std::string& token);

// The token that opens the status beyond this host: HMAC-SHA256 of "acc-launch status" under the
// job's secret, in hex (so that the secret itself never crosses the network); "" for "".
std::string status_token(std::string_view job_secret);

// "http://127.0.0.1:8000/" for the server bound to `host` and `port`: a local client's URL, so
// the any-address hosts (0.0.0.0, ::) read as loopback.
std::string status_url(const std::string& host, int port);

// Runs on the status server's thread every kExchangePeriod: a node other than 0 puts its status
// (job_json) under store_keys::job_status in the attempt's store; node 0 reads the other nodes'
// and hands them to the board. A store that cannot be reached is tried again later; nothing
// throws.
class StatusExchange {
 public:
  static constexpr std::chrono::seconds kExchangePeriod{2};
  // `clock` must outlive the exchange.
  explicit StatusExchange(StatusBoard& board,
                          const rendezvous::Clock& clock = rendezvous::Clock::steady());
  ~StatusExchange();
  void run();

 private:
  struct Connection;
  StatusBoard& board_;
  const rendezvous::Clock& clock_;
  std::unique_ptr<Connection> connection_;
  rendezvous::Clock::time_point next_run_;
};

// Where the launcher with pid `launcher_pid` writes its status URL (a file of this user's).
std::string status_url_path(int launcher_pid);

// The file at status_url_path(getpid()) holding `url`, while this object lives. Never throws:
// without it `acc-launch top` needs --url.
class StatusUrlFile {
 public:
  explicit StatusUrlFile(const std::string& url);
  ~StatusUrlFile();
  StatusUrlFile(const StatusUrlFile&) = delete;
  StatusUrlFile& operator=(const StatusUrlFile&) = delete;

 private:
  std::string path_;
};

}  // namespace acc::launcher
