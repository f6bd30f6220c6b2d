#include "nodes/preflight.h"

#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <thread>

#include "acc/common/error.h"
#include "acc/common/strings.h"
#include "acc/launcher/host/host.h"
#include "acc/rendezvous/clock.h"
#include "acc/rendezvous/tcp_connect.h"
#include "nodes/store_address.h"
#include "output/log.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kSlice{100};        // how often a wait looks at the stop check
constexpr milliseconds kRetryPause{1000};  // between two tries at a target that failed
constexpr milliseconds kTryBound{5000};    // one try's connect, so a retry follows a drop
constexpr milliseconds kMinTryBound{1000};
constexpr milliseconds kDryRunBound{2000};
// A wait this long gets one notice: shorter ones end in their one line soon enough.
constexpr milliseconds kNoticeAfter{5000};

void throw_if_stopped(const StopCheck& stop) {
  if (!stop) return;
  if (const int sig = stop())
    throw InterruptedError(
        sig, std::string("stopped by SIG") + sigabbrev_np(sig) + " during the pre-flight check");
}

// Sleeps until `until`, looking at the stop check every 100 ms.
void pause_until(const rendezvous::Clock& clock, rendezvous::Clock::time_point until,
                 const StopCheck& stop) {
  for (auto now = clock.now(); now < until; now = clock.now()) {
    throw_if_stopped(stop);
    clock.sleep_for(std::min<rendezvous::Clock::duration>(kSlice, until - now));
  }
  throw_if_stopped(stop);
}

// getaddrinfo cannot be interrupted and may wait seconds for DNS: it runs in a thread of its own
// (signals stay blocked there, as in the launcher's thread), and a stop or the bound leaves it.
std::optional<rendezvous::TcpResolution> resolve(const Endpoint& endpoint,
                                                 const rendezvous::Clock& clock,
                                                 rendezvous::Clock::time_point deadline,
                                                 const StopCheck& stop) {
  auto promise = std::make_shared<std::promise<rendezvous::TcpResolution>>();
  std::future<rendezvous::TcpResolution> future = promise->get_future();
  std::thread([promise, host = endpoint.host, port = endpoint.port] {
    promise->set_value(rendezvous::resolve_tcp(host, port));
  }).detach();
  while (future.wait_for(kSlice) != std::future_status::ready) {
    throw_if_stopped(stop);
    if (clock.now() >= deadline) return std::nullopt;
  }
  return future.get();
}

std::string address_text(const sockaddr_storage& address) {
  return numeric_address(reinterpret_cast<const sockaddr&>(address));
}

ReachResult failure(Reach reach, std::string why) {
  return {reach, std::move(why)};
}

ReachResult connect_error(int error) {
  if (error == ECONNREFUSED) return failure(Reach::kRefused, "connection refused");
  if (error == ENETUNREACH || error == EHOSTUNREACH)
    return failure(Reach::kNoRoute, std::string("no route (") + std::strerror(error) + ")");
  if (error == ETIMEDOUT) return failure(Reach::kTimedOut, "timed out");
  return failure(Reach::kOther, std::strerror(error));
}

// One connect, waited for in slices so that a stop is seen.
ReachResult connect_once(const rendezvous::TcpAddress& address, const rendezvous::Clock& clock,
                         rendezvous::Clock::time_point deadline, const StopCheck& stop) {
  const rendezvous::TcpConnection connection = rendezvous::connect_tcp(
      address, deadline, clock, kSlice, [&stop] { throw_if_stopped(stop); });
  if (connection.fd) return {};
  if (connection.timed_out)
    return failure(Reach::kTimedOut,
                   "timed out: nothing answered (a firewall may drop the connection)");
  return connect_error(connection.error);
}

// Whether a loopback name is a mistake: on a multi-node job, for the store another node hosts. An
// etcd member may well run on every node, so its endpoints are left alone.
bool multi_node(const LaunchPlan& plan) {
  return (plan.max_nodes > 1 || plan.nnodes > 1) && plan.rdzv_backend != "etcd-v2";
}

// --preflight_timeout, or an elastic job's join_timeout when that is shorter: the rendezvous would
// give up then anyway.
milliseconds bound_of(const LaunchPlan& plan) {
  milliseconds bound = plan.preflight_timeout;
  if (plan.rdzv_backend == "static") return bound;
  const auto join = plan.rdzv_conf.find("join_timeout");
  if (join != plan.rdzv_conf.end())
    bound = std::min(bound, milliseconds(static_cast<int64_t>(std::stod(join->second) * 1000)));
  return bound;
}

std::string bound_name(const LaunchPlan& plan) {
  return bound_of(plan) < plan.preflight_timeout ? "--rdzv_conf join_timeout"
                                                 : "--preflight_timeout";
}

std::string describe(const PreflightTarget& target) {
  return target.what + " at " + target.endpoint.to_string();
}

}  // namespace

