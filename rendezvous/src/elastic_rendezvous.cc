#include "acc/rendezvous/elastic_rendezvous.h"

#include <algorithm>
#include <string>
#include <vector>

#include "acc/common/error.h"

namespace acc::rendezvous {
using std::chrono::milliseconds;

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

std::string ElasticRendezvous::key(std::string_view name) const {
  return "rdzv/" + options_.run_id + "/" + std::string(name);
}

std::string ElasticRendezvous::round_key(std::int64_t round, std::string_view name) const {
  return key(std::to_string(round) + "/" + std::string(name));
}

std::int64_t ElasticRendezvous::current_round() {
  // Creates the counter at 0 on first use; otherwise returns it unchanged. One operation.
  return std::stoll(store_.compare_set(key("round"), "", "0"));
}

void ElasticRendezvous::check_open() {
  ACC_CHECK(!store_.check({key("run_closed")}), StoreError, "rendezvous '", options_.run_id,
            "' is closed: the job has finished");
}

RendezvousInfo ElasticRendezvous::next_rendezvous() {
  check_open();
  auto deadline = clock_.now() + options_.join_timeout;
  std::int64_t round = current_round();
  if (last_ && last_->round >= round) {
    // This node took part in the current round: open the next one. Of all the participants
    // doing this, the first moves the counter; the others read it moved.
    round = std::stoll(
        store_.compare_set(key("round"), std::to_string(round), std::to_string(round + 1)));
    store_.set(round_key(round - 1, "next"), "open");
  }
  for (;;) {
    // The arrival slot (ADD's order) decides who takes part; the rank is the node id's place
    // among the participants', so the same nodes get the same ranks however they raced.
    int slot = static_cast<int>(store_.add(round_key(round, "joined"), 1) - 1);
    store_.set(round_key(round, "slot/" + std::to_string(slot)), node_id_);
    if (slot + 1 == options_.max_nodes) close_round(round, options_.max_nodes);
    int num_nodes = await_close(round, slot, deadline);
    if (slot < num_nodes) {
      const int rank = assign_rank(round, slot, num_nodes, deadline);
      store_.multi_set({round_key(round, "node/" + std::to_string(rank)),
                        round_key(round, "heartbeat/" + std::to_string(rank))},
                       {node_id_, "0"});
      last_ = RendezvousInfo{round, rank, num_nodes};
      heartbeats_seen_.clear();
      return *last_;
    }
    // Too late for this round: wait until a participant opens the next one.
    try {
      store_.wait({round_key(round, "next")}, remaining(deadline));
    } catch (const TimeoutError&) {
      throw TimeoutError(detail::concat("rendezvous '", options_.run_id, "': round ", round,
                                        " closed before this node joined and no next round "
                                        "opened within ",
                                        options_.join_timeout.count(), " ms"));
    }
    check_open();
    ++round;
  }
}

int ElasticRendezvous::await_close(std::int64_t round, int slot, Clock::time_point deadline) {
  std::vector<std::string> closed = {round_key(round, "closed")};
  if (slot + 1 >= options_.min_nodes) {
    // Enough nodes: last call. Whoever's last call ends first closes the round with the count
    // joined by then; ADD's order makes that count agree with the slots that take part.
    try {
      store_.wait(closed, std::min(options_.last_call_timeout, remaining(deadline)));
    } catch (const TimeoutError&) {
      auto joined = store_.add(round_key(round, "joined"), 0);
      close_round(round, static_cast<int>(std::min<std::int64_t>(joined, options_.max_nodes)));
    }
  } else {
    try {
      store_.wait(closed, remaining(deadline));
    } catch (const TimeoutError&) {
      auto joined = store_.add(round_key(round, "joined"), 0);
      throw TimeoutError(detail::concat("rendezvous '", options_.run_id, "': round ", round,
                                        " has ", joined, " of the ", options_.min_nodes,
                                        " nodes it needs after ", options_.join_timeout.count(),
                                        " ms; start the missing nodes or lower the minimum"));
    }
  }
  return std::stoi(store_.get(closed[0]));
}

int ElasticRendezvous::assign_rank(std::int64_t round, int slot, int num_nodes,
                                   Clock::time_point deadline) {
  const std::string mine = round_key(round, "rank/" + std::to_string(slot));
  if (slot == 0) {
    // The first arrival sorts the participants' ids and publishes each slot's rank: O(n) work
    // for this one node, one read and one write; every other node reads its own rank only.
    std::vector<std::string> slot_keys;
    for (int i = 0; i < num_nodes; ++i)
      slot_keys.push_back(round_key(round, "slot/" + std::to_string(i)));
    const std::vector<std::string> ids = store_.multi_get(slot_keys);
    std::vector<int> order(static_cast<std::size_t>(num_nodes));
    for (int i = 0; i < num_nodes; ++i) order[static_cast<std::size_t>(i)] = i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return ids[static_cast<std::size_t>(a)] < ids[static_cast<std::size_t>(b)];
    });
    std::vector<std::string> rank_keys, ranks;
    int own = 0;
    for (int rank = 0; rank < num_nodes; ++rank) {
      const int of = order[static_cast<std::size_t>(rank)];
      rank_keys.push_back(round_key(round, "rank/" + std::to_string(of)));
      ranks.push_back(std::to_string(rank));
      if (of == slot) own = rank;
    }
    store_.multi_set(rank_keys, ranks);
    return own;
  }
  try {
    store_.wait({mine}, remaining(deadline));
  } catch (const TimeoutError&) {
    throw TimeoutError(detail::concat(
        "rendezvous '", options_.run_id, "': round ", round, " closed with ", num_nodes,
        " nodes but their ranks were not published within ", options_.join_timeout.count(),
        " ms (the node that sorts them, the round's first "
        "arrival, stopped?)"));
  }
  return std::stoi(store_.get(mine));
}

