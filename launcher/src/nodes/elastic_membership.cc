#include "nodes/elastic_membership.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"
#include "acc/common/processes.h"
#include "acc/common/strings.h"
#include "acc/common/unique_fd.h"
#include "acc/launcher/host/host.h"
#include "acc/rendezvous/elastic_rendezvous.h"
#include "acc/rendezvous/etcd_client.h"
#include "acc/rendezvous/store_client.h"
#include "acc/rendezvous/store_server.h"
#include "nodes/job_link.h"
#include "nodes/preflight.h"
#include "nodes/store_address.h"
#include "nodes/store_connect.h"
#include "nodes/store_watch.h"
#include "output/log.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;

// How long a node tries the workers' store before its workers start. The store listens before
// its address is published, so a connection is answered at once or refused; only a dropped
// one (a firewall) waits this long.
constexpr milliseconds kStoreCheckBound{3000};

// Where a store that clients reach at `host` listens: loopback and the addresses of this node's
// that `host` resolves to (every interface where it brings them to none; store_address.h).
void listen_for(rendezvous::StoreServerOptions& options, const LaunchPlan& plan,
                const std::string& host, const std::string& peer_host, const char* named_as) {
  const bool only_this_machine = plan.max_nodes == 1 || names_this_machine(peer_host);
  set_listen(options, store_listen_for(host, only_this_machine, named_as));
}

}  // namespace

bool launcher_gone(const std::string& id, const std::string& self) {
  const std::size_t colon = id.rfind(':');
  const std::size_t own_colon = self.rfind(':');
  if (colon == std::string::npos || own_colon == std::string::npos ||
      id.compare(0, colon, self, 0, own_colon) != 0 || colon != own_colon)
    return false;
  const std::string pid = id.substr(colon + 1);
  if (pid == self.substr(own_colon + 1)) return true;
  const std::optional<int> value = parse_int(pid);
  return value && *value > 0 && !processes::exists(*value);
}

ElasticMembership::ElasticMembership(const LaunchPlan& plan, std::string hostname,
                                     const rendezvous::Clock& clock)
    : plan_(plan),
      clock_(clock),
      hostname_(std::move(hostname)),
      address_(plan.local_addr.empty() ? hostname_ : plan.local_addr),
      keep_alive_interval_(rdzv_seconds(plan, "keep_alive_interval", 5)),
      keep_alive_max_attempt_(rdzv_count(plan, "keep_alive_max_attempt", 3)),
      read_timeout_(rdzv_seconds(plan, "read_timeout", 60)) {}

ElasticMembership::~ElasticMembership() = default;

std::string ElasticMembership::key(const std::string& name) const {
  // Inside the run's generation, so that the next run of the same --rdzv_id on a store that
  // outlives this one (etcd, `acc-launch rendezvous serve`) never reads this run's keys.
  return rendezvous_->run_scope() + "launch/" + std::to_string(round_) + "/" + name;
}

// The host whose route tells which of this node's addresses the other nodes reach.
std::string ElasticMembership::rendezvous_host() const {
  if (plan_.rdzv_backend != "etcd-v2") return plan_.rdzv_host;
  if (plan_.etcd_endpoints.empty()) return "";
  return parse_endpoint(plan_.etcd_endpoints.front(), 2379, "etcd").host;
}

