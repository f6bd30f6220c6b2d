#pragma once

// Elastic membership (--rdzv_backend c10d or etcd-v2, --nnodes MIN:MAX): nodes agree on their
// ranks in rendezvous rounds over a store at --rdzv_endpoint (ours, or an etcd cluster), beat
// their hearts while their workers run, and meet again when a node joins, leaves, dies or
// restarts its workers.

#include <cstdint>
#include <memory>
#include <string>

#include "acc/common/endpoint.h"
#include "acc/launcher/nodes/membership.h"
#include "acc/rendezvous/clock.h"

namespace acc::rendezvous {
class ElasticRendezvous;
class EtcdWatch;
class KeyValueStore;
class StoreServer;
}  // namespace acc::rendezvous

namespace acc::launcher {

// Whether the launcher whose rendezvous node id is `id` ("address:pid") is known gone, as the
// launcher `self` (its own id) sees it: it had this node's address, and its process has exited
// or had this launcher's own pid (the same launcher started again in a new pid namespace, as a
// container restarts). A spare takes such a launcher's place without waiting
// (RendezvousOptions::gone). Where the address differs, nothing is known: false.
bool launcher_gone(const std::string& id, const std::string& self);

class StoreWatch;

class ElasticMembership : public Membership {
 public:
  // Deadlines (the join timeout, the keep-alive window, the rendezvous's own) are read from
  // `clock`, which must outlive this object. The store's waits on keys run in real time: a fake
  // clock suits the tests where no such wait runs out (a silent node, a heartbeat window).
  ElasticMembership(const LaunchPlan& plan, std::string hostname,
                    const rendezvous::Clock& clock = rendezvous::Clock::steady());
  ~ElasticMembership() override;

  // Connects (c10d: hosting the rendezvous store when the endpoint is this machine and its port
  // is free, or when is_host=1; etcd-v2: to the first member that answers), joins the next round,
  // and agrees on the workers' store: the round's node 0 serves a fresh one and publishes its
  // address (--local_addr, else store_address.h), which every node then tries (at most 3 s)
  // before its workers start. Throws TimeoutError when no round forms within join_timeout,
  // NetworkError when the endpoint cannot be reached or a node of the round cannot reach the
  // workers' store (the same line on every node, naming the address and --local_addr).
  Round join(int restart_count) override;
  std::chrono::milliseconds poll_interval() const override { return keep_alive_interval_; }
  // One heartbeat, then: are nodes waiting to join, has a participant opened a new round, or
  // has a node been silent for keep_alive_interval x keep_alive_max_attempt?
  bool changed() override;
  // changed(), with its reason as the event's `why`.
  JobEvent watch(int restart_count) override;
  // Readable when the round after this node's opens (another node's workers failed, or nodes
  // meet again): a store WAIT on our store (c10d), an etcd watch (etcd-v2).
  int event_fd() override;
  bool take_event() override;
  // Opens the next round at once, so that the other nodes stop their workers while this one
  // stops its own, instead of at their next keep-alive.
  JobEvent restart_job(int restart_count) override;
  bool serves_rendezvous() const override { return rendezvous_server_ != nullptr; }
  // The rendezvous store (c10d's or etcd), under the round's own keys.
  RoundStore round_store() override;
  // On success: an exit barrier, so that the nodes serving the rendezvous store or the workers'
  // store stay until every node of the round is done (at most --exit_barrier_timeout), then the
  // run is closed.
  void leave(bool succeeded) override;

 private:
  void connect();
  std::string rendezvous_host() const;
  // Joins the next round and returns its workers' store (served here on the round's node 0).
  Endpoint join_round(int restart_count);
  // Tries the workers' store and meets the round's other nodes, which did the same. True when
  // every node reached it; false when a node did not check within the keep-alive window (gone).
  // Throws NetworkError with the first failing node's line.
  bool every_node_reaches(const Endpoint& store);
  // Proves the job secret to the workers' store (--rdzv_conf admit_members_only).
  void present_to(const Endpoint& store) const;
  std::unique_ptr<rendezvous::KeyValueStore> connect_store();
  std::string key(const std::string& name) const;
  // Waits until key(name) exists: TimeoutError after `timeout`, InterruptedError on a stop.
  void wait_for(const std::string& name, std::chrono::milliseconds timeout);

  const LaunchPlan& plan_;
  const rendezvous::Clock& clock_;
  std::string hostname_;          // this machine's, as the host reported it
  std::string address_;           // this node, as the others reach it
  std::string socket_interface_;  // Round::socket_interface
  std::chrono::milliseconds keep_alive_interval_;
  int keep_alive_max_attempt_;
  std::chrono::milliseconds read_timeout_;  // --rdzv_conf read_timeout: the store's replies
  std::unique_ptr<rendezvous::StoreServer> rendezvous_server_;
  std::unique_ptr<rendezvous::KeyValueStore> client_;
  std::unique_ptr<rendezvous::ElasticRendezvous> rendezvous_;
  std::unique_ptr<rendezvous::StoreServer> worker_store_;
  std::unique_ptr<StoreWatch> watch_;                  // event_fd()'s, for round_ (c10d)
  std::unique_ptr<rendezvous::EtcdWatch> etcd_watch_;  // event_fd()'s, for round_ (etcd-v2)
  std::int64_t round_ = 0;
  int num_nodes_ = 0;
  int node_rank_ = 0;      // in round_
  int restart_count_ = 0;  // round_'s, as the rendezvous counts them
  Endpoint workers_store_;
  int restarts_seen_ = 0;      // the agent's restart count at the last join
  bool failure_seen_ = false;  // changed() found a silent node since the last join
  std::string last_change_;    // why changed() last said true
  // The last reply of the rendezvous store to a heartbeat (changed()), or the join.
  rendezvous::Clock::time_point last_reply_;
};

}  // namespace acc::launcher
