#pragma once

// The node's memory for acc_launch.checkpoint (python/acc_launch/checkpoint.py,
// docs/checkpoints.md): a directory on memory that outlives every attempt's workers (their saves
// go there, and a restarted worker loads from there), and the helper interpreter that writes the
// newest save of global rank 0 to its checkpoint's path in torch.distributed.checkpoint's format,
// so that plain dcp.load reads it without acc-launch: the first save at once, then every
// `interval` while saves come, at once when an attempt fails (in the background: the next attempt
// does not wait), and at the job's end (waited for). The helper, not the launcher, knows the
// format; the launcher only sees that rank 0 committed a save newer than the one written (the
// directory's file names).

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "acc/launcher/plan/plan.h"
#include "process/os.h"

namespace acc::launcher {

// Whether a job has the memory: Python workers with the hook (the package comes with it). Its
// workers find it in ACC_CHECKPOINT_MEMORY (kEnvVar).
bool wants_checkpoint_memory(const LaunchPlan& plan);

class CheckpointMemory {
 public:
  static constexpr char kEnvVar[] = "ACC_CHECKPOINT_MEMORY";
  using Clock = std::chrono::steady_clock;
  using Notice = std::function<void(const std::string&)>;

  // `dir` is made already (RunDir::make_memory_dir); `python` the workers' interpreter and
  // `pythonpath` the PYTHONPATH that finds the acc_launch package first; the helper keeps the
  // last `keep` writes.
  CheckpointMemory(Os& os, std::string dir, std::string python, std::string pythonpath,
                   std::chrono::milliseconds interval, int keep, Notice notice);
  // A helper still running is stopped (SIGTERM): the directory goes with the launcher.
  ~CheckpointMemory();
  CheckpointMemory(const CheckpointMemory&) = delete;
  CheckpointMemory& operator=(const CheckpointMemory&) = delete;

  const std::string& dir() const { return dir_; }

  // Starts the helper where rank 0's newest save here is not written yet and none runs.
  void persist();
  // A helper that has ended: its lines as notices; and the background write when it is due.
  // Never blocks.
  void tick();
  // When tick() has something to look at; nullopt: nothing.
  std::optional<Clock::time_point> next_wake() const;
  // At the job's end: persist(), then waits until the helper has ended, at most `limit` or until
  // a signal for which `stops_the_job` says true arrives (the helper is then stopped).
  void persist_and_wait(std::chrono::milliseconds limit,
                        const std::function<bool(int)>& stops_the_job);

  // The newest seq rank 0 committed in `dir` (rank0.<seq>.meta), 0 for none; and the one
  // written to storage (the file `persisted`), 0 for none.
  static long newest_save(const std::string& dir);
  static long persisted_save(const std::string& dir);

 private:
  void reap(int status);

  Os& os_;
  std::string dir_;
  std::vector<std::string> helper_;  // its argv
  std::chrono::milliseconds interval_;
  Notice notice_;
  pid_t running_ = -1;
  bool written_any_ = false;    // a write was started
  std::set<std::string> said_;  // the helpers' lines noticed so far
  Clock::time_point next_background_;
};

}  // namespace acc::launcher
