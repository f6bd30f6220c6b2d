#pragma once

// One output stream (stdout or stderr) of one worker, as the agent reads it: its pipe, cut into
// whole lines; each line to the worker's log file, to the console (prefixed, in batches of whole
// lines, or through the --dedup_lines collapser), to the stderr tail the failure report shows,
// and counted as progress for the stall watch. The fan-out head reads each node's ssh through
// one too (process/supervisor.h). Not thread-safe: the agent's one thread owns it.

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "acc/common/unique_fd.h"
#include "acc/launcher/output/line_dedup.h"
#include "acc/launcher/output/line_splitter.h"
#include "acc/rendezvous/clock.h"

namespace acc::launcher {

struct Stream {
  static constexpr size_t kTailLines = 10;  // stderr lines kept for the failure report

  UniqueFd fd;          // the pipe from the worker
  UniqueFd file_fd;     // the worker's log file, or none
  int console_fd = -1;  // -1: not shown on the console
  std::string prefix;
  // Lines that start with this get no prefix: a node's worker lines already name their host.
  std::string prefixed_already;
  std::string console_batch;
  std::deque<std::string>* tail = nullptr;  // stderr keeps its last lines for the report
  LineDedup* dedup = nullptr;               // --dedup_lines: the console goes through it
  int local_rank = 0;
  std::function<void()> on_progress;  // a line is progress for the stall watch
  // Read from a terminal of its own (SpawnRequest::stdout_terminal): the start of a line that
  // has waited kPartialLineWait for its end (a prompt) is shown, and the log file gets the text
  // without the terminal's colour and cursor codes.
  bool terminal = false;
  static constexpr std::chrono::milliseconds kPartialLineWait{50};
  std::optional<std::chrono::steady_clock::time_point> partial_due;  // when to show it
  // The agent's clock (its Os's), which stamps the lines --dedup_lines holds back, so that their
  // window is on the clock the agent wakes by (a fake one in the agent's tests).
  const rendezvous::Clock* clock = &rendezvous::Clock::steady();
  LineSplitter splitter{[this](std::string_view line) { on_line(line); }};

  void on_line(std::string_view line);
  // Shows the start of a line that waits for its end (partial_due has passed): to the console
  // with the prefix and no newline, to the file; the rest comes as a line of its own.
  void show_partial();
  // Whole lines only, so no other worker's line can land inside one.
  void flush_console();
  enum class Read { kData, kNothingYet, kEnd };
  // One read of the pipe (non-blocking), its lines handled.
  Read read_some();
  // Drains what the pipe holds now (a grandchild that keeps it open does not hold us), then
  // closes the pipe and the file.
  void close_all();
};

}  // namespace acc::launcher
