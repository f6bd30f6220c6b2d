#pragma once

// Stragglers from collective timing. In synchronous training every rank completes the same
// collectives, and the slow rank is the one the others wait for: it spends the least time inside
// collectives and the most outside them (computing). Over a window, each rank's time outside
// collectives per completed collective (its "compute per step") is compared with the median of
// all ranks; a rank above kStragglerFactor times the median (and by at least kStragglerMinExcess
// seconds per step, so that microsecond noise names no one) is a straggler. Pure: the straggler
// watch (straggler_watch.h) samples the progress files and the stall watch ticks it.

#include <cstdint>
#include <string>
#include <vector>

namespace acc::launcher {

inline constexpr double kStragglerFactor = 1.5;
inline constexpr double kStragglerMinExcess = 0.01;  // seconds per step

// One rank over one window (or the whole run).
struct RankTiming {
  int rank = 0;
  std::uint64_t steps = 0;          // collectives completed in the window
  double window = 0;                // seconds the window lasted for this rank
  double in_collective = 0;         // seconds inside collectives in the window (in-flight ones too)
  double compute_per_step() const;  // (window - in_collective) / steps
  double wait_per_step() const;     // in_collective / steps
};

struct StragglerFinding {
  std::vector<int> ranks;           // the stragglers, lowest rank first; empty: none
  double median_compute = 0;        // the median rank's compute per step
  std::vector<RankTiming> timings;  // the ranks that completed a collective, by rank
};

// The stragglers among `timings`; ranks that completed no collective are left out (nothing to
// compare), and fewer than two such ranks find none.
StragglerFinding find_stragglers(std::vector<RankTiming> timings);

// "rank 3 is a straggler: 0.80 s of compute per step against a median of 0.10 s; the other ranks
// wait 0.70 s per step in collectives (window 5 s, 6 steps)". Empty when no straggler.
std::string describe_stragglers(const StragglerFinding& finding, double window);

// A table: rank, steps, compute s/step, wait s/step, and a mark on the stragglers. Ends in a
// newline; empty when there is no timing.
std::string format_straggler_table(const StragglerFinding& finding);

}  // namespace acc::launcher
