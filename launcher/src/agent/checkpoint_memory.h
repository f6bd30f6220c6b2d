#pragma once

// The node's memory for checkpoints (docs/checkpoints.md): a directory on memory that outlives
// every attempt's workers (their saves go there, and a restarted worker loads from there), and
// the helper that writes the newest save of global rank 0 to the directory it was saved for, so
// that it loads without acc-launch: the first save at once, then every `interval` while saves
// come, at once when an attempt fails (in the background: the next attempt does not wait), and
// at the job's end (waited for). Two kinds of save, two helpers:
//   acc_launch.checkpoint's (python/acc_launch/checkpoint.py; rank<R>.<seq>.meta and its data):
//     a helper interpreter writes it in torch.distributed.checkpoint's format. It runs for the
//     whole job (`serve`: one `import torch`), writes at its start and at each SIGUSR1, and
//     counts its writes in persist.done, so the launcher knows when it is idle;
//   libacc's save_state (runtime/src/checkpoint.cc; libacc.<seq>, a link to the slot that holds
//     its save_state directory): acc-launch itself copies it (`acc-launch __persist_state`,
//     persist_libacc_save).
// The launcher only sees that rank 0 committed a save newer than the one written (the
// directory's file names).

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "acc/launcher/plan/plan.h"
#include "process/os.h"

namespace acc::launcher {

// The number in `name` between `prefix` and `suffix`; -1 when `name` is not so.
long number_in(std::string_view name, std::string_view prefix, std::string_view suffix);

// Whether a job has the memory: one with workers. They find it in ACC_CHECKPOINT_MEMORY (kEnvVar).
bool wants_checkpoint_memory(const LaunchPlan& plan);

// The hidden command the helper for libacc's saves runs: `acc-launch __persist_state MEMORY
// --keep K`. Copies the newest save_state of global rank 0 in MEMORY to the directory it was
// saved for, as acc_launch.checkpoint's helper writes its own (through DIR.acc-writing, the one
// it replaces kept as DIR.<seq> where K is above 1); returns the exit status, one line on
// stderr where it cannot write.
inline constexpr const char* kPersistStateCommand = "__persist_state";
int persist_libacc_save(const std::vector<std::string>& args);

class CheckpointMemory {
 public:
  static constexpr char kEnvVar[] = "ACC_CHECKPOINT_MEMORY";
  using Clock = std::chrono::steady_clock;
  using Notice = std::function<void(const std::string&)>;

  // `dir` is made already (RunDir::make_memory_dir); `python` the workers' interpreter ("" for
  // workers that are not Python) and `pythonpath` the PYTHONPATH that finds the acc_launch
  // package first; the helpers keep the last `keep` writes.
  CheckpointMemory(Os& os, std::string dir, std::string python, std::string pythonpath,
                   std::chrono::milliseconds interval, int keep, Notice notice);
  // The helpers still running are stopped (SIGTERM): the directory goes with the launcher.
  ~CheckpointMemory();
  CheckpointMemory(const CheckpointMemory&) = delete;
  CheckpointMemory& operator=(const CheckpointMemory&) = delete;

  const std::string& dir() const { return dir_; }

  // Has the helper write where rank 0's newest save here is not written yet and no write runs:
  // starts it, or asks the job-long one (SIGUSR1).
  void persist();
  // A helper that has ended: its lines as notices; and the background write when it is due.
  // Never blocks.
  void tick();
  // When tick() has something to look at; nullopt: nothing.
  std::optional<Clock::time_point> next_wake() const;
  // At the job's end: waits until the newest save is written (after a write under way, which
  // may hold an older one), at most `limit` or until a signal for which `stops_the_job` says
  // true arrives (the helper is then stopped).
  void persist_and_wait(std::chrono::milliseconds limit,
                        const std::function<bool(int)>& stops_the_job);

  // The newest save rank 0 committed in `dir` (seq 0: none); and the seq written to storage
  // (the file `persisted`), 0 for none.
  struct Save {
    long seq = 0;
    bool libacc = false;  // libacc.<seq> (save_state, a link to its slot), else rank0.<seq>.meta
  };
  static Save newest_save(const std::string& dir);
  static long persisted_save(const std::string& dir);

 private:
  // A write is under way: the one-shot helper runs, or the job-long one has not counted the
  // writes asked of it.
  bool writing() const;
  // The helper `helper` ended with `status`: its lines in `log`, and its status where it said
  // nothing; `helper` becomes -1.
  void reap(pid_t& helper, const char* log, int status);
  // Reaps a helper that ended, and says the job-long helper's lines once a write of its is done.
  void check_helpers();
  // The lines in the log `log` not said before, as notices; whether it holds any line.
  bool say_lines(const std::string& log);

  Os& os_;
  std::string dir_;
  std::vector<std::string> python_helper_;  // argvs: acc_launch.checkpoint's saves (or none)
  std::vector<std::string> libacc_helper_;  // and save_state's
  std::chrono::milliseconds interval_;
  Notice notice_;
  pid_t running_ = -1;          // the one-shot helper (libacc's saves)
  pid_t serving_ = -1;          // the job-long helper (acc_launch.checkpoint's saves)
  long asked_ = 0;              // writes asked of serving_ (its start asks the first)
  long heard_ = 0;              // of those, the writes whose lines were said
  bool written_any_ = false;    // a write was started
  std::set<std::string> said_;  // the helpers' lines noticed so far
  Clock::time_point next_background_;
};

}  // namespace acc::launcher
