#pragma once

// The one clock of the rendezvous library and the launcher: the time the elastic rendezvous, the
// launcher's agent (its Os is this clock), its waits (pre-flight, the static job's link) and its
// observers read their deadlines, heartbeat ages and wall-clock stamps from, and sleep on, behind
// an interface so that tests move it by hand (leveldb's Env pattern, for the clock alone) instead
// of waiting for wall-clock windows to pass. Clock::steady() is the machine's;
// tests/harness/fake_clock.h the tests'.

#include <chrono>
#include <string>
#include <vector>

namespace acc::rendezvous {

class KeyValueStore;

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

  // Blocks until every key of `keys` exists in `store` (true) or now() reaches `deadline`
  // (false). This clock's: a store WAIT, which the keys' setting ends at once, so that a wait
  // that looks for a stop signal between slices still sees the keys the moment they are set. A
  // fake clock may look once and move its time to the deadline instead. Throws what the store
  // throws, except TimeoutError.
  virtual bool wait_for_keys(KeyValueStore& store, const std::vector<std::string>& keys,
                             time_point deadline) const;

  // The machine's: std::chrono::steady_clock's and system_clock's time and std::this_thread's
  // sleeps; one object for the process, never destroyed.
  static const Clock& steady();
};

}  // namespace acc::rendezvous
