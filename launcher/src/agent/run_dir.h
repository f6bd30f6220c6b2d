#pragma once

// The run directory of one launch: each attempt's workers' logs and error files, the progress
// files, the Python hook, the file timer's pipe, a hang report. Under --log_dir it stays; a
// temporary one is removed at the job's end unless something asked to keep it, and on every
// other way out of the launcher that runs its destructors (an error, a failed start).
//
// A launcher killed outright (SIGKILL, the OOM killer, a crash) cannot remove its own: a
// temporary run directory holds an owner record (its launcher's pid, start time and pid space),
// and each launcher, before it makes its own, removes those of this user whose launcher is gone
// (sweep_run_dirs).

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "acc/launcher/plan/plan.h"
#include "process/proc.h"

namespace acc::launcher {

// The launcher that made a temporary run directory, as the directory's owner record names it.
struct RunDirOwner {
  std::string pid_space;  // proc::Reader::pid_space() of the launcher
  int pid = 0;
  unsigned long long start_ticks = 0;  // proc::Stat::start_ticks of the launcher
};

// The owner record's text, and that text read back strictly: nullopt for anything else (another
// file, a torn one). Pure.
std::string encode_run_dir_owner(const RunDirOwner& owner);
std::optional<RunDirOwner> decode_run_dir_owner(std::string_view text);

// Whether the launcher `owner` has ended, as `proc` sees it: its pid is gone, or is another
// process's (started at another time). False where that cannot be told: a launcher of another
// machine or pid namespace (a shared $TMPDIR, `docker --ipc=host`'s shared /dev/shm), or where
// this process's pid space is unknown. Reads /proc through `proc`; never throws.
bool run_dir_owner_gone(const RunDirOwner& owner, proc::Reader& proc);

// Removes from the directory `base` the temporary run directories that launchers of this user
// left behind when killed outright: each named as RunDir names them, owned by this user, whose
// owner record names a launcher that is gone (run_dir_owner_gone). Never one whose launcher lives
// or cannot be told, nor one without a record (a directory kept for its logs, one of --log_dir,
// another program's). Each is first renamed, so that of several launchers sweeping at once one
// removes it; a sweep killed midway leaves a directory the next one finds, its record last to go.
// Returns the paths removed (as they were named). Blocks for the file system; never throws.
std::vector<std::string> sweep_run_dirs(const std::string& base, proc::Reader& proc);

class RunDir {
 public:
  // Sweeps the temporary directories where run directories go (sweep_run_dirs), then makes the
  // directory: a new one under plan.log_dir, else a temporary one (on a tmpfs when the run writes
  // no log files and /dev/shm has room) with the owner record of this process, as `proc` says.
  // Throws SystemError when it cannot be made.
  RunDir(const LaunchPlan& plan, proc::Reader& proc);
  // A temporary directory that does not stay is removed, if finish() has not run.
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  const std::string& path() const { return path_; }
  // Keeps a temporary directory after the job (worker logs, a hang report), and so takes it out
  // of any later sweep: it stays however this launcher ends.
  void keep();
  // Whether the directory outlives the job: kept, or under --log_dir.
  bool stays() const { return keep_ || named_; }
  // At the job's end: one notice naming a directory that stays; any other is removed. Once:
  // later calls do nothing.
  void finish(const std::function<void(const std::string&)>& notice);

  // A directory beside the run directory that holds data, not logs (the checkpoints' memory):
  // in the temporary directory the user named, else on /dev/shm, else in /tmp, named as a
  // temporary run directory with `what` after the run id, and with its owner record, so that a
  // sweep removes it once this launcher is gone. It never stays: removed by finish() and the
  // destructor, kept or not. Throws SystemError when it cannot be made.
  std::string make_memory_dir(const std::string& what, proc::Reader& proc);

 private:
  std::string path_;
  std::string run_id_;
  std::vector<std::string> memory_dirs_;  // make_memory_dir()'s
  bool named_;                            // under --log_dir
  bool keep_ = false;
  bool finished_ = false;
};

}  // namespace acc::launcher
