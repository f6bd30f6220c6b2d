#include "acc/launcher/nodes/membership.h"

#include <string.h>

#include <regex>
#include <set>

#include "acc/common/endpoint.h"
#include "acc/common/exit_code.h"
#include "acc/common/store_keys.h"
#include "acc/rendezvous/store_client.h"
#include "acc/rendezvous/store_server.h"
#include "nodes/job_link.h"
#include "nodes/store_address.h"
#include "nodes/store_connect.h"
#include "nodes/store_watch.h"
#include "output/log.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;

// How often a wait here (a barrier, the connection to node 0) looks at the stop check: well under
// the second in which a stopped launcher must end. Not how soon it sees the other nodes: a
// barrier's wait is a store WAIT on the key that ends it, which returns when the key is set.
constexpr milliseconds kWaitStep{100};

}  // namespace

// This node's link to the others: a client of node 0's store and the JobLink over it, the waits
// (connecting, the barriers) with their stop checks, and what a store error means: node 0 is gone.
class StaticMembership::Link {
 public:
  Link(const LaunchPlan& plan, const rendezvous::Clock& clock,
       std::function<void()> throw_if_stopped)
      : plan_(plan),
        clock_(clock),
        throw_if_stopped_(std::move(throw_if_stopped)),
        interval_(rdzv_seconds(plan, "keep_alive_interval", 1)),
        // Ten beats: a launcher busy for a few seconds (a hang report collects stacks for up to
        // 5 s) is not lost.
        window_(interval_ * rdzv_count(plan, "keep_alive_max_attempt", 10)),
        join_timeout_(rdzv_seconds(plan, "join_timeout", 600)) {}

  milliseconds interval() const { return interval_; }

  // Node 0's store, once connected; nullptr before.
  rendezvous::KeyValueStore* store() const { return client_.get(); }

