#pragma once

// Where the hang report's collective traces come from: each local
// worker's progress file (the ACC_PROGRESS_FILE the launcher gave it), node 0's store for
// the ranks of the other nodes (store_keys::collective_trace); the processes a worker started are
// process/proc.h's. Called from the agent's thread at a stall or on demand; never throws.

#include <chrono>
#include <string>
#include <vector>

#include "acc/rendezvous/clock.h"
#include "hangs/collective_match.h"

namespace acc::rendezvous {
class StoreClient;
}

namespace acc::launcher {

// A local worker: its rank and its progress file (never read from /proc/PID/environ, which a
// warm worker's standby started without).
struct LocalRank {
  int rank = 0;
  std::string progress_file;
};

// The trace of every rank whose progress file can be read. Empty when no rank has any call in
// its file (native workers without libacc, programs that issue no collective yet).
std::vector<RankTrace> local_traces(const std::vector<LocalRank>& ranks);

// Puts each trace under store_keys::collective_trace(restart_count, rank). Throws what the store
// client throws.
void publish_traces(rendezvous::StoreClient& store, int restart_count,
                    const std::vector<RankTrace>& traces);

// The traces of ranks 0 .. world_size-1 in the store: waits up to `wait` on `clock` for the ones
// not there yet (looking every 50 ms), then returns those that came (in rank order). Throws what
// the store client throws.
std::vector<RankTrace> gather_traces(rendezvous::StoreClient& store, int restart_count,
                                     int world_size, std::chrono::milliseconds wait,
                                     const rendezvous::Clock& clock = rendezvous::Clock::steady());

}  // namespace acc::launcher
