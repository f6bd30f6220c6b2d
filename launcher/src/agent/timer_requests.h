#pragma once

// The agent's side of torchelastic's file timer (hangs/file_timer.h): the pipe every worker
// finds in TORCHELASTIC_TIMER_FILE, and the signal to a worker whose region expired.

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "acc/launcher/plan/plan.h"
#include "hangs/file_timer.h"
#include "process/os.h"

namespace acc::launcher {

class WorkerGroup;

// The timer on the pipe in `run_dir` unless the user named one in `environment`, which every
// worker then inherits as TORCHELASTIC_TIMER_FILE. Null for Accelerate's simple launcher, which
// gives no torchrun contract.
std::unique_ptr<FileTimer> start_file_timer(const LaunchPlan& plan,
                                            std::map<std::string, std::string>& environment,
                                            const std::string& run_dir);

// When the next region expires on `os`'s clock, its time being `wall_seconds` since the epoch
// now; nothing when no region is held.
std::optional<Os::Clock::time_point> next_timer_expiry(FileTimer& timer, Os& os,
                                                       double wall_seconds);

// Each region expired by `wall_seconds`: its signal to its pid (torchrun's agent does the
// same), one line naming the region, the rank (of `group`) and the pid.
void signal_expired_regions(FileTimer& timer, const WorkerGroup& group, Os& os,
                            double wall_seconds);

}  // namespace acc::launcher
