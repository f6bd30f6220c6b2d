#include "progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "acc/common/clock.h"

namespace acc::runtime::detail {
namespace {

std::string duration(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  char buffer[32];
  if (s >= 3600)
    std::snprintf(buffer, sizeof(buffer), "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buffer, sizeof(buffer), "%02ld:%02ld", s / 60, s % 60);
  return buffer;
}

}  // namespace

ProgressBar::ProgressBar(bool enabled, int64_t total, int64_t first)
    : enabled_(enabled && total > 0),
      tty_(isatty(STDERR_FILENO) != 0),
      total_(total),
      first_(first),
      done_(first),
      start_(acc::Clock::machine().now()) {
  next_line_ = first_ + std::max<int64_t>(1, total_ / 10);
}

ProgressBar::~ProgressBar() {
  close();
}

void ProgressBar::update(int64_t done, double epoch) {
  done_ = done;
  epoch_ = epoch;
  if (!enabled_) return;
  const auto now = acc::Clock::machine().now();
  if (tty_) {
    // Redrawing costs a write: at most ten a second.
    if (done_ < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else {
    if (done_ < next_line_ && done_ < total_) return;
    while (next_line_ <= done_) next_line_ += std::max<int64_t>(1, total_ / 10);
  }
  last_draw_ = now;
  draw();
}

void ProgressBar::draw() {
  const double elapsed = acc::Clock::machine().seconds_since(start_);
  const double rate = elapsed > 0 ? static_cast<double>(done_ - first_) / elapsed : 0;
  const double left = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0;
  constexpr int kWidth = 30;
  const auto filled = static_cast<int>(kWidth * std::min<int64_t>(done_, total_) / total_);
  char line[256];
  std::snprintf(line, sizeof(line), "%3d%%|%s%s| %lld/%lld [%s<%s, %.2f it/s, epoch %.2f]",
                static_cast<int>(100 * done_ / total_),
                std::string(static_cast<size_t>(filled), '#').c_str(),
                std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(),
                static_cast<long long>(done_), static_cast<long long>(total_),
                duration(elapsed).c_str(), duration(left).c_str(), rate, epoch_);
  std::fprintf(stderr, tty_ ? "\r%s\033[K" : "%s\n", line);
  std::fflush(stderr);
  drawn_ = tty_;
}

void ProgressBar::print(const std::string& line) {
  if (enabled_ && drawn_) std::fprintf(stderr, "\r\033[K");
  std::cout << line << '\n' << std::flush;
  if (enabled_ && drawn_) draw();
}

void ProgressBar::close() {
  if (!enabled_) return;
  if (drawn_) {
    draw();
    std::fprintf(stderr, "\n");
  }
  drawn_ = false;
  enabled_ = false;
}

}  // namespace acc::runtime::detail
