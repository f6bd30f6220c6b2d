#pragma once

// --network_check's measures (network_check.h judges them): this node serves a small TCP
// endpoint for the other nodes of its round (an echo for latency, a sink for bandwidth), times a
// short computation, measures each link to the others over raw TCP (what a collective's ring
// meets: one stream each way, the kernel's TCP stack), and exchanges the measures through the
// round's store. LibTorch-free and bounded: kNetworkCheckBound for the whole exchange.
//
// Its keys, under the round's prefix (RoundStore::prefix):
//   <prefix>address/<n>    node n's endpoint, "host:port"
//   <prefix>measures/<n>   node n's measures (encode_node_measures)
//   <prefix>counted        the nodes whose measures count, "0,1,2", by node 0 of the round

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "acc/launcher/nodes/membership.h"
#include "acc/launcher/plan/plan.h"
#include "acc/rendezvous/clock.h"
#include "nodes/network_check.h"

namespace acc::launcher {

// The whole exchange, from the first key to the last node's measures.
inline constexpr std::chrono::milliseconds kNetworkCheckBound{8000};
// The other nodes' endpoints, from the start.
inline constexpr std::chrono::milliseconds kNetworkAddressWait{3000};

// How much each link is measured: the bandwidth over up to `bytes`, stopped at `bandwidth_time`
// (a slow link), the latency as the median of `round_trips` one-byte round trips; and how long
// the round waits for the others' endpoints and measures (a test under a sanitizer, ten times
// slower, waits longer than a launch does).
struct ProbeLimits {
  std::size_t bytes = 8 << 20;
  std::chrono::milliseconds bandwidth_time{500};
  int round_trips = 20;
  std::chrono::milliseconds address_wait = kNetworkAddressWait;
  std::chrono::milliseconds bound = kNetworkCheckBound;
};

// This node's share of the check in the round `round`: publishes its endpoint, times the
// computation, measures its links to its probe_peers (network_check.h) whose endpoints came
// within limits.address_wait, publishes its measures and waits for every node's until
// limits.bound from the start; then every node takes the measures that node 0 of the round found
// by its own bound (the key <prefix>counted), so that all judge the same measures.
// Returns the measures that count, this node's included. Blocks up to limits.bound plus one
// link's measure and 2 s (node 0's list); `stop_check` runs at least every 100 ms of a wait and may
// throw (a stop signal). Throws what the store throws (NetworkError, TimeoutError).
std::vector<NodeMeasures> measure_round(const RoundStore& round, const std::string& host,
                                        const rendezvous::Clock& clock,
                                        const std::function<void()>& stop_check,
                                        const ProbeLimits& limits = {});

// What the check decided for the round, as this node sees it (every node sees the same).
struct NetworkOutcome {
  NetworkDecision decision;
  bool this_node_faulty = false;
};

// The whole check in `round` for the plan's job (--network_check_factor, --nnodes MIN, elastic
// or not): measure_round, the verdicts, and the table with the time it took, printed here
// (log::info). Blocks and throws as measure_round.
NetworkOutcome run_network_check(const RoundStore& round, const LaunchPlan& plan,
                                 const rendezvous::Clock& clock,
                                 const std::function<void()>& stop_check);

// One link's measure from this node to the probe endpoint at `host`:`port`; reached false where
// it cannot connect by `deadline` or the peer breaks off. Blocks up to about `deadline` plus the
// bandwidth measure's time. Thread-safe.
PeerMeasure measure_link(const std::string& host, int port, const rendezvous::Clock& clock,
                         Clock::time_point deadline, const ProbeLimits& limits = {});

// The computation's time on this node: a fixed single-threaded float workload (a small matrix
// product, about 0.1 s on a current core), timed on `clock`.
double time_computation(const rendezvous::Clock& clock);

// The probe endpoint the other nodes measure against: listens on every address (port 0, the
// system's pick) and serves each connection on a thread of its own until the peer closes. The
// destructor stops it and joins its threads (each connection's at most a few seconds).
class ProbeServer {
 public:
  ProbeServer();  // throws NetworkError when no socket can listen
  ~ProbeServer();
  ProbeServer(const ProbeServer&) = delete;
  ProbeServer& operator=(const ProbeServer&) = delete;
  int port() const { return port_; }

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace acc::launcher
