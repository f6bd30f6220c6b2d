#include "acc/rendezvous/elastic_rendezvous.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "acc/common/error.h"

namespace acc::rendezvous {
using std::chrono::milliseconds;

// How often a spare looks whether the previous participants have come back or are gone.
constexpr milliseconds kSpareLook{250};

ElasticRendezvous::ElasticRendezvous(KeyValueStore& store, RendezvousOptions options,
                                     std::string node_id, const Clock& clock)
    : store_(store), clock_(clock), options_(std::move(options)), node_id_(std::move(node_id)) {
  ACC_CHECK(options_.min_nodes >= 1, ConfigError, "rendezvous min_nodes is ", options_.min_nodes,
            "; it must be at least 1");
  ACC_CHECK(options_.max_nodes >= options_.min_nodes, ConfigError, "rendezvous max_nodes (",
            options_.max_nodes, ") is below min_nodes (", options_.min_nodes,
            "); use --nnodes MIN:MAX with MIN <= MAX");
}

milliseconds ElasticRendezvous::remaining(Clock::time_point deadline) const {
  return std::max(milliseconds(1), std::chrono::ceil<milliseconds>(deadline - clock_.now()));
}

std::string ElasticRendezvous::run_key(std::string_view name) const {
  return "rdzv/" + options_.run_id + "/" + std::string(name);
}

std::string ElasticRendezvous::key(std::string_view name) const {
  ACC_ASSERT(generation_.has_value());
  return run_key(std::to_string(*generation_) + "/" + std::string(name));
}

std::string ElasticRendezvous::round_key(std::int64_t round, std::string_view name) const {
  return key(std::to_string(round) + "/" + std::string(name));
}

bool ElasticRendezvous::resolve_generation() {
  if (generation_) return false;
  // Created at 0 on first use. A closed generation is a finished run: this node, which never
  // took part in it, starts the next one; of several doing so, the first moves the counter.
  std::int64_t generation = std::stoll(store_.compare_set(run_key("generation"), "", "0"));
  const bool closed = store_.check({run_key(std::to_string(generation) + "/run_closed")});
  if (closed)
    generation = std::stoll(store_.compare_set(run_key("generation"), std::to_string(generation),
                                               std::to_string(generation + 1)));
  generation_ = generation;
  return !closed;
}

std::int64_t ElasticRendezvous::current_round() {
  // Creates the counter at 0 on first use; otherwise returns it unchanged. One operation.
  return std::stoll(store_.compare_set(key("round"), "", "0"));
}

void ElasticRendezvous::check_open() {
  if (store_.check({key("run_closed")})) throw_closed(false);
}

void ElasticRendezvous::throw_closed(bool was_spare) {
  throw RendezvousClosedError(
      acc::detail::concat("rendezvous '", options_.run_id, "' is closed: the job has finished"),
      was_spare);
}

void ElasticRendezvous::wait_until(const std::vector<std::string>& keys,
                                   Clock::time_point deadline) {
  // Without a stop check a wait needs no slices; a day stands for "no deadline" in one.
  const milliseconds slice = stop_check_ ? milliseconds(100) : milliseconds(86'400'000);
  for (;;) {
    if (stop_check_) stop_check_();
    const milliseconds left =
        deadline == Clock::time_point::max() ? slice : std::min(slice, remaining(deadline));
    try {
      store_.wait(keys, left);
      return;
    } catch (const TimeoutError&) {
      if (deadline != Clock::time_point::max() && clock_.now() >= deadline) throw;
    }
  }
}

RendezvousInfo ElasticRendezvous::next_rendezvous(bool failed) {
  // A first call has just checked its generation open: not again (a request per node per join).
  const bool checked_open = resolve_generation();
  // Before anything that could open the next round: the node that opens it must have said that
  // its round failed, so that whoever counts the next round's restarts sees it.
  if (failed && last_) store_.set(round_key(last_->round, "failed"), "1");
  if (!checked_open) check_open();
  auto deadline = clock_.now() + options_.join_timeout;
  std::int64_t round = current_round();
  if (last_ && last_->round >= round) {
    // This node took part in the current round: open the next one. Of all the participants
    // doing this, the first moves the counter; the others read it moved.
    round = std::stoll(
        store_.compare_set(key("round"), std::to_string(round), std::to_string(round + 1)));
    store_.set(round_key(round - 1, "next"), "open");
  }
  bool spare = false;  // this node waited as a spare of the round before `round`
  for (;;) {
    if (spare && spare_left_out(round)) {
      // The previous participants filled the round again: still a spare.
      wait_as_spare(round);
      ++round;
      continue;
    }
    spare = false;
    // The arrival slot (ADD's order) decides who takes part; the rank is the node id's place
    // among the participants', so the same nodes get the same ranks however they raced.
    int slot = static_cast<int>(store_.add(round_key(round, "joined"), 1) - 1);
    store_.set(round_key(round, "slot/" + std::to_string(slot)), slot_value());
    if (slot + 1 == options_.max_nodes) close_round(round, options_.max_nodes);
    int num_nodes = await_close(round, slot, deadline);
    if (slot < num_nodes) {
      int restart_count = 0;
      const int rank = assign_rank(round, slot, num_nodes, deadline, restart_count);
      if (options_.claim == RendezvousOptions::Claim::kAsked && rank != options_.wanted_rank &&
          options_.log)
        options_.log(acc::detail::concat(
            "node rank ", options_.wanted_rank, " (--node_rank) is not this node's in round ",
            round, " of ", num_nodes, " node(s): ",
            options_.wanted_rank >= num_nodes ? "the round has no such rank"
                                              : "another node asked for it too",
            "; this node is node ", rank));
      store_.multi_set({round_key(round, "node/" + std::to_string(rank)),
                        round_key(round, "heartbeat/" + std::to_string(rank))},
                       {node_id_, "0"});
      last_ = RendezvousInfo{round, rank, num_nodes, restart_count};
      heartbeats_seen_.clear();
      return *last_;
    }
    if (num_nodes >= options_.max_nodes) {
      // A full round: wait as a spare, without a deadline, and without disturbing it.
      wait_as_spare(round);
      spare = true;
      ++round;
      continue;
    }
    // Too late for a round with room: the participants see this node waiting and meet again.
    try {
      wait_until({round_key(round, "next")}, deadline);
    } catch (const TimeoutError&) {
      throw TimeoutError(acc::detail::concat("rendezvous '", options_.run_id, "': round ", round,
                                             " closed before this node joined and no next round "
                                             "opened within ",
                                             options_.join_timeout.count(), " ms"));
    }
    if (store_.get(round_key(round, "next")) == "closed") throw_closed(true);
    ++round;
  }
}

bool ElasticRendezvous::spare_left_out(std::int64_t round) {
  // The previous participants meet again at their next keep-alive: let them take their places
  // first, and take one only if the round is still open after spare_delay, or once the ones
  // that have not come back are known gone.
  const std::string closed = round_key(round, "closed");
  const Clock::time_point delay_end = clock_.now() + options_.spare_delay;
  while (!previous_participants_back_or_gone(round)) {
    try {
      wait_until({closed}, std::min(delay_end, clock_.now() + kSpareLook));
      return std::stoll(store_.get(closed)) >= options_.max_nodes;
    } catch (const TimeoutError&) {
    }
    if (clock_.now() >= delay_end) break;
  }
  check_open();
  return false;
}

void ElasticRendezvous::wait_as_spare(std::int64_t round) {
  const std::string next = round_key(round, "next");
  if (options_.log && !store_.check({next}))
    options_.log(acc::detail::concat("rendezvous round ", round, " is full (", options_.max_nodes,
                                     " nodes): this node waits as a spare"));
  // Counted while waiting, so that close_run() can wait until the spares have seen the close.
  store_.add(key("spares"), 1);
  try {
    await_next_or_silence(round);
  } catch (...) {
    try {
      store_.add(key("spares"), -1);
    } catch (const Error&) {
    }
    throw;
  }
  const bool closed = store_.get(next) == "closed";
  store_.add(key("spares"), -1);
  if (closed) throw_closed(true);
}

void ElasticRendezvous::await_next_or_silence(std::int64_t round) {
  const std::string next = round_key(round, "next");
  const int num_nodes = std::stoi(store_.get(round_key(round, "closed")));
  std::vector<std::string> seen;
  auto since = clock_.now();
  for (;;) {
    try {
      wait_until({next}, clock_.now() + options_.keep_alive_timeout / 3);
      return;
    } catch (const TimeoutError&) {
    }
    // A participant that dies is noticed by the others, which meet again; a round whose every
    // participant died has nobody left to do so, and this spare must, or it would wait forever.
    std::vector<std::string> beats = heartbeats(round, num_nodes);
    if (beats != seen) {
      seen = std::move(beats);
      since = clock_.now();
      continue;
    }
    if (clock_.now() - since < options_.keep_alive_timeout) continue;
    if (options_.log)
      options_.log(acc::detail::concat("every node of rendezvous round ", round,
                                       " went silent: this spare opens round ", round + 1));
    store_.set(round_key(round, "failed"), "1");
    store_.compare_set(key("round"), std::to_string(round), std::to_string(round + 1));
    store_.set(next, "open");
    return;
  }
}

std::vector<std::string> ElasticRendezvous::heartbeats(std::int64_t round, int num_nodes) {
  // A node that died between being counted and writing its keys has none: read it as silent
  // (its value stays empty) instead of waiting for it.
  return values_where_set(store_, numbered_keys(round, "heartbeat/", num_nodes));
}

std::vector<std::string> ElasticRendezvous::numbered_keys(std::int64_t round,
                                                          std::string_view prefix,
                                                          int count) const {
  std::vector<std::string> keys;
  for (int i = 0; i < count; ++i)
    keys.push_back(round_key(round, std::string(prefix) + std::to_string(i)));
  return keys;
}

int ElasticRendezvous::await_close(std::int64_t round, int slot, Clock::time_point deadline) {
  std::vector<std::string> closed = {round_key(round, "closed")};
  if (slot + 1 >= options_.min_nodes) {
    // Enough nodes: last call. Whoever's last call ends first closes the round with the count
    // joined by then; ADD's order makes that count agree with the slots that take part.
    try {
      wait_until(closed, std::min(clock_.now() + options_.last_call_timeout, deadline));
    } catch (const TimeoutError&) {
      auto joined = store_.add(round_key(round, "joined"), 0);
      close_round(round, static_cast<int>(std::min<std::int64_t>(joined, options_.max_nodes)));
    }
  } else {
    try {
      wait_until(closed, deadline);
    } catch (const TimeoutError&) {
      auto joined = store_.add(round_key(round, "joined"), 0);
      throw TimeoutError(acc::detail::concat(
          "rendezvous '", options_.run_id, "': round ", round, " has ", joined, " of the ",
          options_.min_nodes, " nodes it needs after ", options_.join_timeout.count(),
          " ms; start the missing nodes or lower the minimum"));
    }
  }
  return std::stoi(store_.get(closed[0]));
}

int ElasticRendezvous::restarts_before(std::int64_t round) {
  if (round == 0) return 0;
  // The previous round closed (its participants opened this one), and its first arrival wrote
  // its count before any of them learnt a rank; check() all the same, never a wait.
  const std::string count = round_key(round - 1, "restarts");
  const int before = store_.check({count}) ? std::stoi(store_.get(count)) : 0;
  return before + (store_.check({round_key(round - 1, "failed")}) ? 1 : 0);
}

namespace {

// A slot's value: the node id, after "want <claim> <rank> " where the node asks for a rank.
struct Participant {
  int slot = 0;
  int claim = 0;  // RendezvousOptions::Claim as a number: the higher claim wins a rank
  int want = -1;
  std::string id;
};

Participant participant(int slot, const std::string& value) {
  Participant p{slot, 0, -1, value};
  int consumed = 0;
  if (value.starts_with("want ") &&
      std::sscanf(value.c_str(), "want %d %d %n", &p.claim, &p.want, &consumed) == 2 &&
      consumed > 0)
    p.id = value.substr(static_cast<std::size_t>(consumed));
  return p;
}

}  // namespace

std::string ElasticRendezvous::slot_value() const {
  if (options_.claim == RendezvousOptions::Claim::kNone || options_.wanted_rank < 0)
    return node_id_;
  return "want " + std::to_string(static_cast<int>(options_.claim)) + " " +
         std::to_string(options_.wanted_rank) + " " + node_id_;
}

std::vector<int> ElasticRendezvous::ranks_in_order(const std::vector<std::string>& values) {
  const int n = static_cast<int>(values.size());
  std::vector<Participant> all;
  for (int slot = 0; slot < n; ++slot)
    all.push_back(participant(slot, values[static_cast<std::size_t>(slot)]));
  std::stable_sort(all.begin(), all.end(),
                   [](const Participant& a, const Participant& b) { return a.id < b.id; });
  // order[rank] = slot: first the ranks asked for, the higher claim first (then id order); then
  // the rest in id order, into the ranks left.
  std::vector<int> order(static_cast<std::size_t>(n), -1);
  std::vector<bool> placed(static_cast<std::size_t>(n), false);
  for (int claim = static_cast<int>(RendezvousOptions::Claim::kAsked); claim > 0; --claim)
    for (std::size_t i = 0; i < all.size(); ++i) {
      const Participant& p = all[i];
      if (p.claim != claim || p.want < 0 || p.want >= n) continue;
      if (order[static_cast<std::size_t>(p.want)] != -1) continue;
      order[static_cast<std::size_t>(p.want)] = p.slot;
      placed[i] = true;
    }
  std::size_t rank = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (placed[i]) continue;
    while (order[rank] != -1) ++rank;
    order[rank] = all[i].slot;
  }
  return order;
}

