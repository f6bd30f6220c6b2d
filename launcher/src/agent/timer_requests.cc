#include "agent/timer_requests.h"

#include <string.h>

#include <algorithm>
#include <chrono>

#include "agent/worker_group.h"
#include "output/log.h"

namespace acc::launcher {

std::unique_ptr<FileTimer> start_file_timer(const LaunchPlan& plan,
                                            std::map<std::string, std::string>& environment,
                                            const std::string& run_dir) {
  if (plan.single_process) return nullptr;
  auto given = environment.find("TORCHELASTIC_TIMER_FILE");
  const std::string path = given != environment.end() && !given->second.empty()
                               ? given->second
                               : run_dir + "/timer_fifo";
  auto timer = std::make_unique<FileTimer>(path);
  environment["TORCHELASTIC_TIMER_FILE"] = path;
  return timer;
}

std::optional<Os::Clock::time_point> next_timer_expiry(FileTimer& timer, Os& os,
                                                       double wall_seconds) {
  const std::optional<double> expiry = timer.regions().next_expiry();
  if (!expiry) return std::nullopt;
  const auto left = std::chrono::duration<double>(std::max(0.0, *expiry - wall_seconds));
  return os.now() + std::chrono::ceil<std::chrono::milliseconds>(left);
}

void signal_expired_regions(FileTimer& timer, const WorkerGroup& group, Os& os,
                            double wall_seconds) {
  for (const FileTimerRegions::Expiry& expiry : timer.regions().take_expired(wall_seconds)) {
    std::string who = "pid " + std::to_string(expiry.pid) + " (not a worker of this node)";
    for (const auto& w : group.workers())
      if (w->pid == expiry.pid)
        who = "rank " + std::to_string(w->rank) + " (pid " + std::to_string(w->pid) + ")";
    std::string line = "timer region '" + expiry.scope_id + "' of " + who +
                       " expired (torch.distributed.elastic.timer)";
    if (expiry.signal <= 0) {
      log::warn(line + "; its client asked for no signal");
      continue;
    }
    log::warn(line + "; sending it SIG" + sigabbrev_np(expiry.signal));
    os.signal_process(expiry.pid, expiry.signal);
  }
}

}  // namespace acc::launcher
