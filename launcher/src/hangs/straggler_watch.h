#pragma once

// The straggler watch of one attempt (--straggler_window): at the end of each window it reads the
// local ranks' progress files (collectives completed, time inside them, the one in flight; a
// rank counts from its first completed collective, so start-up is nobody's compute) and
// names the ranks slower than the others (stragglers.h), once per change. It keeps the totals of
// the windows in which a rank completed collectives for the end-of-job table. On a job of several
// nodes every launcher hands its window to an exchange (node 0's store, through the stall watch),
// and node 0 judges every rank and every node of the job with the others' latest windows; the
// other nodes print nothing, so the job has one voice. Called from the agent's thread through the
// stall watch's tick; never throws.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hangs/stragglers.h"

namespace acc::progress_file {
class Reader;
}

namespace acc::launcher {

class StragglerWatch {
 public:
  using Clock = std::chrono::steady_clock;
  struct Rank {
    int rank = 0;
    std::string progress_file;  // the ACC_PROGRESS_FILE it was started with
  };

  // Given this node's timings at the end of each window: on node 0, the other nodes' latest
  // (whatever the store holds); on the other nodes, nothing (node 0 judges the job).
  using Exchange = std::function<std::optional<std::vector<NodeTimings>>(const NodeTimings& mine)>;

  // `window` zero: off (next_tick() is never). `exchange` null: a job of one node, judged here.
  StragglerWatch(std::vector<Rank> ranks, std::chrono::milliseconds window, Clock::time_point now,
                 int node = 0, std::string host = "", Exchange exchange = nullptr);
  ~StragglerWatch();

  Clock::time_point next_tick() const;
  // At or after next_tick(): samples the files and returns the lines to print when the stragglers
  // differ from the last ones named (none otherwise).
  std::vector<std::string> tick(Clock::time_point now);
  // The windows so far in which ranks completed collectives, added up (on node 0 of several, the
  // other nodes' too, as of their latest window).
  StragglerFinding whole_run() const;
  // Whether the timings span several nodes (node 0 of a job of several nodes).
  bool job_wide() const { return !others_.empty(); }
  // Whether some window named a straggler.
  bool named_any() const { return named_any_; }

 private:
  struct Sample {
    bool ok = false;
    std::int64_t at_ns = 0;
    std::uint64_t completed = 0;
    double in_collective = 0;  // completed ones, plus the time so far of the newest in flight
  };
  Sample sample(size_t index);

  // Another node's latest timings, and the tick at which node 0 first saw them.
  struct Other {
    NodeTimings timings;
    std::uint64_t seen_at_tick = 0;
  };
  // This node's window and the other nodes' recent ones.
  std::vector<RankTiming> with_other_nodes(std::vector<RankTiming> window);

  std::vector<Rank> ranks_;
  std::chrono::milliseconds window_;
  int node_;
  std::string host_;
  Exchange exchange_;
  std::uint64_t ticks_ = 0;
  std::map<int, Other> others_;
  Clock::time_point next_tick_;
  std::vector<std::unique_ptr<progress_file::Reader>> readers_;
  std::vector<Sample> last_;
  std::vector<RankTiming> totals_;
  std::vector<int> named_;
  std::vector<int> named_nodes_;
  bool named_any_ = false;
};

}  // namespace acc::launcher
