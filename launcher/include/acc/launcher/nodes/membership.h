#pragma once

// How a node learns its place in the job before each attempt, and whether it must meet the
// other nodes again while its workers run. Static jobs know their place from the flags; an
// elastic job agrees on it in rendezvous rounds.

#include <string.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/launcher/plan/plan.h"

namespace acc::rendezvous {
class Clock;
class KeyValueStore;
class StoreServer;
}  // namespace acc::rendezvous

namespace acc::launcher {

class StoreWatch;

// How a job ended, as the node that ended it tells the others (static multi-node jobs publish it
// in node 0's store, store_keys::job_end()). Plain data.
struct JobEnd {
  int node = 0;      // the node whose failure ended the job (a lost node: that node)
  std::string host;  // its host name, empty when not known (a lost node)
  int rank = -1;     // the root-cause worker's global rank; -1 when no worker failed
  int local_rank = -1;
  int pid = 0;
  int exit_code = 0;   // the worker's exit code, when signal == 0
  int signal = 0;      // the signal that ended the worker, or 0
  int status = 1;      // what every launcher of the job exits with
  std::string reason;  // "rank 3 exited with 3", "its launcher stopped beating for 5 s"
};

// What a node learns about the job from the other nodes, or decides for it.
struct JobEvent {
  enum class Kind {
    kNone,       // go on
    kMeetAgain,  // nodes joined or left: stop and join again (no restart used; elastic)
    kRestart,    // every node stops its workers and starts attempt `restart_count`
    kEnded,      // the job is over: `end` says why and with which status
  };
  Kind kind = Kind::kNone;
  int restart_count = 0;  // kRestart
  JobEnd end;             // kEnded
  bool shared = false;    // kEnded: every node of the job sees this same end
  std::string why;        // kMeetAgain, kRestart: one line for the user
};

// Thrown by join() when the job ended while this node waited to start an attempt.
class JobEndedError : public Error {
 public:
  explicit JobEndedError(JobEnd end) : Error(end.reason), end_(std::move(end)) {}
  const JobEnd& end() const { return end_; }

 private:
  JobEnd end_;
};

// Thrown by Membership::join() on a node that the job never needed: it finished while this node
// waited as a spare. The agent prints the message and exits 0.
class NotNeeded : public Error {
 public:
  using Error::Error;
};

// The store every launcher of the round that the last join() formed reaches, with a key prefix
// of that round's own: where the round's nodes check each other (--network_check). Valid until
// the next join(); store == nullptr where there is none (one node).
struct RoundStore {
  rendezvous::KeyValueStore* store = nullptr;  // not owned; used on the agent's thread only
  std::string prefix;                          // ends with '/'
  std::string address;                         // this node, as the other nodes reach it
  int node_rank = 0;
  int num_nodes = 1;
  bool serves_rendezvous = false;  // the job cannot go on without this node
};

class Membership {
 public:
  virtual ~Membership() = default;

  // Blocks until this node's round for the next attempt is known. Throws NetworkError,
  // TimeoutError (rendezvous), ConfigError, InterruptedError (a stop signal), or JobEndedError
  // (another node ended the job meanwhile).
  virtual Round join(int restart_count) = 0;

  // How often changed() wants calling while the workers run; zero: never.
  virtual std::chrono::milliseconds poll_interval() const { return {}; }

  // While the workers of the last join()'s attempt run: a descriptor that becomes readable the
  // moment another node does what watch() reports (its workers failed, it ended the job, it
  // opened a new round), so that the agent calls watch() then rather than at its next
  // poll_interval(); -1 when there is none (one node; an etcd store, polled). The first call
  // after a join() opens it (one connection to the store); it stays valid until the next join().
  // Throws NetworkError or TimeoutError when the store cannot be reached.
  virtual int event_fd() { return -1; }
  // The descriptor was readable: true when watch() should run now (once per event).
  virtual bool take_event() { return false; }

  // Keeps this node alive in the job and looks around: true when nodes joined or left, so the
  // group must stop and join again (which does not use up a restart).
  virtual bool changed() { return false; }

  // While the workers of attempt `restart_count` run, every poll_interval(): keeps this node
  // alive in the job and says what the other nodes did. The default: changed().
  virtual JobEvent watch(int restart_count) {
    (void)restart_count;
    JobEvent event;
    if (changed()) event.kind = JobEvent::Kind::kMeetAgain;
    return event;
  }

  // While this node's workers are being stopped (up to --shutdown_timeout and --kill_timeout),
  // every poll_interval(): only keeps this node alive in the job.
  virtual void keep_alive() {}

  // This node's workers failed with a restart left: asks every node to start attempt
  // restart_count + 1. Returns kRestart with the attempt the job moves to (another node may
  // have asked first), or kEnded when the job has ended meanwhile. Blocks for a store round trip.
  virtual JobEvent restart_job(int restart_count) {
    JobEvent event;
    event.kind = JobEvent::Kind::kRestart;
    event.restart_count = restart_count + 1;
    return event;
  }

  // restart_job, for a restart that --max_restarts does not count (--sdc_exit_codes), which
  // restarts_not_counted() counts instead: for the job where the nodes are linked, else for
  // this node (as an elastic node counts its own failures).
  virtual JobEvent restart_job_not_counted(int restart_count) {
    ++not_counted_;
    return restart_job(restart_count);
  }
  virtual int restarts_not_counted() { return not_counted_; }

  // This node ends the job (its workers failed with no restart left, it was stopped, ...):
  // tells every node, unless another node ended it first. Returns kEnded with the end that
  // counts: `end`, or the first one. Blocks for a store round trip; does not throw.
  virtual JobEvent end_job(const JobEnd& end) {
    JobEvent event;
    event.kind = JobEvent::Kind::kEnded;
    event.end = end;
    return event;
  }