int ElasticRendezvous::assign_rank(std::int64_t round, int slot, int num_nodes,
                                   Clock::time_point deadline, int& restart_count) {
  const std::string mine = round_key(round, "rank/" + std::to_string(slot));
  const std::string restarts = round_key(round, "restarts");
  if (slot == 0) {
    // The first arrival sorts the participants' ids and publishes each slot's rank and the
    // round's restart count: O(n) work for this one node, one read and one write; every other
    // node reads its own rank only.
    std::vector<std::string> slot_keys;
    for (int i = 0; i < num_nodes; ++i)
      slot_keys.push_back(round_key(round, "slot/" + std::to_string(i)));
    const std::vector<std::string> ids = store_.multi_get(slot_keys);
    const std::vector<int> order = ranks_in_order(ids);
    restart_count = restarts_before(round);
    std::vector<std::string> keys = {restarts}, values = {std::to_string(restart_count)};
    int own = 0;
    for (int rank = 0; rank < num_nodes; ++rank) {
      const int of = order[static_cast<std::size_t>(rank)];
      keys.push_back(round_key(round, "rank/" + std::to_string(of)));
      values.push_back(std::to_string(rank));
      if (of == slot) own = rank;
    }
    store_.multi_set(keys, values);
    return own;
  }
  try {
    wait_until({mine}, deadline);
  } catch (const TimeoutError&) {
    throw TimeoutError(acc::detail::concat(
        "rendezvous '", options_.run_id, "': round ", round, " closed with ", num_nodes,
        " nodes but their ranks were not published within ", options_.join_timeout.count(),
        " ms (the node that sorts them, the round's first "
        "arrival, stopped?)"));
  }
  const std::vector<std::string> got = store_.multi_get({mine, restarts});
  restart_count = std::stoi(got[1]);
  return std::stoi(got[0]);
}