void ElasticMembership::connect() {
  client_ = connect_store();
  const AddressFacts facts = read_address_facts(hostname_, rendezvous_host());
  if (plan_.local_addr.empty()) {
    // The hostname, as torchrun publishes it, unless it would not bring the other nodes here
    // (store_address.h). Rather than let the workers share the rendezvous store, as torchrun 2.x
    // does: that works for c10d only (etcd has no TCPStore), and each round keeps a store of its
    // own, so that the /worker/attempt_<n>/ keys of a round that only let nodes in (the same n)
    // never meet the last round's.
    const StoreAddress chosen = choose_store_address(facts);
    address_ = chosen.address;
    if (!chosen.why.empty()) log::info(chosen.why);
  }
  // Gloo takes the workers' own address from the hostname too.
  socket_interface_ = worker_interface(worker_socket_address(facts, plan_.local_addr));
  rendezvous::RendezvousOptions options;
  options.run_id = plan_.run_id;
  options.min_nodes = plan_.min_nodes;
  options.max_nodes = plan_.max_nodes;
  options.join_timeout = rdzv_seconds(plan_, "join_timeout", 600);
  options.last_call_timeout = rdzv_seconds(plan_, "last_call_timeout", 30);
  // The previous participants meet again at their next keep-alive and then stop their workers:
  // two intervals let them take their places before a spare does.
  options.spare_delay =
      rdzv_seconds(plan_, "spare_delay", 2.0 * keep_alive_interval_.count() / 1000.0);
  options.keep_alive_timeout = keep_alive_interval_ * keep_alive_max_attempt_;
  options.log = [](std::string_view line) { log::info(line); };
  // Stable ranks: the node rank asked for (--node_rank), else rank 0 for the store's server.
  if (plan_.wanted_node_rank) {
    options.wanted_rank = *plan_.wanted_node_rank;
    options.claim = rendezvous::RendezvousOptions::Claim::kAsked;
  } else if (rendezvous_server_) {
    options.wanted_rank = 0;
    options.claim = rendezvous::RendezvousOptions::Claim::kServesTheStore;
  }
  const std::string node_id = address_ + ":" + std::to_string(::getpid());
  options.gone = [node_id](const std::string& id) { return launcher_gone(id, node_id); };
  rendezvous_ = std::make_unique<rendezvous::ElasticRendezvous>(*client_, options, node_id, clock_);
  rendezvous_->set_stop_check([this] { throw_if_stopped(); });
}

void ElasticMembership::wait_for(const std::string& name, milliseconds timeout) {
  // In slices, so that SIGINT/SIGTERM stop the launcher within a second here too.
  const auto deadline = clock_.now() + timeout;
  for (;;) {
    throw_if_stopped();
    const auto left = std::chrono::ceil<milliseconds>(deadline - clock_.now());
    try {
      client_->wait({key(name)}, std::clamp(left, milliseconds(1), milliseconds(100)));
      return;
    } catch (const TimeoutError&) {
      if (clock_.now() >= deadline) throw;
    }
  }
}

std::unique_ptr<rendezvous::KeyValueStore> ElasticMembership::connect_store() {
  if (plan_.rdzv_backend == "etcd-v2") {
    // The cluster outlives any node: nobody hosts it, and it must be up before the job starts.
    rendezvous::EtcdClientOptions etcd;
    etcd.endpoints = plan_.etcd_endpoints;
    etcd.timeout = read_timeout_;
    // --rdzv_conf protocol=https,cacert=,cert=,key= (build_plan checked them).
    auto conf = [&](const char* key) {
      const auto given = plan_.rdzv_conf.find(key);
      return given == plan_.rdzv_conf.end() ? std::string() : given->second;
    };
    etcd.tls.enabled = conf("protocol") == "https";
    etcd.tls.ca_file = conf("cacert");
    etcd.tls.cert_file = conf("cert");
    etcd.tls.key_file = conf("key");
    return std::make_unique<rendezvous::EtcdClient>(etcd);
  }
  const bool may_host = hosts_rendezvous_store(plan_);
  // Serves the store unless the port is taken: then another launcher on this machine serves it
  // already and we are its client. Tried again between the client's tries, so that a port taken
  // by a process that then went (another program's, or a launcher that failed) is served here
  // rather than waited on by every node.
  rendezvous::StoreServerOptions options;
  options.job_secret = plan_.job_secret;
  options.admit_members_only = plan_.admit_members_only;
  if (may_host) {
    options.port = plan_.rdzv_port;
    listen_for(options, plan_, plan_.rdzv_host, plan_.rdzv_host, "the rendezvous endpoint");
    options.log = [](std::string_view line) {
      log::warn("rendezvous store: " + std::string(line));
    };
  }
  const auto try_to_serve = [this, &options] {
    try {
      auto server = std::make_unique<rendezvous::StoreServer>(options);
      server->start();
      rendezvous_server_ = std::move(server);
    } catch (const NetworkError&) {
      if (rdzv_is_host(plan_).value_or(false)) throw;
    }
  };
  if (may_host) try_to_serve();
  rendezvous::StoreClientOptions client;
  client.job_member = true;
  client.job_secret = plan_.job_secret;
  client.host = plan_.rdzv_host;
  client.port = plan_.rdzv_port;
  client.timeout = read_timeout_;
  // The host may start after this node: keep trying for the join timeout, in short tries with
  // the stop check between them, so that SIGINT/SIGTERM end the wait within a second. A server
  // that accepts and does not answer the handshake within a second is tried again too (a store
  // loaded to that point answers a later try), and named as such when the time is up.
  client.handshake_timeout = std::min(client.timeout, milliseconds(1000));
  const milliseconds join_timeout = rdzv_seconds(plan_, "join_timeout", 600);
  return connect_until(
      client, clock_, clock_.now() + join_timeout, milliseconds(100),
      [&] {
        throw_if_stopped();
        if (may_host && !rendezvous_server_) try_to_serve();
      },
      "the rendezvous endpoint, --rdzv_endpoint",
      acc::detail::concat("no store server answered at ",
                          format_endpoint(plan_.rdzv_host, plan_.rdzv_port), " within ",
                          join_timeout.count(), " ms; is it running and reachable?"));
}

