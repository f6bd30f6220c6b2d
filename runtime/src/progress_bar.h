#pragma once

// The Trainer's progress bar on the main process: redrawn in place on a terminal, a line every
// tenth of the run otherwise (a launcher's pipe, a log file), so a log stays short.

#include <chrono>
#include <cstdint>
#include <string>

#include "acc/common/clock.h"

namespace acc::runtime::detail {

class ProgressBar {
 public:
  // A disabled bar draws nothing. `total` steps make a full bar; `first` were done before
  // (a resumed run).
  ProgressBar(bool enabled, int64_t total, int64_t first);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` steps of the total are done, in `epoch` (fractional).
  void update(int64_t done, double epoch);
  // Prints `line` to stdout without tearing the bar (on a terminal the bar is redrawn below it).
  void print(const std::string& line);
  // Ends the bar's line.
  void close();

 private:
  void draw();

  bool enabled_;
  bool tty_;
  int64_t total_;
  int64_t first_;
  int64_t done_;
  double epoch_ = 0;
  int64_t next_line_ = 0;  // without a terminal: the step of the next line
  bool drawn_ = false;
  acc::Clock::time_point start_;
  acc::Clock::time_point last_draw_{};
};

}  // namespace acc::runtime::detail
