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
// Spares: a node that finds the round closed with max_nodes is a spare. It is not counted by
// num_nodes_waiting() (so it never disturbs the running round) and waits without a deadline for
// the next round, which it joins only after `spare_delay`, so that the previous participants,
// which meet again at their next keep-alive, take their places first; at once where every
// previous participant that has not come back is known gone (RendezvousOptions::gone). When the run
// is closed it gets RendezvousClosedError. Should every participant go silent (no heartbeat for
// keep_alive_timeout), the spare opens the next round itself.
//
// Restarts: a participant that meets again because its round failed (its workers failed, or a
// node of the round went silent) says so (next_rendezvous(true)); the next round's restart_count
// is the previous one's plus one if any of its participants said so. Every node of a round gets
// the same count, spares included; a round opened only to let nodes in does not count.
//
// Runs: close_run() marks the run finished. Every node resolves the run's generation once, on its
// first next_rendezvous(): a node that finds the run closed before it ever joined starts a new
// generation, so the same command with the same run id runs again on a store that remembers the
// last run (an etcd cluster, a standalone `acc-launch rendezvous serve`).
//
// Cost: a join is a constant number of store operations on a constant number of keys, whatever
// the node count (no key lists all nodes), except for the round's first arrival, which reads the
// participants' ids and writes their ranks in one request each. Keys live under
// "rdzv/<run_id>/".

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acc/common/error.h"
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
  // How long a spare lets the previous participants rejoin a round opened after a failure
  // before it takes a place in it.
  std::chrono::milliseconds spare_delay{10'000};
  // Whether the node with this id, a participant of an earlier round, is known to be gone (the
  // launcher: it ran on this machine and its process has exited). A spare takes its place at
  // once where every participant of the round before that has not come back is gone: it keeps
  // nobody's place. May be empty: the spare waits spare_delay.
  std::function<bool(const std::string& node_id)> gone;
  // How long every participant of a full round must be silent (no heartbeat) before a spare
  // opens the next round itself: the launcher's keep_alive_interval x keep_alive_max_attempt.
  std::chrono::milliseconds keep_alive_timeout{30'000};
  // The node rank this node asks for (an elastic launcher's --node_rank), kept in every round
  // where it is below the round's node count and no node asked for it with a higher claim; -1:
  // none. The other nodes take the ranks left, in node id order.
  int wanted_rank = -1;
  // The claim: kAsked for a node rank given, kServesTheStore for rank 0 asked by the node that
  // serves the rendezvous store (torchrun's node 0 holds rank 0 unless another node asks).
  enum class Claim { kNone, kServesTheStore, kAsked };
  Claim claim = Claim::kNone;
  // Lines worth a user's eye (this node waits as a spare); may be empty.
  std::function<void(std::string_view)> log;
};

// next_rendezvous() found the run closed: the job finished (or was shut down) elsewhere.
class RendezvousClosedError : public StoreError {
 public:
  RendezvousClosedError(std::string message, bool was_spare)
      : StoreError(std::move(message)), was_spare_(was_spare) {}
  // True when this node waited as a spare (or a late node) in this call: the job never needed it.
  bool was_spare() const { return was_spare_; }

 private:
  bool was_spare_;
};

struct RendezvousInfo {
  std::int64_t round = 0;
  int node_rank = 0;  // 0 .. num_nodes-1, distinct within the round
  int num_nodes = 0;
  int restart_count = 0;  // failed rounds before this one, the same on every node of the round
};

// One node's view. Not thread-safe; uses the store it is given (which must outlive it): a
// StoreClient of our store, or an EtcdClient. Deadlines and heartbeat ages are read from `clock`
// (which must outlive it too); the store's waits must run on the same time.
class ElasticRendezvous {
 public:
  // Throws ConfigError when min_nodes < 1 or max_nodes < min_nodes.
  ElasticRendezvous(KeyValueStore& store, RendezvousOptions options, std::string node_id,
                    const Clock& clock = Clock::steady());

  // Called at least every 100 ms of every wait of this object, so that a wait can be cut short
  // by throwing from it (the launcher's InterruptedError on SIGINT/SIGTERM). Without one, waits
  // run to their deadlines.
  void set_stop_check(std::function<void()> check) { stop_check_ = std::move(check); }

  // Joins the open round (or, for a node that already took part in the current round, opens and
  // joins the next one) and blocks until that round closes; when this node came too late for
  // it, keeps waiting for the next round (as a spare, without a deadline, when the round is
  // full). `failed`: this node meets again because its last round failed, which counts a
  // restart. Throws TimeoutError when no round closes with this node within join_timeout,
  // RendezvousClosedError when close_run() was called, NetworkError when the store connection
  // breaks, and whatever the stop check throws.
  RendezvousInfo next_rendezvous(bool failed = false);

  // Nodes that joined the current round after it closed and wait for the next, when that round
  // has room for them (below max_nodes); spares of a full round do not count. Two or three reads.
  int num_nodes_waiting();

  // Bumps this node's heartbeat counter in its round: one ADD. Call after next_rendezvous().
  void heartbeat();
  // Ranks of the current round whose heartbeat did not change during the last `timeout`, as seen
  // by this node's successive calls (the first call only records). One MULTI_GET.
  std::vector<int> silent_nodes(std::chrono::milliseconds timeout);

  // True when a round after this node's has been opened: another participant is meeting again
  // (its workers failed), so this node should stop its workers and join. One store operation.
  bool superseded();

  // True when a participant of this node's round said that it failed (open_next_round, or
  // next_rendezvous(true)): the next round counts a restart. One store operation.
  bool round_failed();

  // The key that is set when the round after this node's opens (or the run closes): a node whose
  // workers run waits on it (a store WAIT, an event) to learn of a failure elsewhere at once.
  // Valid after next_rendezvous().
  std::string next_round_key() const;

  // This node's round failed (its workers did): opens the next round now, unless another node
  // did, so that the other participants, waiting on next_round_key(), stop their workers and meet
  // again while this node stops its own. next_rendezvous(true) then joins that round. Four store
  // operations at most; throws as next_rendezvous().
  void open_next_round();

  // The key prefix of this node's run, "rdzv/<run_id>/<generation>/", for the caller's own keys
  // of the run (which must not outlive it either). Valid after next_rendezvous() or close_run().
  std::string run_scope() const { return key(""); }

  // Marks the run finished: a node waiting in it (a spare) or meeting again gets
  // RendezvousClosedError; a node that never joined it starts a new run. Then waits up to `linger`
  // for the spares to see the close, so that a store that goes away with this process does not
  // leave them a broken connection instead.
  void close_run(std::chrono::milliseconds linger = std::chrono::milliseconds(0));

 private:
  std::string key(std::string_view name) const;
  std::string run_key(std::string_view name) const;  // outside any generation
  // True when it has just found this node's generation open (one CHECK that check_open() would
  // repeat); false when it had resolved it before, or moved to a new one.
  bool resolve_generation();
  // store_.wait in slices of at most 100 ms with the stop check between them; TimeoutError at
  // `deadline` (Clock::time_point::max(): none).
  void wait_until(const std::vector<std::string>& keys, Clock::time_point deadline);
  // A spare's wait for the next round after `round`; throws RendezvousClosedError on close.
  void wait_as_spare(std::int64_t round);
  // Until `round`'s next round opens, or every participant of `round` has been silent for
  // keep_alive_timeout (then opens it, the round counted as failed).
  void await_next_or_silence(std::int64_t round);
  // The heartbeat counters of `round`'s ranks; "" for one not written (yet).
  // round_key(round, prefix + i) for i in 0..count-1.
  std::vector<std::string> numbered_keys(std::int64_t round, std::string_view prefix,
                                         int count) const;
  std::vector<std::string> heartbeats(std::int64_t round, int num_nodes);
  [[noreturn]] void throw_closed(bool was_spare);
  int restarts_before(std::int64_t round);
  std::string round_key(std::int64_t round, std::string_view name) const;
  std::int64_t current_round();
  void check_open();
  // Blocks until `round` closes and returns its node count; closes it after the last call when
  // this node's arrival made the minimum.
  int await_close(std::int64_t round, int slot, Clock::time_point deadline);
  void close_round(std::int64_t round, int num_nodes);
  // The rank of the participant that arrived in `slot`: the first arrival sorts the ids and
  // publishes every slot's rank; the others wait for theirs (TimeoutError past the deadline).
  int assign_rank(std::int64_t round, int slot, int num_nodes, Clock::time_point deadline,
                  int& restart_count);
  // A spare woken by the opening of `round`: false once spare_delay has passed with the round
  // still open (take a place), true when the previous participants filled it meanwhile.
  bool spare_left_out(std::int64_t round);
  // True when every participant of the round before `round` has joined `round` or is gone
  // (options_.gone): a spare keeps nobody's place by joining it. False without options_.gone.
  bool previous_participants_back_or_gone(std::int64_t round);

  // Time left until `deadline`, at least 1 ms (a store wait of 0 may mean "no timeout").
  std::chrono::milliseconds remaining(Clock::time_point deadline) const;

  KeyValueStore& store_;
  const Clock& clock_;
  RendezvousOptions options_;
  // What this node puts in its arrival slot: its id, after the rank it asks for.
  std::string slot_value() const;
  // order[rank] = the slot of the participant that takes the rank, for the slots' `values`.
  static std::vector<int> ranks_in_order(const std::vector<std::string>& values);

  std::string node_id_;
  std::optional<RendezvousInfo> last_;
  std::optional<std::int64_t> generation_;
  std::function<void()> stop_check_;
  struct Seen {
    std::string value;
    Clock::time_point since;
  };
  std::map<int, Seen> heartbeats_seen_;
};

}  // namespace acc::rendezvous
