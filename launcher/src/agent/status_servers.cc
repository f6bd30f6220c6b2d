#include "agent/status_servers.h"

#include <algorithm>
#include <cstdio>

#include "agent/worker_group.h"
#include "hangs/python_stack_hook.h"
#include "nodes/store_address.h"
#include "output/log.h"
#include "status/health_check.h"
#include "status/http_server.h"
#include "status/job_status.h"
#include "status/kubeflow_progress.h"
#include "status/status_server.h"

namespace acc::launcher {
namespace {

// Node 0 of the round posts the job's progress to Kubeflow Trainer, from its workers' files,
// lowest rank first; another node posts nothing.
std::vector<std::string> node_zero_files(std::vector<StatusBoard::Worker> workers,
                                         const Round& round) {
  std::vector<std::string> files;
  if (round.node_rank != 0) return files;
  std::sort(workers.begin(), workers.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (const StatusBoard::Worker& w : workers) files.push_back(w.progress_file);
  return files;
}

}  // namespace

StatusServers::StatusServers(std::function<double()> wall_seconds)
    : wall_seconds_(std::move(wall_seconds)) {}

StatusServers::~StatusServers() = default;

void StatusServers::start(const LaunchPlan& plan,
                          const std::map<std::string, std::string>& environment,
                          const std::function<void(const std::string&)>& notice) {
  start_health_check(plan, notice);
  start_status_server(plan, notice);
  std::string problem;
  if (std::optional<KubeflowSettings> kubeflow = kubeflow_settings(environment, problem)) {
    log::debug("Kubeflow Trainer progress: node 0 posts to {} every {} ms", kubeflow->url,
               kubeflow->interval.count());
    kubeflow_progress_ = std::make_unique<KubeflowProgress>(std::move(*kubeflow));
  } else if (!problem.empty()) {
    log::warn("Kubeflow Trainer progress: " + problem + "; the job's progress is not posted");
  }
}

void StatusServers::start_health_check(const LaunchPlan& plan,
                                       const std::function<void(const std::string&)>& notice) {
  if (!plan.health_check_port) return;
  worker_progress_ = std::make_unique<WorkerProgress>(plan.health_check_timeout);
  health_server_ = std::make_unique<HttpServer>(
      "", *plan.health_check_port,
      [progress = worker_progress_.get(), wall_seconds = wall_seconds_](const HttpRequest&) {
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
      [board = status_board_.get(), token = status_token(plan.job_secret)](
          const HttpRequest& request) { return status_reply(*board, request, token); },
      "the job's status on " + where + " (--status_host, --status_port)");
  status_exchange_ = std::make_unique<StatusExchange>(*status_board_);
  status_server_->every(1000, [board = status_board_.get(), exchange = status_exchange_.get()] {
    board->sample();
    exchange->run();
  });
  const std::string url = status_url(plan.status_host, status_server_->port());
  status_url_file_ = std::make_unique<StatusUrlFile>(url);
  std::string beyond;  // who else reads the page and /api/job
  if (plan.status_host != "localhost" && !is_loopback_address(plan.status_host))
    beyond = plan.job_secret.empty()
                 ? "; the page and /api/job to this host alone: the job has no secret"
                 : "; the page and /api/job beyond this host with the job's secret";
  notice("status of the job at " + url + " (/metrics for Prometheus, /api/job" + beyond + ")");
}

void StatusServers::attempt_started(const WorkerGroup& group, const LaunchPlan& plan,
                                    const Round& round, int restart_count) {
  std::vector<StatusBoard::Worker> workers;  // each with its progress file, for the readers
  if (worker_progress_ || status_board_ || kubeflow_progress_)
    for (const auto& w : group.workers())
      workers.push_back({w->rank, w->spec.local_rank, w->pid, progress_file_path(w->dir)});
  if (kubeflow_progress_)
    kubeflow_progress_->attempt_started(node_zero_files(workers, round), restart_count);
  if (worker_progress_) {
    std::vector<std::string> files;
    for (const StatusBoard::Worker& w : workers) files.push_back(w.progress_file);
    worker_progress_->attempt_started(files);
  }
  if (status_board_) {
    StatusBoard::JobStore store;
    if (round.nnodes > 1)
      store = {round.master_addr, round.master_port, round.restart_count,
               round.nnodes,      round.node_rank,   plan.job_secret};
    status_board_->attempt_started(restart_count, round.nnodes, world_size(plan, round), workers,
                                   store);
  }
}

void StatusServers::attempt_ended() {
  if (worker_progress_) worker_progress_->attempt_ended();
  if (status_board_) status_board_->attempt_ended();
}

void StatusServers::job_ended(int status) {
  if (kubeflow_progress_) kubeflow_progress_->job_ended(status == 0);
}

}  // namespace acc::launcher
