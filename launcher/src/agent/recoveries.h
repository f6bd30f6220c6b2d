#pragma once

// The agent's accounting of restarts: how long each recovery took (from the failure this node
// saw to the next attempt's spawn), where the job's wall time went (goodput), and how many
// attempts in a row made no progress (--max_no_progress_restarts, as NVIDIA's ft_launcher).
// Pure over the times it is given; the agent reads them from its Os.

#include <optional>
#include <string>
#include <vector>

#include "acc/launcher/plan/plan.h"
#include "process/os.h"
#include "status/job_status.h"

namespace acc::launcher {

class WorkerGroup;

class Recoveries {
 public:
  using Clock = Os::Clock;

  // An attempt's workers were spawned at `at`: ends the recovery before it, if any, and returns
  // it (numbered `attempt` + 1).
  std::optional<RecoveryStatus> attempt_started(int attempt, Clock::time_point at);
  // The first failure of the running attempt that this node saw (its own worker's, or the news
  // of another node's); later ones are ignored.
  void failure_seen(Clock::time_point at);
  bool saw_failure() const { return failure_seen_.has_value(); }
  // The running attempt's workers had all ended at `at`; `made_progress` counts its time as
  // progress. Returns the goodput so far.
  const GoodputStatus& attempt_ended(Clock::time_point at, bool made_progress);
  // The attempt just ended is followed by another, for `cause`.
  void begin(const std::string& cause);
  // Whether an attempt ended and the next has not started yet.
  bool recovering() const { return pending_.has_value(); }
  // The next attempt was agreed (a barrier or a rendezvous round), while recovering().
  void joined(Clock::time_point at);

  bool any() const { return !recoveries_.empty(); }
  const GoodputStatus& goodput() const { return goodput_; }
  // At the job's end: each recovery in one line, and one line of where the time went.
  std::vector<std::string> summary() const;
  // "attempt 2 started 12.3 ms after the failure was seen (stop 2.1 ms, rendezvous 8.0 ms,
  // spawn 2.2 ms)".
  static std::string describe(const RecoveryStatus& r);

 private:
  struct Pending {
    Clock::time_point seen;     // the failure, as this node saw it
    Clock::time_point stopped;  // its workers had all ended
    Clock::time_point joined;   // the next attempt was agreed
    std::string cause;
  };
  std::optional<Pending> pending_;                 // between an attempt's end and the next's spawn
  std::optional<Clock::time_point> failure_seen_;  // the running attempt's
  Clock::time_point attempt_started_;
  Clock::time_point attempt_ended_;
  std::optional<Clock::time_point> first_started_;
  std::vector<RecoveryStatus> recoveries_;
  GoodputStatus goodput_;
};

// Whether a worker of this node's attempt made progress: a beat (libacc's optimizer step,
// acc_launch.beat()) or a completed collective in its progress file. A worker whose file
// cannot be read (it never appeared) made none. A job of several nodes: each node looks at its
// own workers only, and the node whose worker failed decides.
bool made_progress(const WorkerGroup& group);

// Failed attempts in a row whose workers made no progress, against --max_no_progress_restarts.
class NoProgressCount {
 public:
  explicit NoProgressCount(int limit) : limit_(limit) {}
  // Whether the attempt that just failed, if it made no progress either, is the limit'th in a
  // row without: then no restart, whether or not --max_restarts has one left (as ft_launcher,
  // which looks at progress before the restarts left).
  bool at_limit() const { return limit_ > 0 && in_a_row_ + 1 >= limit_; }
  // A restart after an attempt with or without progress.
  void count(bool progress) { in_a_row_ = progress ? 0 : in_a_row_ + 1; }
  int in_a_row() const { return in_a_row_; }
  // "; 1 of 2 attempts in a row without progress" for the restart notice; empty without a limit.
  std::string describe() const;

 private:
  int limit_;
  int in_a_row_ = 0;
};

}  // namespace acc::launcher
