#pragma once

// How a node learns its place in the job before each attempt, and whether it must meet the
// other nodes again while its workers run. Static jobs know their place from the flags; an
// elastic job agrees on it in rendezvous rounds.

#include <chrono>

#include "acc/launcher/plan.h"

namespace acc::launcher {

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
};

// A job whose shape the flags fix (--nnodes N --node_rank R --master_addr A --master_port P).
class StaticMembership : public Membership {
 public:
  explicit StaticMembership(const LaunchPlan& plan) : plan_(plan) {}
  // On one node without a port, a fresh free port each attempt; on node 0, a taken port is
  // one clear NetworkError.
  Round join(int restart_count) override;

 private:
  const LaunchPlan& plan_;
};

}  // namespace acc::launcher
