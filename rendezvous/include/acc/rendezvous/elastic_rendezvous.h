#pragma once

// Elastic rendezvous over the store, after torchelastic's c10d handler: nodes join numbered
// rounds; a round closes when max_nodes have joined, or a last-call period after min_nodes have.
// The store's ADD orders the arrivals, and the first num_nodes arrivals take part. Every node of
// a closed round gets the same node count and a distinct node rank: its node id's place among the
// participants' ids sorted (as torchrun sorts its node descriptors), so the same nodes get the
// same ranks whatever order they arrived in. Nodes that arrive after a round closed wait for the
// next one, which starts when a participant calls next_rendezvous() again (an agent does so when
// num_nodes_waiting() > 0 or a node died).
//
// Cost: a join is a constant number of store operations on a constant number of keys, whatever
// the node count (no key lists all nodes), except for the round's first arrival, which reads the
// participants' ids and writes their ranks in one request each. Keys live under
// "rdzv/<run_id>/".

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acc/rendezvous/clock.h"
#include "acc/rendezvous/key_value_store.h"

namespace acc::rendezvous {

struct RendezvousOptions {
  std::string run_id = "default";
  int min_nodes = 1;
  int max_nodes = 1;
  // How long a node waits for a round to close (or a next round to open) before TimeoutError.
  std::chrono::milliseconds join_timeout{600'000};
  // After min_nodes have joined, how long the round stays open for more.
  std::chrono::milliseconds last_call_timeout{30'000};
};

struct RendezvousInfo {
  std::int64_t round = 0;
  int node_rank = 0;  // 0 .. num_nodes-1, distinct within the round
  int num_nodes = 0;
};

// One node's view. Not thread-safe; uses the store it is given (which must outlive it): a
// StoreClient of our store, or an EtcdClient. Deadlines and heartbeat ages are read from `clock`
// (which must outlive it too); the store's waits must run on the same time.
class ElasticRendezvous {
 public:
  // Throws ConfigError when min_nodes < 1 or max_nodes < min_nodes.
  ElasticRendezvous(KeyValueStore& store, RendezvousOptions options, std::string node_id,
                    const Clock& clock = Clock::steady());

  // Joins the open round (or, for a node that already took part in the current round, opens and
  // joins the next one) and blocks until that round closes; when this node came too late for
  // it, keeps waiting for the next round. Throws TimeoutError when no round closes with this
  // node within join_timeout, StoreError when close_run() was called, NetworkError when the
  // store connection breaks.
  RendezvousInfo next_rendezvous();

  // Nodes that joined the current round after it closed, and wait for the next. Two store reads.
  int num_nodes_waiting();

  // Bumps this node's heartbeat counter in its round: one ADD. Call after next_rendezvous().
  void heartbeat();
  // Ranks of the current round whose heartbeat did not change during the last `timeout`, as seen
  // by this node's successive calls (the first call only records). One MULTI_GET.
  std::vector<int> silent_nodes(std::chrono::milliseconds timeout);

  // True when a round after this node's has been opened: another participant is meeting again
  // (its workers failed), so this node should stop its workers and join. One store operation.
  bool superseded();

  // Marks the run finished: every later next_rendezvous() of any node throws StoreError.
  void close_run();

 private:
  std::string key(std::string_view name) const;
  std::string round_key(std::int64_t round, std::string_view name) const;
  std::int64_t current_round();
  void check_open();
  // Blocks until `round` closes and returns its node count; closes it after the last call when
  // this node's arrival made the minimum.
  int await_close(std::int64_t round, int slot, Clock::time_point deadline);
  void close_round(std::int64_t round, int num_nodes);
  // The rank of the participant that arrived in `slot`: the first arrival sorts the ids and
  // publishes every slot's rank; the others wait for theirs (TimeoutError past the deadline).
  int assign_rank(std::int64_t round, int slot, int num_nodes, Clock::time_point deadline);

  // Time left until `deadline`, at least 1 ms (a store wait of 0 may mean "no timeout").
  std::chrono::milliseconds remaining(Clock::time_point deadline) const;

  KeyValueStore& store_;
  const Clock& clock_;
  RendezvousOptions options_;
  std::string node_id_;
  std::optional<RendezvousInfo> last_;
  struct Seen {
    std::string value;
    Clock::time_point since;
  };
  std::map<int, Seen> heartbeats_seen_;
};

}  // namespace acc::rendezvous