  // Connects to node 0's store (retrying while it starts, at most join_timeout) and joins.
  void connect(const std::string& host, int port) {
    host_ = host;
    port_ = port;
    rendezvous::StoreClientOptions store;
    store.host = host;
    store.port = port;
    store.job_member = true;
    store.job_secret = plan_.job_secret;
    // Node 0's own store, in this process: a reply that does not come is a bug, not a loss.
    // The others' replies are bounded by the keep-alive window in guarded().
    store.timeout = milliseconds(60'000);
    store.handshake_timeout = milliseconds(1000);
    client_ = connect_until(store, clock_, clock_.now() + join_timeout_, kWaitStep * 5,
                            throw_if_stopped_, "node 0's store, --master_addr and --master_port",
                            "node 0's store at " + format_endpoint(host, port) +
                                " did not answer within the join timeout (" +
                                std::to_string(join_timeout_.count() / 1000) +
                                " s, --rdzv_conf join_timeout)");
    last_reply_ = clock_.now();
    JobLink::Options options;
    options.node_rank = plan_.node_rank;
    options.nnodes = plan_.nnodes;
    options.keep_alive_window = window_;
    job_ = std::make_unique<JobLink>(*client_, clock_, options);
    job_->join();
    next_beat_ = clock_.now() + interval_;
  }

  bool connected() const { return client_ != nullptr; }

  // The attempt this node is at: a job end it publishes wakes the others waiting in it.
  void set_attempt(int restart_count) {
    if (job_) job_->set_attempt(restart_count);
  }

  // A watch on node 0's store for `key`, on a connection of its own; nullptr once the job has
  // ended here (nothing left to watch) or when node 0's store cannot be reached (the next tick
  // says so).
  std::unique_ptr<StoreWatch> watch_key(const std::string& key) {
    if (ended_ || !job_) return nullptr;
    try {
      return std::make_unique<StoreWatch>(host_, port_, key, static_cast<int>(interval_.count()));
    } catch (const Error&) {
      return nullptr;
    }
  }

  // Runs `step` on the link; a store that cannot be reached ends the job: node 0 is gone. A
  // node 0 that vanished without closing the connection (its machine died, or the network
  // between us) answers nothing: a node that has had no reply for the keep-alive window takes
  // it for lost, as node 0 does a node whose beats stopped. Not at the first late reply, though:
  // on a loaded host our own store's reply was seen to take over 5 s.
  template <typename Step>
  JobEvent guarded(Step step) {
    if (ended_) return *ended_;
    if (!job_) return {};
    try {
      if (plan_.node_rank != 0)
        client_->set_timeout(
            std::max(std::chrono::duration_cast<milliseconds>(last_reply_ + window_ - clock_.now()),
                     interval_));
      JobEvent event = step(*job_);
      last_reply_ = clock_.now();
      if (event.kind == JobEvent::Kind::kEnded) ended(event);
      return event;
    } catch (const Error& e) {
      JobEvent event;
      event.kind = JobEvent::Kind::kEnded;
      event.shared = true;
      event.end.node = 0;
      event.end.host = plan_.master_addr;
      event.end.status = kExitNodeLost;
      const std::string store = format_endpoint(plan_.master_addr, plan_.master_port);
      event.end.reason = dynamic_cast<const TimeoutError*>(&e)
                             ? "its store at " + store +
                                   " has not answered for the keep-alive window (" +
                                   seconds_text(window_) + ")"
                             : "its store at " + store + " is gone (" + e.what() + ")";
      ended(event);
      return event;
    }
  }

  // Waits, beating, until `done()` or the job restarts or ends; kNone when done. Every node that
  // ends the wait (the last to arrive, one that restarts or ends the job) sets `wake`, which this
  // wait waits on in the store: it ends the moment that happens, not at a next look.
  template <typename Done>
  JobEvent wait(int restart_count, Done done, const std::string& what, bool bounded,
                const std::string& wake) {
    const auto deadline = clock_.now() + join_timeout_;
    bool woken = false;
    for (;;) {
      try {
        throw_if_stopped_();
      } catch (const InterruptedError& e) {
        JobEnd end;
        end.node = plan_.node_rank;
        end.host = plan_.hostname;
        end.status = 128 + e.signal();
        end.reason = std::string("its launcher was stopped by SIG") + sigabbrev_np(e.signal()) +
                     " while waiting for the other nodes";
        publish_end(end);
        throw;
      }
      bool finished = false;
      const JobEvent event = guarded([&](JobLink& job) {
        if (done(job)) {
          finished = true;
          return JobEvent{};
        }
        if (woken || clock_.now() >= next_beat_) {
          next_beat_ = clock_.now() + interval_;
          return job.tick(restart_count);
        }
        JobEvent ended;
        if (auto end = job.ended()) {
          ended.kind = JobEvent::Kind::kEnded;
          ended.end = *end;
          ended.shared = true;
        }
        return ended;
      });
      if (finished || event.kind != JobEvent::Kind::kNone) return event;
      if (bounded && clock_.now() >= deadline) {
        // The nodes that did arrive end too, instead of each waiting out its own timeout.
        JobEnd end;
        end.node = plan_.node_rank;
        end.host = plan_.hostname;
        end.status = kExitTimeout;
        end.reason = "not every node reached " + what + " within the join timeout (" +
                     std::to_string(join_timeout_.count() / 1000) + " s, --rdzv_conf join_timeout)";
        publish_end(end);
        throw TimeoutError("node " + std::to_string(plan_.node_rank) + ": " + end.reason);
      }
      // Until the key is set, the next beat is due, or the stop check's next look.
      const auto until = std::min(next_beat_, clock_.now() + kWaitStep);
      guarded([&](JobLink&) {
        woken = clock_.wait_for_keys(*client_, {wake}, until);
        return JobEvent{};
      });
      if (ended_) return *ended_;
    }
  }

  JobEvent tick(int restart_count) {
    next_beat_ = clock_.now() + interval_;
    return guarded([&](JobLink& job) { return job.tick(restart_count); });
  }

  void beat() {
    guarded([&](JobLink& job) {
      job.beat();
      return JobEvent{};
    });
  }

  // Publishes this node's end of the job unless one is known already. With node 0 gone there is
  // nobody to tell: this node's own end is what it reports.
  JobEvent publish_end(const JobEnd& end) {
    if (ended_) return *ended_;
    JobEvent event;
    event.kind = JobEvent::Kind::kEnded;
    event.end = end;
    try {
      event.end = job_->end(end);
      event.shared = true;
    } catch (const Error&) {
    }
    ended(event);
    return event;
  }

  JobEvent restart(int restart_count, bool counted = true) {
    return guarded([&](JobLink& job) {
      JobEvent event;
      if (auto end = job.ended()) {
        event.kind = JobEvent::Kind::kEnded;
        event.end = *end;
        event.shared = true;
        return event;
      }
      event.kind = JobEvent::Kind::kRestart;
      event.restart_count = job.restart(restart_count, counted);
      return event;
    });
  }

  // The job's restarts that --max_restarts does not count; `known` where the store is gone.
  int restarts_not_counted(int known) {
    guarded([&](JobLink& job) {
      known = job.restarts_not_counted();
      return JobEvent{};
    });
    return known;
  }

  // Arrives at `barrier`, or leaves it again (delta -1), ignoring a store that is gone.
  void arrive(const std::string& barrier, int delta, const std::string& wake = "") {
    guarded([&](JobLink& job) {
      job.arrive(barrier, delta, wake);
      return JobEvent{};
    });
  }

  // Node 0, done with the job: keeps its store (at most one keep-alive window, or until a stop
  // signal) until every other node has let go of it, so that none of them reads the store's end
  // as node 0's loss. Nodes silent for the window are not waited for: they are lost.
  void let_others_go() {
    if (!job_ || plan_.node_rank != 0) return;
    const auto deadline = clock_.now() + window_;
    while (clock_.now() < deadline) {
      try {
        throw_if_stopped_();
        if (job_->others_let_go()) return;
      } catch (const std::exception&) {
        return;  // a stop signal, or (a bug) our own store failing: nothing to wait for
      }
      clock_.sleep_for(kLetGoStep);
    }
  }

  void close() {
    let_go();
    job_.reset();
    client_.reset();
  }

 private:
  // How often node 0 looks whether the others have let go of its store.
  static constexpr milliseconds kLetGoStep{20};

  // Once the job has ended this node needs nothing more from the store: it lets go of it at
  // once, so that node 0 need not wait for it. Node 0 keeps its link: it waits for the others in
  // let_others_go().
  void ended(const JobEvent& event) {
    ended_ = event;
    if (plan_.node_rank == 0) return;
    close();
  }

  // Tells node 0 this node is done with its store (best effort: a store that is gone needs no
  // telling).
  void let_go() {
    if (!job_ || plan_.node_rank == 0) return;
    try {
      job_->let_go();
    } catch (const Error&) {
    }
  }

  const LaunchPlan& plan_;
  const rendezvous::Clock& clock_;
  std::function<void()> throw_if_stopped_;
  const milliseconds interval_;
  const milliseconds window_;
  const milliseconds join_timeout_;
  std::string host_;  // node 0's store, as this node reaches it
  int port_ = 0;
  std::unique_ptr<rendezvous::StoreClient> client_;
  std::unique_ptr<JobLink> job_;
  std::optional<JobEvent> ended_;
  rendezvous::Clock::time_point next_beat_;
  rendezvous::Clock::time_point last_reply_;
};

std::vector<int> gloo_ranks(const std::vector<std::string>& keys, const std::string& space) {
  static const std::regex kGlooAddress("//(cpu|cuda)//[0-9]+/([0-9]{1,9})$");
  std::set<int> ranks;
  std::smatch match;
  for (const std::string& key : keys) {
    const std::string own = key.starts_with(space) ? key.substr(space.size()) : key;
    if (std::regex_search(own, match, kGlooAddress)) ranks.insert(std::stoi(match[2].str()));
  }
  return {ranks.begin(), ranks.end()};
}

StaticMembership::StaticMembership(const LaunchPlan& plan)
    : StaticMembership(plan, rendezvous::Clock::steady()) {}
StaticMembership::StaticMembership(const LaunchPlan& plan, const rendezvous::Clock& clock)
    : plan_(plan), clock_(clock) {}
StaticMembership::~StaticMembership() = default;

Round StaticMembership::join(int restart_count) {
  if (plan_.node_rank == 0 && !store_) {
    rendezvous::StoreServerOptions options;
    options.port = plan_.master_port;
    options.job_secret = plan_.job_secret;
    options.admit_members_only = plan_.admit_members_only;
    // Loopback (this launcher and its workers) and the addresses of this node's that MASTER_ADDR
    // brings the other nodes to, not every interface: the store has no authorisation.
    const StoreListen listen = store_listen_for(
        plan_.master_addr, plan_.nnodes == 1 || names_this_machine(plan_.master_addr));
    set_listen(options, listen);
    // A client refused (bad bytes, a limit, a stall): one line each, as the rendezvous store's.
    // A worker's connection that merely ends is not one.
    options.log = [](std::string_view line) { log::warn("store: " + std::string(line)); };
    store_ = std::make_unique<rendezvous::StoreServer>(options);
    store_->start();
  }
  const int port = store_ ? store_->port() : plan_.master_port;
  // Each attempt's workers get a key space of their own: with several nodes it begins when the
  // attempt barrier lets them start (every node's earlier workers are gone by then).
  if (store_)
    store_->begin_key_space(store_keys::worker_key_space(restart_count),
                            plan_.nnodes > 1 ? store_keys::attempt_ready(restart_count) : "");
  if (plan_.nnodes > 1) {
    if (!link_) {
      link_ = std::make_unique<Link>(plan_, clock_, [this] { throw_if_stopped(); });
      link_->connect(
          store_ ? (is_ipv6_literal(plan_.master_addr) ? "::1" : "127.0.0.1") : plan_.master_addr,
          port);
      // Gloo takes a worker's address from the hostname: where that would not bring the other
      // nodes here (Debian's "127.0.1.1 <hostname>"), the interface this node reaches node 0 on.
      socket_interface_ =
          worker_socket_interface(plan_.hostname, plan_.master_addr, plan_.local_addr);
    }
    watch_.reset();  // the last attempt's
    link_->set_attempt(restart_count);
    // Every node starts attempt `restart_count` together, after the others stopped theirs.
    link_->arrive(store_keys::attempt_barrier(restart_count), 1,
                  store_keys::attempt_ready(restart_count));
    JobEvent event;
    try {
      event = link_->wait(
          restart_count,
          [&](JobLink& job) { return job.all_arrived(store_keys::attempt_barrier(restart_count)); },
          "the start of attempt " + std::to_string(restart_count), /*bounded=*/true,
          store_keys::attempt_ready(restart_count));
    } catch (const TimeoutError&) {
      leave(false);  // node 0: the others read why from its store
      throw;
    }
    if (event.kind == JobEvent::Kind::kEnded) throw JobEndedError(event.end);
  }
  attempt_ = restart_count;
  Round round = static_round(plan_, port, restart_count);
  round.agent_store = true;
  round.socket_interface = socket_interface_;
  return round;
}

RoundStore StaticMembership::round_store() {
  RoundStore round;
  if (!link_ || !link_->store()) return round;
  round.store = link_->store();
  round.prefix = store_keys::network_check_prefix();
  round.address = plan_.local_addr.empty() ? plan_.hostname : plan_.local_addr;
  round.node_rank = plan_.node_rank;
  round.num_nodes = plan_.nnodes;
  return round;
}

std::chrono::milliseconds StaticMembership::poll_interval() const {
  return link_ ? link_->interval() : std::chrono::milliseconds(0);
}

int StaticMembership::event_fd() {
  if (!link_) return -1;
  if (!watch_) watch_ = link_->watch_key(store_keys::attempt_over(attempt_));
  return watch_ ? watch_->fd() : -1;
}

bool StaticMembership::take_event() {
  return watch_ && watch_->fired();
}

JobEvent StaticMembership::watch(int restart_count) {
  return link_ ? link_->tick(restart_count) : JobEvent{};
}

void StaticMembership::keep_alive() {
  if (link_) link_->beat();
}

JobEvent StaticMembership::restart_job(int restart_count) {
  return link_ ? link_->restart(restart_count) : Membership::restart_job(restart_count);
}

JobEvent StaticMembership::restart_job_not_counted(int restart_count) {
  if (!link_) return Membership::restart_job_not_counted(restart_count);
  return link_->restart(restart_count, /*counted=*/false);
}

int StaticMembership::restarts_not_counted() {
  return link_ ? link_->restarts_not_counted(Membership::restarts_not_counted())
               : Membership::restarts_not_counted();
}

JobEvent StaticMembership::end_job(const JobEnd& end) {
  return link_ ? link_->publish_end(end) : Membership::end_job(end);
}

JobEvent StaticMembership::await_exit(int restart_count) {
  if (!link_) return {};
  link_->arrive(store_keys::exit_barrier(), 1, store_keys::attempt_over(restart_count));
  const JobEvent event = link_->wait(
      restart_count, [](JobLink& job) { return job.all_arrived(store_keys::exit_barrier()); },
      "the exit barrier", /*bounded=*/false, store_keys::attempt_over(restart_count));
  // Another node's failure restarts the job: this node's arrival no longer counts.
  if (event.kind == JobEvent::Kind::kRestart) link_->arrive(store_keys::exit_barrier(), -1);
  return event;
}

std::optional<std::vector<int>> StaticMembership::ranks_in_store() {
  if (!store_) return std::nullopt;
  const std::string space = store_keys::worker_key_space(attempt_);
  return gloo_ranks(store_->keys(space), space);
}

void StaticMembership::leave(bool succeeded) {
  (void)succeeded;
  if (link_) {
    // The others read the job's end (or the exit barrier) from node 0's store: it stays until
    // their launchers have let go of it.
    link_->let_others_go();
    link_->close();
  }
  // Nobody needs the store now: its thread winds down while the launcher cleans up.
  if (store_) store_->request_stop();
}

}  // namespace acc::launcher
