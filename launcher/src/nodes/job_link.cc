#include "nodes/job_link.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "acc/common/exit_code.h"
#include "acc/common/store_keys.h"
#include "nodes/store_json.h"

namespace acc::launcher {
namespace {

constexpr StoreFormat kJobEndFormat{"acc-job-end", 1};

std::optional<int> parse_number(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

std::string seconds_text(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

// The fields under their own names; the format's tag is store_json.h's.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JobEnd, node, host, rank, local_rank, pid, exit_code, signal,
                                   status, reason)

std::string format_job_end(const JobEnd& end) {
  return to_store_json(end, kJobEndFormat);
}

JobEnd parse_job_end(std::string_view text) {
  if (std::optional<JobEnd> end = from_store_json<JobEnd>(text, kJobEndFormat)) return *end;
  JobEnd other;
  other.reason = std::string(text);
  return other;
}

std::string describe_job_end(const JobEnd& end) {
  std::string line = "node " + std::to_string(end.node);
  if (!end.host.empty()) line += " (host " + end.host + ")";
  return line + " ended the job: " + end.reason;
}

JobLink::JobLink(rendezvous::KeyValueStore& store, const rendezvous::Clock& clock, Options options)
    : store_(store), clock_(clock), options_(options) {}

void JobLink::join() {
  if (options_.node_rank == 0) store_.compare_set(store_keys::job_restart(), "", "0");
  beat();
}

void JobLink::beat() {
  store_.add(store_keys::node_alive(options_.node_rank), 1);
}

JobEvent JobLink::tick(int restart_count) {
  beat();
  JobEvent event;
  if (auto end = ended()) {
    event.kind = JobEvent::Kind::kEnded;
    event.end = std::move(*end);
    event.shared = true;
    return event;
  }
  if (store_.check({store_keys::job_restart()})) {
    const auto now = parse_number(store_.get(store_keys::job_restart()));
    if (now && *now > restart_count) {
      event.kind = JobEvent::Kind::kRestart;
      event.restart_count = *now;
      event.why = "another node's workers failed";
      return event;
    }
  }
  if (const std::vector<int> silent = silent_nodes(); !silent.empty()) {
    JobEnd lost;
    lost.node = silent.front();
    lost.status = kExitNodeLost;
    lost.reason = "its launcher stopped beating for " + seconds_text(options_.keep_alive_window) +
                  " (seen by node " + std::to_string(options_.node_rank) + ")";
    event.kind = JobEvent::Kind::kEnded;
    event.end = end(lost);
    event.shared = true;
  }
  return event;
}

// Node 0 watches every other node; the others watch node 0. A node not yet registered is not
// watched: it may still be starting.
std::vector<int> JobLink::silent_nodes() {
  std::vector<int> nodes;
  if (options_.node_rank == 0) {
    for (int n = 1; n < options_.nnodes; ++n) nodes.push_back(n);
  } else {
    nodes.push_back(0);
  }
  std::vector<std::string> keys;
  for (int n : nodes) keys.push_back(store_keys::node_alive(n));
  const std::vector<std::string> values = rendezvous::values_where_set(store_, keys);
  const auto now = clock_.now();
  std::vector<int> silent;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (values[i].empty()) continue;
    auto [it, first] = beats_seen_.try_emplace(nodes[i], Seen{values[i], now});
    if (!first && it->second.value != values[i]) it->second = Seen{values[i], now};
    if (now - it->second.since >= options_.keep_alive_window) silent.push_back(nodes[i]);
  }
  return silent;
}

std::optional<JobEnd> JobLink::ended() {
  if (!store_.check({store_keys::job_end()})) return std::nullopt;
  return parse_job_end(store_.get(store_keys::job_end()));
}

JobEnd JobLink::end(const JobEnd& end) {
  JobEnd first = parse_job_end(store_.compare_set(store_keys::job_end(), "", format_job_end(end)));
  // After the end itself, so that a node woken by these keys reads it.
  store_.multi_set({store_keys::attempt_ready(attempt_), store_keys::attempt_over(attempt_)},
                   {"end", "end"});
  return first;
}

int JobLink::restart(int restart_count, bool counted) {
  if (!counted) store_.add(store_keys::restarts_not_counted(), 1);
  const std::string now = store_.compare_set(
      store_keys::job_restart(), std::to_string(restart_count), std::to_string(restart_count + 1));
  store_.set(store_keys::attempt_over(restart_count), "restart");
  return parse_number(now).value_or(restart_count + 1);
}

int JobLink::restarts_not_counted() {
  return static_cast<int>(store_.add(store_keys::restarts_not_counted(), 0));
}

void JobLink::arrive(const std::string& barrier, int delta, const std::string& wake) {
  if (store_.add(barrier, delta) >= options_.nnodes && !wake.empty()) store_.set(wake, "1");
}

bool JobLink::all_arrived(const std::string& barrier) {
  return store_.add(barrier, 0) >= options_.nnodes;
}

void JobLink::let_go() {
  store_.set(store_keys::node_let_go(options_.node_rank), "1");
}

bool JobLink::others_let_go() {
  const std::vector<int> silent = silent_nodes();
  std::vector<std::string> keys;
  for (int n = 1; n < options_.nnodes; ++n)
    if (beats_seen_.count(n) && std::find(silent.begin(), silent.end(), n) == silent.end())
      keys.push_back(store_keys::node_let_go(n));
  return keys.empty() || store_.check(keys);
}

}  // namespace acc::launcher
