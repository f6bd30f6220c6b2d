#pragma once

// Pre-flight: before any worker starts, a node that does not host the job's store checks that it
// can reach it (the master of a static job, the c10d rendezvous store, an etcd member), so that a
// wrong address is one line within --preflight_timeout instead of a silent wait for the whole
// join timeout. Reasons, each one line: the name does not resolve; it resolves to a loopback
// address on a multi-node job (Debian's "127.0.1.1 hostname" line in /etc/hosts); connection
// refused; no route to host; timed out (a firewall drops the connection).
//
// A node may start before the one it must reach: every reason but loopback is retried, once a
// second, until --preflight_timeout (or an elastic job's shorter join_timeout) has passed since
// the first try; a wait that goes on past 5 s prints one notice so it is not silent.
// docs/launch.md, "Pre-flight".

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "acc/common/endpoint.h"
#include "acc/launcher/plan/plan.h"

// Declared only: main.cc includes this header without the rendezvous module's include path.
namespace acc::rendezvous {
class Clock;
}

namespace acc::launcher {

// Returns the stop signal that has arrived (SIGINT, SIGTERM, ...), 0 while none; may be empty.
using StopCheck = std::function<int()>;

// What this node must reach, as the user named it.
struct PreflightTarget {
  std::string what;  // "the master (--master_addr/--master_port)"
  Endpoint endpoint;
};

// The targets of this node: the master for node_rank > 0 of a static multi-node job; the
// rendezvous endpoint of a c10d job unless it is an address of this machine (then this node may
// host it); every etcd member (one answering is enough). Empty when there is nothing to check or
// plan.preflight_timeout is 0. Pure but for the local-address test of c10d.
std::vector<PreflightTarget> preflight_targets(const LaunchPlan& plan);

enum class Reach { kReached, kUnresolved, kLoopback, kRefused, kNoRoute, kTimedOut, kOther };

struct ReachResult {
  Reach reach = Reach::kReached;
  std::string why;  // "connection refused", "the name node0 resolves to 127.0.1.1, ..."
};

// One try at one endpoint: resolve, check for loopback when `multi_node` and the host is a name
// other than localhost, connect. Blocks at most about `timeout` of `clock`'s time, calling `stop`
// every 100 ms. Throws InterruptedError when `stop` reports a signal.
// Without `clock`: on the steady clock.
ReachResult try_reach(const Endpoint& endpoint, bool multi_node, std::chrono::milliseconds timeout,
                      const StopCheck& stop, const rendezvous::Clock& clock);
ReachResult try_reach(const Endpoint& endpoint, bool multi_node, std::chrono::milliseconds timeout,
                      const StopCheck& stop);

// The pre-flight of a launch: returns once every target is reached (for etcd, one member).
// Blocks at most about plan.preflight_timeout (or join_timeout, when shorter) plus 1 s, of
// `clock`'s time (it waits between tries on `clock`; tests pass a fake one). Throws ConfigError
// for a loopback name (exit 2), NetworkError naming the target and the last reason when the bound
// passes (exit 3), InterruptedError when `stop` reports a signal (exit 128 + signal).
// Without `clock`: on the steady clock.
void run_preflight(const LaunchPlan& plan, const StopCheck& stop, const rendezvous::Clock& clock);
void run_preflight(const LaunchPlan& plan, const StopCheck& stop);

// --dry_run: one try at each target, each bounded by 2 s; one line each on the launcher's log.
// Returns false when a target cannot be reached for a reason other than "refused" (nothing
// listening yet is what a dry run before node 0 starts sees).
bool dry_run_preflight(const LaunchPlan& plan);

}  // namespace acc::launcher
