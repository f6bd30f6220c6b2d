#include "status/status_server.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "acc/common/endpoint.h"
#include "acc/common/store_keys.h"
#include "acc/common/strings.h"
#include "acc/rendezvous/job_secret.h"
#include "acc/rendezvous/store_client.h"
#include "status/http_server.h"

namespace acc::launcher {

namespace {

// Compares in a time that does not depend on where the two differ.
bool same_token(std::string_view a, std::string_view b) {
  unsigned char differ = a.size() != b.size();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) differ |= a[i] ^ b[i];
  return differ == 0;
}

// The token a request carries: "Authorization: Bearer T", or "token=T" in its query.
std::string token_of(const HttpRequest& request) {
  constexpr std::string_view kBearer = "Bearer ";
  if (request.authorization.starts_with(kBearer))
    return request.authorization.substr(kBearer.size());
  for (const std::string& pair : split(request.query, '&'))
    if (pair.starts_with("token=")) return pair.substr(6);
  return "";
}

}  // namespace

std::string status_token(std::string_view job_secret) {
  return job_secret.empty() ? "" : rendezvous::job_proof(job_secret, "acc-launch status");
}

std::string status_reply(const StatusBoard& board, const HttpRequest& request,
                         const std::string& token) {
  const std::string& path = request.path;
  if (path == "/metrics")
    return http_reply(200, "text/plain; version=0.0.4; charset=utf-8",
                      prometheus_text(board.status()));
  if (!request.from_loopback && (path == "/api/job" || path == "/" || path == "/index.html")) {
    if (token.empty())
      return http_reply(403, "text/plain",
                        "the job's status goes beyond this host only to those who hold the job's "
                        "secret, and this job has none (--rdzv_conf job_secret_file=PATH); "
                        "/metrics is open\n");
    if (!same_token(token_of(request), token))
      return http_reply(401, "text/plain",
                        "the job's status needs the job's secret: send \"Authorization: Bearer "
                        "<token>\" or ?token=<token> (docs/observe.md, \"Beyond this host\"); "
                        "/metrics is open\n");
  }
  if (path == "/api/job") return http_reply(200, "application/json", job_json(board.status()));
  if (path == "/" || path == "/index.html")
    return http_reply(200, "text/html; charset=utf-8", status_page());
  return http_reply(404, "text/plain", "not found: try /, /metrics or /api/job\n");
}

struct StatusExchange::Connection {
  StatusBoard::JobStore store;
  std::unique_ptr<rendezvous::StoreClient> client;
};

StatusExchange::StatusExchange(StatusBoard& board, const rendezvous::Clock& clock)
    : board_(board), clock_(clock) {}
StatusExchange::~StatusExchange() = default;

void StatusExchange::run() {
  const auto now = clock_.now();
  if (now < next_run_) return;
  next_run_ = now + kExchangePeriod;
  const StatusBoard::JobStore store = board_.job_store();
  if (store.host.empty() || store.nnodes < 2) return;
  try {
    if (!connection_ || connection_->store.host != store.host ||
        connection_->store.port != store.port) {
      connection_.reset();
      rendezvous::StoreClientOptions options;
      options.host = store.host;
      options.port = store.port;
      options.connect_timeout = std::chrono::milliseconds(200);
      options.timeout = std::chrono::milliseconds(1000);
      options.job_member = true;
      options.job_secret = store.job_secret;
      auto client = std::make_unique<rendezvous::StoreClient>(options);
      connection_ = std::make_unique<Connection>(Connection{store, std::move(client)});
    }
    rendezvous::StoreClient& client = *connection_->client;
    if (store.node_rank != 0) {
      client.set(store_keys::job_status(store.restart_count, store.node_rank),
                 encode_node_status(board_.status()));
      return;
    }
    std::vector<JobStatus> others;
    for (int node = 1; node < store.nnodes; ++node) {
      const std::string key = store_keys::job_status(store.restart_count, node);
      if (!client.check({key})) continue;
      if (std::optional<JobStatus> other = decode_node_status(client.get(key)))
        others.push_back(std::move(*other));
    }
    board_.set_other_nodes(std::move(others));
  } catch (const std::exception&) {
    connection_.reset();  // gone or not there yet: the next run connects again
  }
}

std::string status_url(const std::string& host, int port) {
  std::string local = host;
  if (host == "0.0.0.0" || host == "localhost") local = "127.0.0.1";
  if (host == "::") local = "::1";
  return "http://" + format_endpoint(local, port) + "/";
}

std::string status_url_path(int launcher_pid) {
  return "/tmp/acc-launch-status." + std::to_string(::getuid()) + "." +
         std::to_string(launcher_pid) + ".url";
}

StatusUrlFile::StatusUrlFile(const std::string& url) : path_(status_url_path(::getpid())) {
  const std::string temporary = path_ + ".new";
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << url << "\n";
    if (!file) return;
  }
  std::rename(temporary.c_str(), path_.c_str());
}

StatusUrlFile::~StatusUrlFile() {
  ::unlink(path_.c_str());
}

}  // namespace acc::launcher