void ElasticRendezvous::close_round(std::int64_t round, int num_nodes) {
  // compare_set from empty: only the first close counts, a later one reads the first's count.
  store_.compare_set(round_key(round, "closed"), "", std::to_string(num_nodes));
}

bool ElasticRendezvous::superseded() {
  ACC_CHECK(last_.has_value(), StoreError, "superseded() before next_rendezvous()");
  return current_round() > last_->round;
}

bool ElasticRendezvous::round_failed() {
  ACC_CHECK(last_.has_value(), StoreError, "round_failed() before next_rendezvous()");
  return store_.check({round_key(last_->round, "failed")});
}

std::string ElasticRendezvous::next_round_key() const {
  ACC_CHECK(last_.has_value(), StoreError, "next_round_key() before next_rendezvous()");
  return round_key(last_->round, "next");
}

void ElasticRendezvous::open_next_round() {
  ACC_CHECK(last_.has_value(), StoreError, "open_next_round() before next_rendezvous()");
  // The failure first, as next_rendezvous() says it: whoever counts the next round's restarts
  // must see it.
  store_.set(round_key(last_->round, "failed"), "1");
  const std::int64_t round = current_round();
  if (round > last_->round) return;  // opened already, by another participant
  store_.compare_set(key("round"), std::to_string(round), std::to_string(round + 1));
  store_.set(round_key(round, "next"), "open");
}

