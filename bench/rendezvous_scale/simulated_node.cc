#include "simulated_node.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "acc/rendezvous/protocol.h"

namespace acc::bench {
namespace {

using rendezvous::Op;
using rendezvous::Request;

// The reply due in a step: a byte, a u32, an i64, or `values` values.
struct Reply {
  std::size_t fixed = 0;  // bytes of a fixed-size reply; 0 for values
  std::size_t values = 0;
};

Reply reply_of(SimulatedNode::Step step, int nodes) {
  using Step = SimulatedNode::Step;
  switch (step) {
    case Step::kHandshake:
      return {4, 0};
    case Step::kJoin:
      return {8, 0};
    case Step::kCheckResolved:
    case Step::kAwaitClose:
    case Step::kGetClosedWait:
    case Step::kSlotsWait:
    case Step::kRankWait:
    case Step::kRankGetWait:
      return {1, 0};
    case Step::kGeneration:
    case Step::kRound:
    case Step::kCloseRound:
    case Step::kGetClosed:
      return {0, 1};
    case Step::kSlots:
      return {0, static_cast<std::size_t>(nodes)};
    case Step::kRankGet:
      return {0, 2};
    default:
      return {0, 0};
  }
}

// The values of a MULTI_GET or COMPARE_SET reply at the front of `in`, if all there: the bytes
// they take, else 0.
std::size_t take_values(std::string_view in, std::size_t count, std::vector<std::string>& out) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (in.size() < at + 8) return 0;
    const std::uint64_t size = rendezvous::load_u64(in.substr(at, 8));
    if (in.size() - at - 8 < size) return 0;
    at += 8 + size;
  }
  out.reserve(count);
  for (std::size_t i = 0, p = 0; i < count; ++i) {
    const std::uint64_t size = rendezvous::load_u64(in.substr(p, 8));
    out.emplace_back(in.substr(p + 8, size));
    p += 8 + size;
  }
  return at;
}

}  // namespace

std::string simulated_node_id(int index) {
  return "10.0." + std::to_string(index / 250) + "." + std::to_string(index % 250) + ":" +
         std::to_string(1000 + index);
}

const char* SimulatedNode::step_name(Step step) {
  static const char* const kNames[kSteps] = {"in the handshake",
                                             "connected, not begun",
                                             "in COMPARE_SET generation",
                                             "in CHECK run_closed",
                                             "in COMPARE_SET round",
                                             "in ADD joined",
                                             "in COMPARE_SET closed",
                                             "in WAIT closed",
                                             "in get(closed)'s WAIT",
                                             "in get(closed)",
                                             "in WAIT slot/* (slot 0)",
                                             "in MULTI_GET slot/*",
                                             "in WAIT rank/<slot>",
                                             "in WAIT rank, restarts",
                                             "in MULTI_GET rank, restarts",
                                             "placed",
                                             "failed"};
  return kNames[static_cast<int>(step)];
}

void SimulatedNode::start_handshake(std::uint32_t nonce, std::string& out) {
  nonce_ = nonce;
  step_ = Step::kHandshake;
  rendezvous::encode_request({Op::kValidate, {}, {}, rendezvous::kValidationMagic},
                             rendezvous::Dialect::kV2_2, out);
  rendezvous::encode_request({Op::kPing, {}, {}, nonce}, rendezvous::Dialect::kV2_2, out);
}

std::string SimulatedNode::key(std::string_view name) const {
  return "/rdzv/" + run_id_ + "/" + std::to_string(generation_) + "/" + std::string(name);
}

std::string SimulatedNode::round_key(std::string_view name) const {
  return key(std::to_string(round_) + "/" + std::string(name));
}

// Every request of the round goes through here, so that its count and bytes are the client's.
void SimulatedNode::send(const Request& request, std::string& out) {
  const std::size_t before = out.size();
  rendezvous::encode_request(request, rendezvous::Dialect::kV2_2, out);
  ++requests_;
  bytes_sent_ += static_cast<std::int64_t>(out.size() - before);
}

void SimulatedNode::begin_round(std::string& out) {
  step_ = Step::kGeneration;
  send({Op::kCompareSet, {"/rdzv/" + run_id_ + "/generation"}, {"", "0"}, 0}, out);
}

void SimulatedNode::wait(Step next, std::vector<std::string> keys, std::string& out) {
  step_ = next;
  send({Op::kWait, keys, {}, 0}, out);
  pending_keys_ = std::move(keys);
}

void SimulatedNode::multi_get(Step next, std::vector<std::string> keys, std::string& out) {
  step_ = next;
  send({Op::kMultiGet, std::move(keys), {}, 0}, out);
}

bool SimulatedNode::on_reply(std::string& in, std::string& out) {
  const Reply due = reply_of(step_, nodes_);
  std::vector<std::string> values;
  std::int64_t number = 0;
  std::size_t used = 0;
  if (due.fixed > 0) {
    if (in.size() < due.fixed) return false;
    if (due.fixed == 1) number = static_cast<unsigned char>(in[0]);
    if (due.fixed == 4) number = rendezvous::load_u32(in);
    if (due.fixed == 8) number = static_cast<std::int64_t>(rendezvous::load_u64(in));
    used = due.fixed;
  } else if (due.values > 0) {
    used = take_values(in, due.values, values);
    if (used == 0) return false;
  } else {
    fail(std::string("bytes from the server ") + step_name(step_));
    return true;
  }
  in.erase(0, used);
  advance(values, number, out);
  return true;
}

