#pragma once

// Cuts a byte stream into lines so that each worker line reaches the console whole, in one write,
// never torn or interleaved with another worker's. Pure; one per worker stream.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace acc::launcher {

class LineSplitter {
 public:
  // A line longer than this is passed on in pieces rather than held without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

  // `on_line` receives each line with its terminator ('\n', or '\r' for progress bars; none
  // for the last piece at finish()).
  explicit LineSplitter(std::function<void(std::string_view)> on_line)
      : on_line_(std::move(on_line)) {}

  void feed(std::string_view bytes);
  // Passes on what is left (a last line without a newline).
  void finish();
  // The start of a line whose end has not come yet ("" when none), handed over: a prompt that
  // waits for input shows before its line ends.
  std::string take_pending() { return std::exchange(pending_, {}); }
  bool has_pending() const { return !pending_.empty(); }

 private:
  std::function<void(std::string_view)> on_line_;
  std::string pending_;
};

}  // namespace acc::launcher
