#pragma once

// Stragglers from collective timing. In synchronous training every rank completes the same
// collectives, and the slow rank is the one the others wait for: it spends the least time inside
// collectives and the most outside them (computing). Over a window, each rank's time outside
// collectives per completed collective (its "compute per step") is compared with the median of
// all ranks; a rank above kStragglerFactor times the median (and by at least kStragglerMinExcess
// seconds per step, so that microsecond noise names no one) is a straggler.
// Across nodes the same holds for a whole node (a slow machine, a throttled GPU, a busy NIC): a
// node whose fastest rank computes more than kStragglerFactor times the median of the other
// nodes' fastest ranks (and by kStragglerMinExcess) is a straggling node, named once instead of
// each of its ranks. Pure: the straggler watch (straggler_watch.h) samples the progress files, the
// stall watch ticks it, and the timings of other nodes come through node 0's store, encoded here.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace acc::launcher {

inline constexpr double kStragglerFactor = 1.5;
inline constexpr double kStragglerMinExcess = 0.01;  // seconds per step

// One rank over one window (or the whole run).
struct RankTiming {
  int rank = 0;
  int node = 0;                     // the node rank of its launcher
  std::uint64_t steps = 0;          // collectives completed in the window
  double window = 0;                // seconds the window lasted for this rank
  double in_collective = 0;         // seconds inside collectives in the window (in-flight ones too)
  double compute_per_step() const;  // (window - in_collective) / steps
  double wait_per_step() const;     // in_collective / steps
};

struct StragglerFinding {
  std::vector<int> ranks;           // the straggling ranks not on a straggling node, lowest first
  std::vector<int> nodes;           // the straggling nodes, lowest first; empty: none
  double median_compute = 0;        // the median rank's compute per step
  std::vector<RankTiming> timings;  // the ranks that completed a collective, by rank
  bool empty() const { return ranks.empty() && nodes.empty(); }
};

// The stragglers among `timings`; ranks that completed no collective are left out (nothing to
// compare), and fewer than two such ranks find none. Nodes are compared when the timings come
// from two nodes or more.
StragglerFinding find_stragglers(std::vector<RankTiming> timings);

// One line per straggling node, then one for the straggling ranks:
//   "node 1 (host-b) is a straggler: its ranks compute at least 0.35 s per step against 0.05 s on
//    the other nodes; the other nodes' ranks wait 0.30 s per step for it (window 5 s, 13 steps)"
//   "rank 3 is a straggler: 0.80 s of compute per step against a median of 0.10 s; the other ranks
//    wait 0.70 s per step for it (window 5 s, 6 steps)"
// `hosts` names the nodes (node rank -> host) where known. Empty when no straggler.
std::vector<std::string> describe_stragglers(const StragglerFinding& finding, double window,
                                             const std::map<int, std::string>& hosts = {});

// A table: rank (and node, when the timings span several), steps, compute s/step, wait s/step,
// and a mark on the stragglers. Ends in a newline; empty when there is no timing.
std::string format_straggler_table(const StragglerFinding& finding);

// What one node's launcher puts in node 0's store at the end of each window
// (store_keys::straggler_timings): its ranks' timings over that window and over the attempt so
// far. `sequence` counts its windows, so node 0 can tell a new window from one it has seen.
struct NodeTimings {
  int node = 0;
  std::string host;
  std::uint64_t sequence = 0;
  std::vector<RankTiming> window;
  std::vector<RankTiming> totals;
};

// One line of JSON (nodes/store_json.h): {"format":"acc-stragglers","host":"gpu-d","node":3,
// "sequence":17,"totals":[...],"version":2,"window":[{"in_collective":0.25,"rank":6,"steps":12,
// "window":5.001}]}, each rank's node being the node's. decode returns nullopt for text that is
// not one: another format or version, not JSON, cut short, a field missing or of another type.
std::string encode_node_timings(const NodeTimings& timings);
std::optional<NodeTimings> decode_node_timings(const std::string& text);

}  // namespace acc::launcher