void ElasticRendezvous::close_round(std::int64_t round, int num_nodes) {
  // compare_set from empty: only the first close counts, a later one reads the first's count.
  store_.compare_set(round_key(round, "closed"), "", std::to_string(num_nodes));
}

bool ElasticRendezvous::superseded() {
  ACC_CHECK(last_.has_value(), StoreError, "superseded() before next_rendezvous()");
  return current_round() > last_->round;
}

int ElasticRendezvous::num_nodes_waiting() {
  std::int64_t round = current_round();
  std::string closed = round_key(round, "closed");
  if (!store_.check({closed})) return 0;
  auto joined = store_.add(round_key(round, "joined"), 0);
  return static_cast<int>(std::max<std::int64_t>(0, joined - std::stoll(store_.get(closed))));
}

void ElasticRendezvous::heartbeat() {
  ACC_CHECK(last_.has_value(), StoreError, "heartbeat() before next_rendezvous()");
  store_.add(round_key(last_->round, "heartbeat/" + std::to_string(last_->node_rank)), 1);
}

std::vector<int> ElasticRendezvous::silent_nodes(milliseconds timeout) {
  ACC_CHECK(last_.has_value(), StoreError, "silent_nodes() before next_rendezvous()");
  std::vector<std::string> keys;
  for (int rank = 0; rank < last_->num_nodes; ++rank) {
    keys.push_back(round_key(last_->round, "heartbeat/" + std::to_string(rank)));
  }
  // A node that died between being counted and writing its keys has none: read it as silent
  // (its value stays empty) instead of waiting for it.
  std::vector<std::string> values(keys.size());
  if (store_.check(keys)) {
    values = store_.multi_get(keys);
  } else {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (store_.check({keys[i]})) values[i] = store_.get(keys[i]);
    }
  }
  auto now = clock_.now();
  std::vector<int> silent;
  for (int rank = 0; rank < last_->num_nodes; ++rank) {
    auto [it, first_time] = heartbeats_seen_.try_emplace(rank, Seen{values[rank], now});
    if (!first_time && it->second.value != values[rank]) it->second = Seen{values[rank], now};
    if (now - it->second.since >= timeout) silent.push_back(rank);
  }
  return silent;
}

void ElasticRendezvous::close_run() {
  store_.set(key("run_closed"), "1");
  // Wake nodes waiting for a next round, so they see the run closed.
  store_.set(round_key(current_round(), "next"), "closed");
}

}  // namespace acc::rendezvous
