#include "agent/status_servers.h"

#include <cstdio>

#include "agent/worker_group.h"
#include "hangs/python_stack_hook.h"
#include "status/health_check.h"
#include "status/http_server.h"
#include "status/job_status.h"
#include "status/status_server.h"

namespace acc::launcher {

StatusServers::StatusServers(std::function<double()> wall_seconds)
    : wall_seconds_(std::move(wall_seconds)) {}

StatusServers::~StatusServers() = default;

void StatusServers::start(const LaunchPlan& plan,
                          const std::function<void(const std::string&)>& notice) {
  start_health_check(plan, notice);
  start_status_server(plan, notice);
}

void StatusServers::start_health_check(const LaunchPlan& plan,
                                       const std::function<void(const std::string&)>& notice) {
  if (!plan.health_check_port) return;
  worker_progress_ = std::make_unique<WorkerProgress>(plan.health_check_timeout);
  health_server_ = std::make_unique<HttpServer>(
      "", *plan.health_check_port,
      [progress = worker_progress_.get(), wall_seconds = wall_seconds_](const std::string&) {
        return health_check_reply(progress->look(), wall_seconds(), progress->timeout());
      },
      "the health check on port " + std::to_string(*plan.health_check_port) +
          " (TORCHELASTIC_HEALTH_CHECK_PORT)");
  char timeout[32];
  std::snprintf(timeout, sizeof(timeout), "%g s",
                static_cast<double>(plan.health_check_timeout.count()) / 1000);
  notice("health check on port " + std::to_string(health_server_->port()) +
         " (TORCHELASTIC_HEALTH_CHECK_PORT): 503 after " + timeout +
         " without a worker's progress");
}

// Node 0 and every other node serve their own node's workers.
void StatusServers::start_status_server(const LaunchPlan& plan,
                                        const std::function<void(const std::string&)>& notice) {
  if (!plan.status_port) return;
  status_board_ = std::make_unique<StatusBoard>(plan.run_id, plan.hostname, plan.node_rank);
  const std::string where = plan.status_host + ":" + std::to_string(*plan.status_port);
  status_server_ = std::make_unique<HttpServer>(
      plan.status_host, *plan.status_port,
      [board = status_board_.get()](const std::string& path) { return status_reply(*board, path); },
      "the job's status on " + where + " (--status_host, --status_port)");
  status_exchange_ = std::make_unique<StatusExchange>(*status_board_);
  status_server_->every(1000, [board = status_board_.get(), exchange = status_exchange_.get()] {
    board->sample();
    exchange->run();
  });
  const std::string url = status_url(plan.status_host, status_server_->port());
  status_url_file_ = std::make_unique<StatusUrlFile>(url);
  notice("status of the job at " + url + " (/metrics for Prometheus, /api/job)");
}

void StatusServers::attempt_started(const WorkerGroup& group, const LaunchPlan& plan,
                                    const Round& round, int restart_count) {
  std::vector<StatusBoard::Worker> workers;  // each with its progress file, for both readers
  if (worker_progress_ || status_board_)
    for (const auto& w : group.workers())
      workers.push_back({w->rank, w->spec.local_rank, w->pid, progress_file_path(w->dir)});
  if (worker_progress_) {
    std::vector<std::string> files;
    for (const StatusBoard::Worker& w : workers) files.push_back(w.progress_file);
    worker_progress_->attempt_started(files);
  }
  if (status_board_) {
    StatusBoard::JobStore store;
    if (round.nnodes > 1)
      store = {round.master_addr, round.master_port, round.restart_count, round.nnodes,
               round.node_rank};
    status_board_->attempt_started(restart_count, round.nnodes, world_size(plan, round), workers,
                                   store);
  }
}

void StatusServers::attempt_ended() {
  if (worker_progress_) worker_progress_->attempt_ended();
  if (status_board_) status_board_->attempt_ended();
}

}  // namespace acc::launcher