Round ElasticMembership::join(int restart_count) {
  if (!client_) connect();
  for (;;) {
    const Endpoint workers_store = join_round(restart_count);
    if (every_node_reaches(workers_store)) break;
    failure_seen_ = true;  // a node of the round vanished before its check: meet again
  }
  Round round;
  round.node_rank = node_rank_;
  round.nnodes = num_nodes_;
  round.master_addr = workers_store_.host;
  round.master_port = workers_store_.port;
  // Failed rounds so far, the same on every node of the round (spares included), as torchrun
  // counts restarts: a round that only let nodes in does not count. Each round has a fresh
  // workers' store, so PyTorch's /worker/attempt_<n>/ keys of one round never meet another's.
  // (--max_restarts still counts this node's own failures.)
  round.restart_count = restart_count_;
  round.agent_store = true;
  round.socket_interface = socket_interface_;
  log::info("rendezvous round {}: node {} of {}", round_, node_rank_, num_nodes_);
  last_reply_ = clock_.now();
  return round;
}

Endpoint ElasticMembership::join_round(int restart_count) {
  worker_store_.reset();  // the last round's; its workers are gone
  watch_.reset();
  etcd_watch_.reset();
  // A restart the agent counted, or a node of the round that went silent: the round failed.
  const bool failed = restart_count > restarts_seen_ || failure_seen_;
  restarts_seen_ = restart_count;
  failure_seen_ = false;
  rendezvous::RendezvousInfo info;
  try {
    info = rendezvous_->next_rendezvous(failed);
  } catch (const rendezvous::RendezvousClosedError& e) {
    if (!e.was_spare()) throw;
    throw NotNeeded("the job finished without needing this node (it waited as a spare)");
  }
  round_ = info.round;
  num_nodes_ = info.num_nodes;
  if (info.node_rank == 0) {
    rendezvous::StoreServerOptions options;
    // Admission's refusals are said; other closes (workers that end) are not.
    options.log = [admission = plan_.admit_members_only](std::string_view line) {
      if (admission && line.find("not a member of the job") != std::string_view::npos)
        log::warn("workers' store: " + std::string(line));
    };
    options.job_secret = plan_.job_secret;
    options.admit_members_only = plan_.admit_members_only;
    listen_for(options, plan_, address_, rendezvous_host(), "the workers' store address");
    worker_store_ = std::make_unique<rendezvous::StoreServer>(options);
    worker_store_->start();
    client_->set(key("workers_store"), format_endpoint(address_, worker_store_->port()));
  }
  wait_for("workers_store", rdzv_seconds(plan_, "join_timeout", 600));
  node_rank_ = info.node_rank;
  restart_count_ = info.restart_count;
  workers_store_ =
      parse_endpoint(client_->get(key("workers_store")), 0, "the round's workers store");
  return workers_store_;
}

