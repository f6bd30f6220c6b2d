#pragma once

// The launchers of one static job, linked through node 0's store (store_keys.h, "the launchers
// of one job"): each beats, publishes how the job ended or that it restarts, and meets the others
// at the attempt and exit barriers. Every step here is a few store requests and never waits on a
// key, so the caller decides how often to call and how to wait; the store and the clock are
// given, so tests run it on an in-memory store with a clock they move (memory_store.h).

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "acc/launcher/nodes/membership.h"
#include "acc/rendezvous/clock.h"
#include "acc/rendezvous/key_value_store.h"

namespace acc::launcher {

// A keep-alive window as the lines name it: "10 s", or "2500 ms".
std::string seconds_text(std::chrono::milliseconds duration);

// One line of JSON for the store (store_json.h): {"exit_code":3,"format":"acc-job-end","host":"b",
// "local_rank":1,"node":1,"pid":42,"rank":3,"reason":"rank 3 exited with 3","signal":0,
// "status":3,"version":1}.
std::string format_job_end(const JobEnd& end);
// The inverse. Text that is not one (not JSON, another format or version, a field missing or of
// another type) gives a default JobEnd (node 0, no rank) whose status is 1 and whose reason is
// the text itself: every node still ends the job, as a failure, and prints what it read.
JobEnd parse_job_end(std::string_view text);
// What every node prints: "node 1 (host b) ended the job: rank 3 exited with 3".
std::string describe_job_end(const JobEnd& end);

class JobLink {
 public:
  struct Options {
    int node_rank = 0;
    int nnodes = 1;
    // A node whose beat did not change for this long is lost: node 0 watches every node, the
    // others watch node 0.
    std::chrono::milliseconds keep_alive_window{5'000};
  };

  // Uses `store` and `clock`, which must outlive it. Not thread-safe. Every method throws what
  // the store throws (NetworkError, TimeoutError) when it cannot be reached.
  JobLink(rendezvous::KeyValueStore& store, const rendezvous::Clock& clock, Options options);

  // Adds this node to the job: its first beat, and on node 0 the job's restart count (0).
  void join();
  // The attempt this node is at (0 until called): an end published from now on wakes the nodes
  // waiting in it (store_keys::attempt_ready and attempt_over of `restart_count`).
  void set_attempt(int restart_count) { attempt_ = restart_count; }
  // One beat: ADD 1 to this node's alive counter.
  void beat();
  // A beat, then what the others did: the job ended (kEnded), it moved past `restart_count`
  // (kRestart), or a watched node has been silent for the keep-alive window (then this node ends
  // the job for it: kEnded with status kExitNodeLost). kNone otherwise.
  JobEvent tick(int restart_count);

  // The job's end when one was published.
  std::optional<JobEnd> ended();
  // Publishes `end` unless an end was published before; returns the one that counts. Wakes the
  // nodes waiting in this node's attempt (set_attempt) at once.
  JobEnd end(const JobEnd& end);
  // Moves the job from `restart_count` to the next attempt unless another node did; returns
  // the job's restart count now. Wakes the nodes whose workers run attempt `restart_count`.
  // A restart not `counted` adds one to restarts_not_counted().
  int restart(int restart_count, bool counted = true);
  // The job's restarts that --max_restarts does not count (--sdc_exit_codes).
  int restarts_not_counted();

  // Barriers: this node arrives (adds `delta`: -1 leaves again), and whether every node has.
  // The last node to arrive sets `wake` (when not empty), the key the others wait on.
  void arrive(const std::string& barrier, int delta = 1, const std::string& wake = "");
  bool all_arrived(const std::string& barrier);

  // A node other than 0 is done with the store: it read the job's end or passed the exit barrier.
  void let_go();
  // Node 0: whether every other node that joined has let go, except those silent for the
  // keep-alive window (lost: they never will).
  bool others_let_go();

 private:
  // The watched nodes whose beat has not changed for the keep-alive window.
  std::vector<int> silent_nodes();

  rendezvous::KeyValueStore& store_;
  const rendezvous::Clock& clock_;
  Options options_;
  struct Seen {
    std::string value;
    rendezvous::Clock::time_point since;
  };
  std::map<int, Seen> beats_seen_;
  int attempt_ = 0;
};

}  // namespace acc::launcher
