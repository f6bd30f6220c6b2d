#include "observe/status_server.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "observe/http_server.h"

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

std::string status_url(const std::string& host, int port) {
  std::string local = host;
  if (host == "0.0.0.0" || host == "localhost") local = "127.0.0.1";
  if (host == "::") local = "::1";
  if (local.find(':') != std::string::npos) local = "[" + local + "]";
  return "http://" + local + ":" + std::to_string(port) + "/";
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
