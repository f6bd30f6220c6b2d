#pragma once

// The clock of the rendezvous library and the launcher: acc::Clock (acc/common/clock.h), the
// tree's one clock, with the store waits that a fake clock may cut short. The elastic rendezvous,
// the launcher's agent (its Os is this clock), its waits (pre-flight, the static job's link) and
// its observers read their deadlines, heartbeat ages and wall-clock stamps from it, and sleep on
// it, so that tests move it by hand instead of waiting for wall-clock windows to pass.
// Clock::steady() is the machine's; tests/harness/fake_clock.h the tests'.

#include <string>
#include <vector>

#include "acc/common/clock.h"

namespace acc::rendezvous {

class KeyValueStore;

class Clock : public acc::Clock {
 public:
  // Blocks until every key of `keys` exists in `store` (true) or now() reaches `deadline`
  // (false). This clock's: a store WAIT, which the keys' setting ends at once, so that a wait
  // that looks for a stop signal between slices still sees the keys the moment they are set. A
  // fake clock may look once and move its time to the deadline instead. Throws what the store
  // throws, except TimeoutError.
  virtual bool wait_for_keys(KeyValueStore& store, const std::vector<std::string>& keys,
                             time_point deadline) const;

  // The machine's: acc::Clock::machine()'s time and sleeps; one object for the process, never
  // destroyed.
  static const Clock& steady();
};

}  // namespace acc::rendezvous
