#pragma once

// The straggler watch of one attempt (--straggler_window): at the end of each window it reads the
// local ranks' progress files (collectives completed, time inside them, the one in flight) and
// names the ranks slower than the others (stragglers.h), once per change. It keeps the totals of
// the windows in which a rank completed collectives for the end-of-job table. Called from the
// agent's thread through the stall watch's tick; never throws.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "observe/stragglers.h"

namespace acc::progress_file {
class Reader;
}

namespace acc::launcher {

class StragglerWatch {
 public:
  using Clock = std::chrono::steady_clock;
  struct Rank {
    int rank = 0;
    int pid = 0;  // its progress file is the ACC_PROGRESS_FILE it was started with
  };

  // `window` zero: off (next_tick() is never).
  StragglerWatch(std::vector<Rank> ranks, std::chrono::milliseconds window, Clock::time_point now);
  ~StragglerWatch();

  Clock::time_point next_tick() const;
  // At or after next_tick(): samples the files and returns the line to print when the stragglers
  // differ from the last ones named (empty otherwise).
  std::string tick(Clock::time_point now);
  // The windows so far in which ranks completed collectives, added up.
  StragglerFinding whole_run() const;
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

  std::vector<Rank> ranks_;
  std::chrono::milliseconds window_;
  Clock::time_point next_tick_;
  std::vector<std::unique_ptr<progress_file::Reader>> readers_;
  std::vector<Sample> last_;
  std::vector<RankTiming> totals_;
  std::vector<int> named_;
  bool named_any_ = false;
};

}  // namespace acc::launcher
