#pragma once

// How a node learns its place in the job before each attempt, and whether it must meet the
// other nodes again while its workers run. Static jobs know their place from the flags; an
// elastic job agrees on it in rendezvous rounds.

#include <string.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "acc/common/error.h"
#include "acc/launcher/plan/plan.h"

namespace acc::rendezvous {
class StoreServer;
}

namespace acc::launcher {

// Thrown by Membership::join() on a node that the job never needed: it finished while this node
// waited as a spare. The agent prints the message and exits 0.
class NotNeeded : public Error {
 public:
  using Error::Error;
};

class Membership {
 public:
  virtual ~Membership() = default;

  // Blocks until this node's round for the next attempt is known. Throws NetworkError,
  // TimeoutError (rendezvous) or ConfigError.
  virtual Round join(int restart_count) = 0;

  // How often changed() wants calling while the workers run; zero: never.
  virtual std::chrono::milliseconds poll_interval() const { return {}; }

  // Keeps this node alive in the job and looks around: true when nodes joined or left, so the
  // group must stop and join again (which does not use up a restart).
  virtual bool changed() { return false; }

  // This node is done with the job.
  virtual void leave(bool succeeded) { (void)succeeded; }

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
};

// A job whose shape the flags fix (--nnodes N --node_rank R --master_addr A --master_port P).
// The launcher of node 0 serves the workers' store (PyTorch's TCPStore protocol) at
// master_port, on a free port when none was given, so no worker has to host it and no port is
// chosen and released (the race of torchrun's free-port pick). Workers of every attempt use it:
// PyTorch's own workers put each attempt under "/worker/attempt_<n>/", so a restart never sees
// the keys of the one before.
class StaticMembership : public Membership {
 public:
  explicit StaticMembership(const LaunchPlan& plan);
  ~StaticMembership() override;
  // The first call on node 0 starts the store (NetworkError naming address and port when it
  // is taken). Call after the launcher has blocked the signals it handles, so that the store's
  // thread never runs a handler.
  Round join(int restart_count) override;

 private:
  const LaunchPlan& plan_;
  std::unique_ptr<rendezvous::StoreServer> store_;
};

// The membership the plan asks for: elastic for --rdzv_backend c10d or etcd-v2, else static.
std::unique_ptr<Membership> make_membership(const LaunchPlan& plan, const std::string& hostname);

}  // namespace acc::launcher