  // Every worker of this node's attempt `restart_count` exited 0: blocks until every node's did
  // (kNone), another node's failure restarts the job (kRestart) or ends it (kEnded). Throws
  // InterruptedError on a stop signal. The default: kNone at once.
  virtual JobEvent await_exit(int restart_count) {
    (void)restart_count;
    return {};
  }

  // This node is done with the job.
  virtual void leave(bool succeeded) { (void)succeeded; }

  // The round's store for a check among its nodes (RoundStore); none by default.
  virtual RoundStore round_store() { return {}; }

  // Whether this node serves the store the job's nodes meet in (an elastic job's c10d
  // rendezvous), so that the job cannot go on without it.
  virtual bool serves_rendezvous() const { return false; }

  // While the workers of the last join()'s attempt start: the global ranks whose Gloo process
  // group has put its address in the store (PyTorch's per-rank keys), to name those that have
  // not arrived in init_process_group; nullopt where this node cannot see the store's keys (it
  // does not serve the workers' store).
  virtual std::optional<std::vector<int>> ranks_in_store() { return std::nullopt; }

  // How a long wait here (a rendezvous round, a barrier, a pre-flight check) learns that the
  // launcher was asked to stop: the agent sets `check`, which returns the stop signal that has
  // arrived (SIGINT, SIGTERM, ...; 0 while none). Such waits call throw_if_stopped() at least
  // every 100 ms, so that a launcher stops within a second at any stage.
  void set_stop_check(std::function<int()> check) { stop_check_ = std::move(check); }

 protected:
  // Throws InterruptedError (exit 128 + signal) when the stop check reports a signal.
  void throw_if_stopped() const {
    if (!stop_check_) return;
    if (const int sig = stop_check_())
      throw InterruptedError(
          sig, std::string("stopped by ") + sigabbrev_np(sig) + " while meeting the other nodes");
  }

 private:
  std::function<int()> stop_check_;
  int not_counted_ = 0;
};

// A job whose shape the flags fix (--nnodes N --node_rank R --master_addr A --master_port P).
// The launcher of node 0 serves the workers' store (PyTorch's TCPStore protocol) at
// master_port, on a free port when none was given, so no worker has to host it and no port is
// chosen and released (the race of torchrun's free-port pick). Workers of every attempt use it:
// PyTorch's own workers put each attempt under "/worker/attempt_<n>/", so a restart never sees
// the keys of the one before.
//
// With several nodes the launchers are linked through that store (job_link.h): each beats every
// keep-alive interval (--rdzv_conf keep_alive_interval, 1 s); a node that fails ends or restarts
// the job for all; node 0 ends it when a node is silent for keep_alive_max_attempt (10) intervals,
// the others when node 0 is silent or its store is gone. Attempts start together after an
// attempt barrier, and a node whose workers succeeded waits at the exit barrier for the others.
class StaticMembership : public Membership {
 public:
  explicit StaticMembership(const LaunchPlan& plan);
  // Reads its deadlines (the join timeout, the keep-alive window) from `clock` and waits on it
  // between looks at a barrier; tests pass a fake one. `clock` must outlive this object.
  StaticMembership(const LaunchPlan& plan, const rendezvous::Clock& clock);
  ~StaticMembership() override;
  // The first call on node 0 starts the store (NetworkError naming address and port when it
  // is taken). Call after the launcher has blocked the signals it handles, so that the store's
  // thread never runs a handler. With several nodes, then waits at the attempt barrier for
  // every node (up to --rdzv_conf join_timeout, 600 s: TimeoutError).
  Round join(int restart_count) override;
  std::chrono::milliseconds poll_interval() const override;
  // Several nodes: node 0's store, under store_keys::network_check_prefix() (one check a job).
  RoundStore round_store() override;
  // Several nodes: readable when another node restarts or ends the job (attempt_over's key).
  int event_fd() override;
  bool take_event() override;
  JobEvent watch(int restart_count) override;
  void keep_alive() override;
  JobEvent restart_job(int restart_count) override;
  JobEvent restart_job_not_counted(int restart_count) override;
  int restarts_not_counted() override;
  JobEvent end_job(const JobEnd& end) override;
  JobEvent await_exit(int restart_count) override;
  // Node 0 stays (at most one keep-alive window) until the other launchers have let go of its
  // store, so that none of them reads the store's end as node 0's loss; a node already silent
  // for the window is lost, not waited for.
  void leave(bool succeeded) override;
  // Node 0: the ranks whose Gloo address is in this attempt's key space.
  std::optional<std::vector<int>> ranks_in_store() override;

 private:
  class Link;
  const LaunchPlan& plan_;
  const rendezvous::Clock& clock_;
  std::unique_ptr<rendezvous::StoreServer> store_;
  std::unique_ptr<Link> link_;         // several nodes only
  std::unique_ptr<StoreWatch> watch_;  // event_fd()'s, for attempt_
  int attempt_ = 0;                    // the last join()'s restart count
  std::string socket_interface_;       // Round::socket_interface; several nodes only
};

// The global ranks named by Gloo's per-rank keys among `keys` (as stored, each under `space`):
// PyTorch 2.x's process group puts each rank's address at "<group>//<device>//<n>/<rank>"
// ("/0//cpu//0/3" on the wire). Sorted, each once; keys of another shape are ignored.
std::vector<int> gloo_ranks(const std::vector<std::string>& keys, const std::string& space);

// The membership the plan asks for: elastic for --rdzv_backend c10d or etcd-v2, else static.
std::unique_ptr<Membership> make_membership(const LaunchPlan& plan, const std::string& hostname);

}  // namespace acc::launcher
