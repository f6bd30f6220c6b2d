#pragma once

// Collapsed console output (--dedup_lines): a line that several ranks print within a short
// window comes out once, as "[rank0-7]: line". Pure: lines go in with their source and time,
// text to print comes out; the caller owns the clock and the console, so a fake clock tests it.
//
// Each source's lines wait in its own queue; only the heads of the queues come out, so every
// source's lines come out in the order it printed them. A head comes out, together with the
// equal heads of other sources, as soon as
//   - every source has it at its head (the line everyone prints: "[rank0-7]: ..."), or
//   - every other source went past it: printed lines since it was seen, none of them this text, or
//   - it was first seen one window ago (so a line only one rank prints waits at most a window).
// A source whose stream ended stops being waited for.

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace acc::launcher {

class LineDedup {
 public:
  using Clock = std::chrono::steady_clock;
  // The prefix of a line printed by these sources (ascending, at least one).
  using PrefixFn = std::function<std::string(const std::vector<int>& sources)>;

  LineDedup(std::chrono::milliseconds window, PrefixFn prefix);

  // `source` (a worker's stream, by local rank) feeds this deduplicator from now on.
  void add_source(int source);

  // A whole line (with or without its newline) from `source`, seen at `now`.
  void add(int source, std::string_view line, Clock::time_point now);

  // `source` will print nothing more: lines are no longer held for it.
  void finish_source(int source);

  // The lines due at `now`, each prefixed and ending in a newline; "" if none.
  std::string take_due(Clock::time_point now);

  // Every pending line, merged as far as they can be, now that no source will print more (at the
  // end of the workers): the same rules with every source finished and no window.
  std::string take_all();

  // When the next pending line falls due at the latest; nullopt when none is pending.
  std::optional<Clock::time_point> next_due() const;

 private:
  struct Line {
    std::string text;
    size_t hash;  // of text, computed once: lines are compared with every other queue
    Clock::time_point seen;
  };
  struct Source {
    std::deque<Line> queue;
    // Hash of text -> how many lines of the queue have it. A collision only makes a line wait
    // for a copy that will not come, at most one window.
    std::unordered_map<size_t, int> pending;
    bool finished = false;
  };
  // Takes the first head that may come out at `now` (nullopt: the end, when one always may);
  // false if none may.
  bool take_one(std::optional<Clock::time_point> now, std::string& out);
  std::vector<int> sharing_head(const std::string& text) const;

  std::chrono::milliseconds window_;
  PrefixFn prefix_;
  std::map<int, Source> sources_;
  std::map<std::vector<int>, std::string> prefixes_;  // by group: expanding costs more than a line
};

// The log line prefix template for a group of ranks: ${rank} and ${local_rank} become ranges
// ("0-3,5"), ${role_name} and ${hostname} as for one rank.
std::string expand_group_prefix(const std::string& prefix_template, const std::vector<int>& ranks,
                                const std::vector<int>& local_ranks, const std::string& role,
                                const std::string& hostname);

}  // namespace acc::launcher
