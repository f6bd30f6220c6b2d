#pragma once

// The one clock of the tree: every module reads the time and sleeps through it, behind an
// interface so that tests move it by hand (leveldb's Env pattern, for the clock alone) instead of
// waiting for wall-clock windows to pass. Clock::steady() is the machine's, and the only code of
// the tree that reads std::chrono's clocks or sleeps (tests/structure/seam.sh); the rendezvous
// library's clock (acc/rendezvous/clock.h) is this one with its store waits, and the launcher's Os
// is that. tests/harness/fake_clock.h is the tests'.

#include <chrono>

namespace acc {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;
  using wall_time_point = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;
  // Never goes back. Thread-safe in every implementation.
  virtual time_point now() const = 0;
  // The date and time of day (std::chrono::system_clock's on the machine), for stamps a person or
  // another program reads as a date: a worker's exit time, torchelastic's timer expiries. May
  // jump; never a deadline. Thread-safe.
  virtual wall_time_point wall_now() const = 0;

  // Blocks until now() reaches `deadline` (returns at once when it has). A fake clock may move
  // its time there instead of blocking. Thread-safe.
  virtual void sleep_until(time_point deadline) const = 0;
  void sleep_for(duration length) const { sleep_until(now() + length); }

  // Seconds from `start` to now(), for the durations a person reads (a step's time, a bar's rate).
  double seconds_since(time_point start) const {
    return std::chrono::duration<double>(now() - start).count();
  }

  // The machine's: std::chrono::steady_clock's and system_clock's time and std::this_thread's
  // sleeps; one object for the process, never destroyed (usable from static destructors).
  static const Clock& machine();
};

}  // namespace acc
