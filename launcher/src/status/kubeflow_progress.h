#pragma once

// Kubeflow Trainer's TrainJob progress (KEP-2779; Kubeflow Trainer v2.2's TrainJobStatus feature
// gate). Where the controller gives the trainer pods its status server's URL, its CA and a token
// file, the launcher that runs node 0 posts the job's progress into the TrainJob's
// status.trainerStatus, as the Kubeflow SDK's update_trainjob_status and transformers'
// KubeflowCallback do from a script:
//
//   POST <URL>                      (.../namespaces/{ns}/trainjobs/{name}/status)
//   Authorization: Bearer <the token file's text, read again at each post: it rotates>
//   Content-Type: application/json
//   {"trainerStatus": {"progressPercentage": 45, "estimatedRemainingSeconds": 120,
//                      "metrics": [{"name": "current_step", "value": "450"},
//                                  {"name": "total_steps", "value": "1000"},
//                                  {"name": "restarts", "value": "0"}],
//                      "lastUpdatedTime": "2026-06-12T03:00:00Z"}}
//
// The steps are those of node 0's lowest rank that writes its progress file
// (acc/common/progress_file.h): the step it gives with its beat, else its count of beats. The
// percentage and the time remaining come only where the program gives its total steps. The posts
// run on a thread of their own, every ACC_KUBEFLOW_PROGRESS_INTERVAL seconds (30) and once at the
// job's end, so the agent's thread never waits on the server; a server that cannot be reached or
// refuses is one warning line, once, and the job goes on (docs/clusters.md, "Kubeflow Trainer
// progress").

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "acc/common/progress_file.h"
#include "acc/rendezvous/clock.h"

namespace acc::launcher {

// Where to post, from the launcher's environment.
struct KubeflowSettings {
  std::string url;           // as given
  std::string url_variable;  // the variable it came from, for messages
  std::string address;       // host:port of the URL (443 where it names none)
  std::string target;        // its path and query
  std::string ca_file;       // empty: the system's CAs
  std::string ca_variable;
  std::string token_file;  // empty: no Authorization header
  std::string token_variable;
  std::chrono::milliseconds interval{30'000};
};

// The settings where KUBEFLOW_TRAINER_SERVER_URL is set (Kubeflow Trainer v2.2's name; the
// KEP's first draft's KUBEFLOW_TRAINER_STATUS_URL too, and so for _CA_CERT and _TOKEN, each
// variable's _SERVER_ spelling first), with ACC_KUBEFLOW_PROGRESS_INTERVAL's seconds. None where
// no URL is set, where the interval is 0 (posting turned off), or where the settings cannot be
// used: then `problem` says why in one line (a URL that is not https://host[:port]/path, an
// interval that is not a number). Pure.
std::optional<KubeflowSettings> kubeflow_settings(
    const std::map<std::string, std::string>& environment, std::string& problem);

// One look at node 0's lowest writing rank's progress file.
struct StepSample {
  bool known = false;  // the file is written and has a step (a beat, or a step given)
  std::uint64_t step = 0;
  std::uint64_t total = 0;  // 0: unknown
  rendezvous::Clock::time_point at{};
};

// The first of `files` (lowest rank first) whose worker writes it, as a StepSample at `at`. Pure.
StepSample step_sample(const std::vector<progress_file::Snapshot>& files,
                       rendezvous::Clock::time_point at);

// What one post says.
struct TrainerStatus {
  std::optional<int> percent;                     // 0-100
  std::optional<std::int64_t> remaining_seconds;  // >= 0
  std::optional<std::uint64_t> step;
  std::optional<std::uint64_t> total;
  int restarts = 0;
};

// The percentage and the time remaining from one attempt's samples: the time remaining at the
// rate of steps between the attempt's first sample with a step and its latest. Pure.
class ProgressEstimate {
 public:
  // A new attempt (after `restarts` restarts): its steps start again.
  void attempt_started(int restarts);
  void add(const StepSample& sample);
  // Whether a sample with a step came in this attempt or an earlier one.
  bool known() const { return last_.has_value(); }
  // What the last sample says; at a job that ended 0 (`succeeded`), 100% and no time remaining.
  TrainerStatus status(bool succeeded) const;

 private:
  std::optional<StepSample> first_;  // this attempt's first sample with a step
  std::optional<StepSample> last_;   // the latest with a step, of any attempt
  int restarts_ = 0;
};

// The request's JSON, {"trainerStatus": {...}} (KEP-2779's UpdateTrainJobStatusRequest), with
// `at` as lastUpdatedTime (RFC 3339, UTC, seconds). Pure.
std::string trainer_status_body(const TrainerStatus& status, rendezvous::Clock::wall_time_point at);

// The poster, on a thread of its own; the agent only tells it what it knows. Thread-safe.
class KubeflowProgress {
 public:
  // Starts the thread (after the launcher has blocked its signals). `clock` (any thread's) must
  // outlive it.
  explicit KubeflowProgress(KubeflowSettings settings,
                            const rendezvous::Clock& clock = rendezvous::Clock::steady());
  // Asks for the end's post where job_ended() was not called (an error ends the launcher) and
  // waits for it. Where the server does not answer, that is at most twice kLastPostTimeout, plus
  // twice kPostTimeout for a post under way.
  ~KubeflowProgress();
  KubeflowProgress(const KubeflowProgress&) = delete;
  KubeflowProgress& operator=(const KubeflowProgress&) = delete;

  // An attempt's workers started; `progress_files` are this node's, lowest rank first, where this
  // node is node 0 of the attempt's round, else none: nothing is posted from here. The files
  // stay mapped until the next attempt's (a removed file's memory stays readable), so that the
  // end's post has the last attempt's last step.
  void attempt_started(const std::vector<std::string>& progress_files, int restart_count);
  // The job's end: the last post goes at once, in the background; with `succeeded`, 100%.
  void job_ended(bool succeeded);

  static constexpr std::chrono::milliseconds kPostTimeout{5'000};
  static constexpr std::chrono::milliseconds kLastPostTimeout{3'000};

 private:
  struct Attempt;
  struct Look;
  Look wait_for_news(rendezvous::Clock::time_point until);
  void run();
  void post(const TrainerStatus& status, std::chrono::milliseconds timeout);
  std::string try_post(const TrainerStatus& status, std::chrono::milliseconds timeout) const;

  const KubeflowSettings settings_;
  const rendezvous::Clock& clock_;

  std::mutex mutex_;
  std::condition_variable news_;
  std::shared_ptr<const Attempt> attempt_;  // the last attempt's, where this node is node 0
  bool node_zero_ = false;                  // the last attempt ran on node 0
  std::uint64_t attempts_ = 0;              // attempt_started() calls
  std::optional<bool> ended_;               // job_ended()'s `succeeded`
  bool stopping_ = false;

  // The thread's own.
  ProgressEstimate estimate_;
  bool warned_ = false;  // the one line about a failed post was written

  std::thread thread_;  // last: it starts when everything above is set
};

}  // namespace acc::launcher