void ElasticMembership::present_to(const Endpoint& store) const {
  rendezvous::StoreClientOptions options;
  options.host = store.host;
  options.port = store.port;
  options.connect_timeout = kStoreCheckBound;
  options.timeout = kStoreCheckBound;
  options.job_member = true;
  options.job_secret = plan_.job_secret;
  rendezvous::StoreClient proof(options);  // proves it as it connects
}

bool ElasticMembership::every_node_reaches(const Endpoint& store) {
  // Workers that cannot reach their store wait in TCPStore's connect until PyTorch's timeout
  // (30 minutes), saying nothing: so every node tries it first, and says so in the round's keys.
  const ReachResult reached = try_reach(
      store, false, kStoreCheckBound,
      [this] {
        throw_if_stopped();
        return 0;
      },
      clock_);
  if (reached.reach != Reach::kReached)
    client_->compare_set(
        key("unreachable"), "",
        detail::concat("node ", node_rank_, " cannot reach the workers' store at ",
                       store.to_string(), " (", reached.why, "), the MASTER_ADDR that node 0 ",
                       "of the round published: start every launcher with --local_addr, an ",
                       "address of its node that the other nodes reach"));
  // Where the workers' store admits only the job's members, this node's launcher proves the
  // secret there before its workers come: its address becomes a member's.
  if (reached.reach == Reach::kReached && plan_.admit_members_only) present_to(store);
  if (client_->add(key("store_checked"), 1) == num_nodes_) client_->set(key("store_checks"), "1");
  // Every node checks within milliseconds of the others, or within the bound of its check when
  // the store does not answer: one that has not said so a keep-alive window later is gone.
  const milliseconds bound = kStoreCheckBound + keep_alive_interval_ * keep_alive_max_attempt_;
  try {
    wait_for("store_checks", bound);
  } catch (const TimeoutError&) {
    log::info("a node of round {} did not check the workers' store within {} ms; meeting again",
              round_, bound.count());
    return false;
  }
  if (client_->check({key("unreachable")})) {
    const std::string line = client_->get(key("unreachable"));
    // The node serving the rendezvous store stays until every node has read the line (bounded),
    // so that none of them meets a closed store instead.
    if (client_->add(key("unreachable_read"), 1) == num_nodes_)
      client_->set(key("unreachable_all_read"), "1");
    if (rendezvous_server_) {
      try {
        wait_for("unreachable_all_read", kStoreCheckBound);
      } catch (const TimeoutError&) {
      }
    }
    throw NetworkError(line);
  }
  return true;
}

int ElasticMembership::event_fd() {
  if (!rendezvous_) return -1;
  if (auto* etcd = dynamic_cast<rendezvous::EtcdClient*>(client_.get())) {
    if (!etcd_watch_) {
      try {
        etcd_watch_ = etcd->watch(rendezvous_->next_round_key(), keep_alive_interval_);
      } catch (const Error&) {
        return -1;  // no member answers: the next heartbeat says so
      }
    }
    return etcd_watch_->fd();
  }
  if (!watch_) {
    try {
      watch_ = std::make_unique<StoreWatch>(plan_.rdzv_host, plan_.rdzv_port,
                                            rendezvous_->next_round_key(),
                                            static_cast<int>(keep_alive_interval_.count()));
    } catch (const Error&) {
      return -1;  // the store is gone: the next heartbeat says so
    }
  }
  return watch_->fd();
}

bool ElasticMembership::take_event() {
  if (etcd_watch_) return etcd_watch_->fired();
  return watch_ && watch_->fired();
}

RoundStore ElasticMembership::round_store() {
  RoundStore round;
  if (!rendezvous_) return round;
  round.store = client_.get();
  round.prefix = key("network_check/");
  round.address = address_;
  round.node_rank = node_rank_;
  round.num_nodes = num_nodes_;
  round.serves_rendezvous = serves_rendezvous();
  return round;
}

