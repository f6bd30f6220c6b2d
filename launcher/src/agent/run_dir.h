#pragma once

// The run directory of one launch: each attempt's workers' logs and error files, the progress
// files, the Python hook, the file timer's pipe, a hang report. Under --log_dir it stays; a
// temporary one is removed at the job's end unless something asked to keep it.

#include <functional>
#include <string>

#include "acc/launcher/plan/plan.h"

namespace acc::launcher {

class RunDir {
 public:
  // Makes the directory: a new one under plan.log_dir, else a temporary one (on a tmpfs when the
  // run writes no log files and /dev/shm has room). Throws SystemError when it cannot be made.
  explicit RunDir(const LaunchPlan& plan);

  const std::string& path() const { return path_; }
  // Keeps a temporary directory after the job (worker logs, a hang report).
  void keep() { keep_ = true; }
  // Whether the directory outlives the job: kept, or under --log_dir.
  bool stays() const { return keep_ || named_; }
  // At the job's end: one notice naming a directory that stays; any other is removed.
  void finish(const std::function<void(const std::string&)>& notice) const;

 private:
  std::string path_;
  bool named_;  // under --log_dir
  bool keep_ = false;
};

}  // namespace acc::launcher