void SimulatedNode::advance(const std::vector<std::string>& values, std::int64_t number,
                            std::string& out) {
  switch (step_) {
    case Step::kHandshake:
      if (static_cast<std::uint32_t>(number) != nonce_) return fail("PING echoed another nonce");
      step_ = Step::kConnected;
      return;
    case Step::kGeneration:
      generation_ = std::atoll(values[0].c_str());
      step_ = Step::kCheckResolved;
      send({Op::kCheck, {key("run_closed")}, {}, 0}, out);
      return;
    case Step::kCheckResolved:
      // Open: next_rendezvous() does not check again. (Closed, it would start a new generation.)
      if (number == rendezvous::kCheckReady)
        return fail("the run is closed (the simulation covers an open run only)");
      step_ = Step::kRound;
      send({Op::kCompareSet, {key("round")}, {"", "0"}, 0}, out);
      return;
    case Step::kRound:
      round_ = std::atoll(values[0].c_str());
      if (round_ != 0) return fail("round " + values[0] + ": the simulation covers round 0 only");
      step_ = Step::kJoin;
      send({Op::kAdd, {round_key("joined")}, {}, 1}, out);
      return;
    case Step::kJoin:
      return joined(number, out);
    case Step::kCloseRound:
      return wait(Step::kAwaitClose, {round_key("closed")}, out);
    case Step::kAwaitClose:
    case Step::kSlotsWait:
    case Step::kRankWait:
    case Step::kRankGetWait:
    case Step::kGetClosedWait:
      return wait_ended(number, out);
    case Step::kGetClosed:
      return closed(values, out);
    case Step::kSlots:
      publish_ranks(values, out);
      return place(out);
    case Step::kRankGet:
      rank_ = std::atoi(values[0].c_str());
      return place(out);
    default:
      return fail(std::string("a reply ") + step_name(step_));
  }
}

void SimulatedNode::joined(std::int64_t number, std::string& out) {
  slot_ = static_cast<int>(number - 1);
  if (slot_ >= nodes_)
    return fail("joined after the round filled (slot " + std::to_string(slot_) + ")");
  send({Op::kSet, {round_key("slot/" + std::to_string(slot_))}, {id_}, 0}, out);
  if (slot_ + 1 == nodes_) {
    step_ = Step::kCloseRound;
    send({Op::kCompareSet, {round_key("closed")}, {"", std::to_string(nodes_)}, 0}, out);
    return;
  }
  wait(Step::kAwaitClose, {round_key("closed")}, out);
}

// A WAIT of step_ ended: the read or the next wait it was for.
void SimulatedNode::wait_ended(std::int64_t number, std::string& out) {
  if (number != rendezvous::kStopWaiting) return fail("WAIT answered other than STOP_WAITING");
  switch (step_) {
    case Step::kAwaitClose:
      return wait(Step::kGetClosedWait, {round_key("closed")}, out);
    case Step::kGetClosedWait:
      return multi_get(Step::kGetClosed, pending_keys_, out);
    case Step::kSlotsWait:
      return multi_get(Step::kSlots, pending_keys_, out);
    case Step::kRankWait:
      return wait(Step::kRankGetWait,
                  {round_key("rank/" + std::to_string(slot_)), round_key("restarts")}, out);
    default:
      return multi_get(Step::kRankGet, pending_keys_, out);
  }
}

// The round's size read: the first arrival reads every slot's id, the others wait for their rank.
void SimulatedNode::closed(const std::vector<std::string>& values, std::string& out) {
  num_nodes_ = std::atoi(values[0].c_str());
  if (slot_ >= num_nodes_) return fail("left out of a round of " + values[0]);
  if (slot_ != 0) return wait(Step::kRankWait, {round_key("rank/" + std::to_string(slot_))}, out);
  std::vector<std::string> slots;
  slots.reserve(static_cast<std::size_t>(num_nodes_));
  for (int i = 0; i < num_nodes_; ++i) slots.push_back(round_key("slot/" + std::to_string(i)));
  wait(Step::kSlotsWait, std::move(slots), out);
}

// As assign_rank(): the participants' ids sorted, each slot's rank published with the round's
// restart count (0: round 0 follows no failed round).
void SimulatedNode::publish_ranks(const std::vector<std::string>& values, std::string& out) {
  std::vector<int> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return values[static_cast<std::size_t>(a)] < values[static_cast<std::size_t>(b)];
  });
  std::vector<std::string> keys = {round_key("restarts")}, ranks = {"0"};
  keys.reserve(order.size() + 1);
  ranks.reserve(order.size() + 1);
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    keys.push_back(round_key("rank/" + std::to_string(order[rank])));
    ranks.push_back(std::to_string(rank));
    if (order[rank] == slot_) rank_ = static_cast<int>(rank);
  }
  send({Op::kMultiSet, std::move(keys), std::move(ranks), 0}, out);
}

// Placed: the node's keys of the round, as next_rendezvous() writes them before it returns.
void SimulatedNode::place(std::string& out) {
  const std::string rank = std::to_string(rank_);
  send({Op::kMultiSet, {round_key("node/" + rank), round_key("heartbeat/" + rank)}, {id_, "0"}, 0},
       out);
  step_ = Step::kDone;
}

void SimulatedNode::fail(std::string why) {
  step_ = Step::kFailed;
  error_ = std::move(why);
}

}  // namespace acc::bench