int ElasticRendezvous::num_nodes_waiting() {
  std::int64_t round = current_round();
  std::string closed = round_key(round, "closed");
  if (!store_.check({closed})) return 0;
  const std::int64_t taking_part = std::stoll(store_.get(closed));
  // A full round's late arrivals are spares: meeting again would only leave them out again.
  if (taking_part >= options_.max_nodes) return 0;
  auto joined = store_.add(round_key(round, "joined"), 0);
  return static_cast<int>(std::max<std::int64_t>(0, joined - taking_part));
}

void ElasticRendezvous::heartbeat() {
  ACC_CHECK(last_.has_value(), StoreError, "heartbeat() before next_rendezvous()");
  store_.add(round_key(last_->round, "heartbeat/" + std::to_string(last_->node_rank)), 1);
}

std::vector<int> ElasticRendezvous::silent_nodes(milliseconds timeout) {
  ACC_CHECK(last_.has_value(), StoreError, "silent_nodes() before next_rendezvous()");
  const std::vector<std::string> values = heartbeats(last_->round, last_->num_nodes);
  auto now = clock_.now();
  std::vector<int> silent;
  for (int rank = 0; rank < last_->num_nodes; ++rank) {
    auto [it, first_time] = heartbeats_seen_.try_emplace(rank, Seen{values[rank], now});
    if (!first_time && it->second.value != values[rank]) it->second = Seen{values[rank], now};
    if (now - it->second.since >= timeout) silent.push_back(rank);
  }
  return silent;
}

void ElasticRendezvous::close_run(milliseconds linger) {
  resolve_generation();
  store_.set(key("run_closed"), "1");
  // Wake nodes waiting for a next round, so they see the run closed.
  store_.set(round_key(current_round(), "next"), "closed");
  const auto deadline = clock_.now() + linger;
  while (clock_.now() < deadline && store_.add(key("spares"), 0) > 0)
    clock_.sleep_until(std::min(deadline, clock_.now() + milliseconds(20)));
}

bool ElasticRendezvous::previous_participants_back_or_gone(std::int64_t round) {
  if (!options_.gone || round == 0) return false;
  const std::vector<std::string> previous = values_where_set(
      store_,
      numbered_keys(round - 1, "node/", std::stoi(store_.get(round_key(round - 1, "closed")))));
  const int joined = static_cast<int>(store_.add(round_key(round, "joined"), 0));
  std::vector<std::string> back;
  for (const std::string& value : values_where_set(store_, numbered_keys(round, "slot/", joined)))
    back.push_back(participant(0, value).id);
  for (const std::string& id : previous)
    if (id.empty() || (std::find(back.begin(), back.end(), id) == back.end() && !options_.gone(id)))
      return false;
  return true;
}

}  // namespace acc::rendezvous
