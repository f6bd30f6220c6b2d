#pragma once

// One node of an elastic rendezvous round as bytes on the wire, without I/O: what
// acc::rendezvous::ElasticRendezvous::next_rendezvous() sends over a StoreClient, request for
// request, for a node's first round (no `failed`, no earlier round) with --nnodes N:N on a store
// where the run has not been closed. rendezvous_scale drives thousands of these from one epoll
// loop; faithfulness_test records both on the wire and compares them.
//
// The round, per node (keys under "/rdzv/<run>/", g the generation, r the round, s the slot):
//   COMPARE_SET generation "" "0"; CHECK [g/run_closed]              resolve_generation
//   COMPARE_SET g/round "" "0"; ADD g/r/joined 1 -> s + 1           current_round; the arrival slot
//   SET g/r/slot/s ID; the Nth: COMPARE_SET g/r/closed "" "N"        the node's id; the round full
//   WAIT [g/r/closed]; WAIT + MULTI_GET [g/r/closed] -> N            await_close
//   slot 0: WAIT + MULTI_GET [slot/0..N-1]; MULTI_SET [restarts, rank/*]  sorts the ids
//   others: WAIT [rank/s]; WAIT + MULTI_GET [rank/s, restarts]       reads its rank
//   MULTI_SET [node/RANK, heartbeat/RANK] [ID, "0"]                   the node takes its place
// Replies are read before the next request goes, as the blocking client does; SETs have none.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "acc/rendezvous/protocol.h"

namespace acc::bench {

// The node id rendezvous_scale gives node `index`: an address and port, as an agent's.
std::string simulated_node_id(int index);

class SimulatedNode {
 public:
  enum class Step : std::uint8_t {
    kHandshake,      // VALIDATE + PING sent: the echo (u32)
    kConnected,      // handshake done, round not begun
    kGeneration,     // COMPARE_SET generation: a value
    kCheckResolved,  // CHECK run_closed (resolve_generation): a byte
    kRound,          // COMPARE_SET round: a value
    kJoin,           // ADD joined 1: an i64
    kCloseRound,     // COMPARE_SET closed (the Nth arrival): a value
    kAwaitClose,     // WAIT [closed]: a byte
    kGetClosedWait,  // get(closed)'s WAIT: a byte
    kGetClosed,      // get(closed)'s MULTI_GET: a value
    kSlotsWait,      // slot 0: WAIT [slot/*]: a byte
    kSlots,          // slot 0: MULTI_GET [slot/*]: N values
    kRankWait,       // WAIT [rank/s]: a byte
    kRankGetWait,    // multi_get's WAIT [rank/s, restarts]: a byte
    kRankGet,        // MULTI_GET [rank/s, restarts]: two values
    kDone,           // placed: rank() and num_nodes() hold
    kFailed,         // error() says why
  };
  static constexpr int kSteps = static_cast<int>(Step::kFailed) + 1;
  static const char* step_name(Step step);

  SimulatedNode(std::string run_id, int nodes, std::string id)
      : run_id_(std::move(run_id)), nodes_(nodes), id_(std::move(id)) {}

  // Appends the connection's handshake (VALIDATE, then PING with `nonce`) to `out`.
  void start_handshake(std::uint32_t nonce, std::string& out);
  // Appends the round's first request to `out`. Call once the handshake is done.
  void begin_round(std::string& out);
  // Consumes the reply now due from the front of `in`, if whole, and appends the next request(s)
  // to `out`. Returns false when `in` does not hold a whole reply yet (nothing consumed).
  bool on_reply(std::string& in, std::string& out);

  Step step() const { return step_; }
  bool joined() const { return slot_ >= 0; }  // the ADD's answer came: the slot is known
  int slot() const { return slot_; }
  int rank() const { return rank_; }
  int num_nodes() const { return num_nodes_; }
  const std::string& id() const { return id_; }
  const std::string& error() const { return error_; }
  // The round's requests and bytes (the handshake's not counted), as StoreClient::traffic().
  std::int64_t requests() const { return requests_; }
  std::int64_t bytes_sent() const { return bytes_sent_; }

 private:
  void advance(const std::vector<std::string>& values, std::int64_t number, std::string& out);
  // The steps of advance() with more to do than one request.
  void joined(std::int64_t number, std::string& out);
  void wait_ended(std::int64_t number, std::string& out);
  void closed(const std::vector<std::string>& values, std::string& out);
  void publish_ranks(const std::vector<std::string>& values, std::string& out);
  void place(std::string& out);
  void fail(std::string why);
  void send(const rendezvous::Request& request, std::string& out);
  std::string key(std::string_view name) const;  // "/rdzv/<run>/<g>/<name>"
  std::string round_key(std::string_view name) const;
  void wait(Step next, std::vector<std::string> keys, std::string& out);
  void multi_get(Step next, std::vector<std::string> keys, std::string& out);

  std::string run_id_;
  int nodes_;
  std::string id_;
  Step step_ = Step::kHandshake;
  std::uint32_t nonce_ = 0;
  std::int64_t generation_ = 0;
  std::int64_t round_ = 0;
  int slot_ = -1;
  int rank_ = -1;
  int num_nodes_ = 0;
  std::vector<std::string> pending_keys_;  // the keys of the WAIT whose MULTI_GET comes next
  std::string error_;
  std::int64_t requests_ = 0;
  std::int64_t bytes_sent_ = 0;
};

}  // namespace acc::bench
