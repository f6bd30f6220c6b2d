#pragma once

// --dedup_lines in the agent: one LineDedup for the console's stdout and one for its stderr, and
// the writes of what they let out. The agent feeds them from Stream::on_line and wakes for
// next_due().

#include <chrono>
#include <optional>

#include "acc/launcher/output/line_dedup.h"

namespace acc::launcher {

class DedupedConsole {
 public:
  DedupedConsole(std::chrono::milliseconds window, const LineDedup::PrefixFn& prefix);

  // The deduplicator of a console stream (STDOUT_FILENO or STDERR_FILENO).
  LineDedup* for_console(int console_fd);

  // The earliest time a pending line of either stream falls due; nullopt when none is pending.
  std::optional<LineDedup::Clock::time_point> next_due() const;

  // Writes the lines due at `now` (the agent's clock, which stamped them); with `everything`, all
  // pending lines (the workers have ended).
  void write(bool everything, LineDedup::Clock::time_point now);

 private:
  LineDedup out_;
  LineDedup err_;
};

}  // namespace acc::launcher
