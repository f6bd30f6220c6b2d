#include "status/status_server.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "acc/common/endpoint.h"
#include "acc/common/store_keys.h"
#include "acc/rendezvous/store_client.h"
#include "status/http_server.h"

namespace acc::launcher {

std::string status_reply(const StatusBoard& board, const std::string& path) {
  if (path == "/metrics")
    return http_reply(200, "text/plain; version=0.0.4; charset=utf-8",
                      prometheus_text(board.status()));
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
