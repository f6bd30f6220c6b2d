#pragma once

// What the agent serves about the job while it runs: torchelastic's health check
// (TORCHELASTIC_HEALTH_CHECK_PORT, health_check.h) and, with --status_port, the job's status
// (job_status.h, status_server.h). Each runs on an HttpServer's own thread; the agent's thread
// only tells them what it knows and never waits on a client. Under Kubeflow Trainer, node 0 also
// posts the job's progress into the TrainJob's status (kubeflow_progress.h), on a thread of its
// own.

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "acc/launcher/nodes/membership.h"
#include "acc/launcher/plan/plan.h"

namespace acc::launcher {

class HttpServer;
class KubeflowProgress;
class StatusBoard;
class StatusExchange;
class StatusUrlFile;
class WorkerGroup;
class WorkerProgress;

class StatusServers {
 public:
  // `wall_seconds` is the time since the epoch, as the progress files' beats are written.
  explicit StatusServers(std::function<double()> wall_seconds);
  ~StatusServers();

  // Starts those the plan asks for, each with one notice naming its URL or port, and the
  // Kubeflow Trainer progress where `environment` (the launcher's) names its server (a warning
  // where it cannot be used; the job goes on). Before any rendezvous (a long rendezvous is no
  // hang), and after the launcher's signals are taken, so that their threads never run a
  // handler. Throws NetworkError for a port in use.
  void start(const LaunchPlan& plan, const std::map<std::string, std::string>& environment,
             const std::function<void(const std::string&)>& notice);

  // The attempt's workers were spawned: both servers read their progress files from now on.
  void attempt_started(const WorkerGroup& group, const LaunchPlan& plan, const Round& round,
                       int restart_count);
  // Its workers have all ended.
  void attempt_ended();
  // The job ends with exit status `status` (0: it succeeded), before the exit barrier.
  void job_ended(int status);
  // With --status_port: what the agent tells the status page besides (a restart, a hang, the
  // job's end); null without.
  StatusBoard* board() const { return status_board_.get(); }

 private:
  void start_health_check(const LaunchPlan& plan,
                          const std::function<void(const std::string&)>& notice);
  void start_status_server(const LaunchPlan& plan,
                           const std::function<void(const std::string&)>& notice);

  std::function<double()> wall_seconds_;
  std::unique_ptr<WorkerProgress> worker_progress_;  // with the health check: what it reads
  std::unique_ptr<HttpServer> health_server_;
  std::unique_ptr<StatusBoard> status_board_;  // with --status_port
  std::unique_ptr<StatusExchange> status_exchange_;
  std::unique_ptr<HttpServer> status_server_;
  std::unique_ptr<StatusUrlFile> status_url_file_;
  std::unique_ptr<KubeflowProgress> kubeflow_progress_;  // under Kubeflow Trainer
};

}  // namespace acc::launcher