std::vector<PreflightTarget> preflight_targets(const LaunchPlan& plan) {
  if (plan.preflight_timeout.count() == 0) return {};
  if (plan.rdzv_backend == "static") {
    if (plan.nnodes < 2 || plan.node_rank == 0) return {};
    return {{"the master (--master_addr, --master_port)", {plan.master_addr, plan.master_port}}};
  }
  if (plan.rdzv_backend == "etcd-v2") {
    std::vector<PreflightTarget> members;
    for (const std::string& text : plan.etcd_endpoints)
      members.push_back({"the etcd member (--rdzv_endpoint)", parse_endpoint(text, 2379, "etcd")});
    return members;
  }
  if (hosts_rendezvous_store(plan)) return {};
  return {{"the rendezvous endpoint (--rdzv_endpoint)", {plan.rdzv_host, plan.rdzv_port}}};
}

ReachResult try_reach(const Endpoint& endpoint, bool multi_node, milliseconds timeout,
                      const StopCheck& stop, const rendezvous::Clock& clock) {
  const auto deadline = clock.now() + timeout;
  const std::optional<rendezvous::TcpResolution> resolved =
      resolve(endpoint, clock, deadline, stop);
  if (!resolved)
    return failure(Reach::kUnresolved, "the name " + endpoint.host + " did not resolve within " +
                                           decimal_seconds(timeout) + " s (DNS does not answer)");
  if (resolved->status != 0 || resolved->addresses.empty())
    return failure(Reach::kUnresolved,
                   "the name " + endpoint.host + " does not resolve (" + resolved->error() + ")");
  const bool all_loopback = std::all_of(
      resolved->addresses.begin(), resolved->addresses.end(),
      [](const auto& address) { return is_loopback_address(address_text(address.address)); });
  if (multi_node && all_loopback && !names_this_machine(endpoint.host))
    return failure(Reach::kLoopback,
                   "the name " + endpoint.host + " resolves to " +
                       address_text(resolved->addresses.front().address) +
                       " here, a loopback address, on a multi-node job: this node would reach "
                       "itself, not the node that hosts the store (a Debian /etc/hosts maps the "
                       "machine's own name to 127.0.1.1); give an address the other nodes reach");
  ReachResult last;
  for (const rendezvous::TcpAddress& address : resolved->addresses) {
    last = connect_once(address, clock, deadline, stop);
    if (last.reach == Reach::kReached) return last;
  }
  return last;
}

ReachResult try_reach(const Endpoint& endpoint, bool multi_node, milliseconds timeout,
                      const StopCheck& stop) {
  return try_reach(endpoint, multi_node, timeout, stop, rendezvous::Clock::steady());
}

void run_preflight(const LaunchPlan& plan, const StopCheck& stop) {
  run_preflight(plan, stop, rendezvous::Clock::steady());
}

void run_preflight(const LaunchPlan& plan, const StopCheck& stop, const rendezvous::Clock& clock) {
  const std::vector<PreflightTarget> targets = preflight_targets(plan);
  if (targets.empty()) return;
  const auto started = clock.now();
  const milliseconds bound_ms = bound_of(plan);
  const auto deadline = started + bound_ms;
  bool told = false;
  for (;;) {
    const auto try_started = clock.now();
    // At least a second, so that the last try near the bound still tells refused from silence.
    const auto bound = std::chrono::duration_cast<milliseconds>(
        std::clamp<rendezvous::Clock::duration>(deadline - try_started, kMinTryBound, kTryBound));
    ReachResult last;
    const PreflightTarget* failed = nullptr;
    for (const PreflightTarget& target : targets) {
      last = try_reach(target.endpoint, multi_node(plan), bound, stop, clock);
      if (last.reach == Reach::kReached) {
        log::debug("pre-flight: reached {}", describe(target));
        return;
      }
      if (last.reach == Reach::kLoopback)
        throw ConfigError("pre-flight: cannot use " + describe(target) + ": " + last.why);
      failed = &target;
    }
    const auto now = clock.now();
    if (now >= deadline)
      throw NetworkError("pre-flight: cannot reach " + describe(*failed) + ": " + last.why +
                         " (tried for " + decimal_seconds(bound_ms) + " s, " + bound_name(plan) +
                         ")");
    if (!told && now - started >= kNoticeAfter) {
      log::info("pre-flight: cannot reach {} yet: {}; trying again for up to {} s ({})",
                describe(*failed), last.why, decimal_seconds(bound_ms), bound_name(plan));
      told = true;
    }
    pause_until(clock, std::min<rendezvous::Clock::time_point>(deadline, try_started + kRetryPause),
                stop);
  }
}

bool dry_run_preflight(const LaunchPlan& plan) {
  bool ok = true;
  for (const PreflightTarget& target : preflight_targets(plan)) {
    const ReachResult result = try_reach(target.endpoint, multi_node(plan), kDryRunBound, {});
    if (result.reach == Reach::kReached) {
      log::info("pre-flight: {} answers", describe(target));
    } else if (result.reach == Reach::kRefused) {
      log::warn("pre-flight: " + describe(target) + ": " + result.why +
                " (nothing listens there yet; the launch retries it for up to " +
                decimal_seconds(bound_of(plan)) + " s)");
    } else {
      log::error("pre-flight: cannot reach " + describe(target) + ": " + result.why);
      ok = false;
    }
  }
  return ok;
}

}  // namespace acc::launcher