JobEvent ElasticMembership::restart_job(int restart_count) {
  try {
    rendezvous_->open_next_round();
  } catch (const Error&) {
    // The store is gone or broke: the next join says so, with its own line.
  }
  return Membership::restart_job(restart_count);
}

JobEvent ElasticMembership::watch(int restart_count) {
  (void)restart_count;
  JobEvent event;
  if (!changed()) return event;
  event.kind = JobEvent::Kind::kMeetAgain;
  event.why = last_change_;
  return event;
}

bool ElasticMembership::changed() {
  // A rendezvous store that vanished without closing the connection (its host died, or the
  // network between us) answers nothing: these requests are bounded by what is left of the
  // keep-alive window since the last reply, as the others take this node for gone after it.
  const milliseconds window = keep_alive_interval_ * keep_alive_max_attempt_;
  auto* store = dynamic_cast<rendezvous::StoreClient*>(client_.get());
  if (store)
    store->set_timeout(
        std::max(std::chrono::duration_cast<milliseconds>(last_reply_ + window - clock_.now()),
                 keep_alive_interval_));
  std::string why;
  try {
    rendezvous_->heartbeat();
    if (const int waiting = rendezvous_->num_nodes_waiting(); waiting > 0) {
      why = std::to_string(waiting) + " node(s) waiting to join";
    } else if (rendezvous_->superseded()) {
      why = rendezvous_->round_failed() ? "another node's workers failed; meeting again"
                                        : "another node is meeting again";
    } else if (auto silent = rendezvous_->silent_nodes(window); !silent.empty()) {
      why = "node " + std::to_string(silent.front()) + " stopped beating";
      failure_seen_ = true;
    }
  } catch (const TimeoutError&) {
    if (!store) throw;
    throw TimeoutError(
        "the rendezvous store at " + format_endpoint(plan_.rdzv_host, plan_.rdzv_port) +
        " has not answered for the keep-alive window (" + seconds_text(window) + ")");
  }
  if (store) store->set_timeout(read_timeout_);
  last_reply_ = clock_.now();
  if (why.empty() && etcd_watch_ && etcd_watch_->ended()) {
    // The stream ended with nothing to meet about (its member went: a leader change, a restart):
    // watch again on the descriptor the agent polls, rather than wait for keep-alives from now.
    try {
      dynamic_cast<rendezvous::EtcdClient&>(*client_).rewatch(
          *etcd_watch_, rendezvous_->next_round_key(), keep_alive_interval_);
    } catch (const Error&) {
      // No member answers now: the next heartbeat tries again.
    }
  }
  if (!why.empty()) log::info(why);
  last_change_ = why;
  return !why.empty();
}

void ElasticMembership::leave(bool succeeded) {
  if (!succeeded || !client_) return;
  try {
    const bool last = client_->add(key("finished"), 1) == num_nodes_;
    if (last) client_->set(key("all_finished"), "1");
    // The workers' store goes with node 0 and, for c10d, the rendezvous store with its host:
    // those wait for the others. An etcd cluster stays, so there the last node closes the run.
    if (rendezvous_server_ || worker_store_) wait_for("all_finished", plan_.exit_barrier_timeout);
    // The host of the rendezvous store stays until the spares have seen the close (at most 5 s),
    // so that they end with "not needed" rather than with a broken connection.
    if (rendezvous_server_ || last)
      rendezvous_->close_run(rendezvous_server_ ? milliseconds(5000) : milliseconds(0));
  } catch (const InterruptedError&) {
    throw;
  } catch (const Error&) {
    // The job succeeded here; a node that never reports done is its own failure.
  }
}

std::unique_ptr<Membership> make_membership(const LaunchPlan& plan, const std::string& hostname) {
  if (plan.rdzv_backend != "static") return std::make_unique<ElasticMembership>(plan, hostname);
  return std::make_unique<StaticMembership>(plan);
}

}  // namespace acc::launcher
