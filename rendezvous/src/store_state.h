#pragma once

// The store's data and its waiters, as pure logic: a decoded request goes in, reply bytes come out
// through a ReplySink. The server (store_server.cc) and the unit tests both drive it; neither
// needs the other. Not thread-safe: the server's event loops call it under one mutex.

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "acc/rendezvous/protocol.h"

namespace acc::rendezvous::detail {

using ConnectionId = std::uint64_t;

// Where replies go: the output buffer of a connection, or nullptr if it is gone.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  virtual std::string* buffer_for(ConnectionId connection) = 0;
};

class StoreState {
 public:
  // `max_reply_bytes` bounds the reply to one request of a connection (GET, MULTI_GET, LIST):
  // a request whose reply would be larger is refused (apply returns false) before any byte of it
  // is built, so one small MULTI_GET naming a big key many times cannot exhaust memory.
  explicit StoreState(std::size_t max_keys,
                      std::size_t max_reply_bytes = std::numeric_limits<std::size_t>::max())
      : max_keys_(max_keys), max_reply_bytes_(max_reply_bytes) {}

  // Applies `request` from `connection` (which speaks `dialect`), appending replies to the sink's
  // buffers: to `connection` itself and, for WAITs now satisfied or watched keys, to others.
  // Returns false with `error` set when the request cannot be served (a non-numeric value under
  // ADD, a full store, VALIDATE with a wrong magic, a reply over `max_reply_bytes`); the caller
  // then closes the connection.
  bool apply(ConnectionId connection, Dialect dialect, const Request& request, ReplySink& sink,
             std::string& error);

  // Forgets the connection's pending waits, watches, key space and membership (it was closed).
  void drop_connection(ConnectionId connection);

  // From now on a connection writes a launcher key ("/acc/...") only once it has proven that it
  // knows `secret` (acc/rendezvous/job_secret.h), its nonce made from `salt`; a write before, or
  // a wrong proof, is refused (apply returns false: the connection is closed).
  void require_job_secret(std::string secret, std::string salt);

  // Admission (with a job secret only): from now on a connection may do nothing but prove the
  // secret unless it comes from loopback or from a member's address: one of `member_hosts`, or
  // one from which a connection has proven the secret. Anything else is refused (apply returns
  // false: the connection is closed), so that a client on another host reaches no key.
  void admit_members_only(const std::vector<std::string>& member_hosts);
  // The address (no port) connection `connection` comes from, and whether that is an address of
  // this host (admitted as loopback is); told before its first request.
  void connection_from(ConnectionId connection, std::string host, bool this_host = false);

  // Key spaces: a connection whose first request comes after this call (or, with `when_set`,
  // after the key `when_set`, as the wire has it, is first stored) names every key under `prefix`,
  // except the shared ones (is_shared_key). Connections seen earlier keep the space they had. LIST
  // and GET_NUM_KEYS of a connection in a space see that space's keys only, without the prefix.
  void begin_key_space(std::string prefix, std::string when_set = {});
  // Keys every connection names alike, whatever its space: the launchers' ("/acc/...") and keys
  // that already name their attempt ("/worker/attempt_<n>/...", PyTorch 1.13's and libacc's), as
  // the wire has them (PyTorch's clients and ours send "/" + key) or not.
  static bool is_shared_key(std::string_view key);

  std::size_t num_keys() const { return values_.size(); }
  // The keys that start with `prefix`, as stored.
  std::vector<std::string> keys_with_prefix(std::string_view prefix) const;
  std::size_t num_pending_waits() const { return waits_.size(); }

 private:
  struct PendingWait {
    ConnectionId connection = 0;
    std::size_t remaining = 0;
    std::vector<std::string> keys;  // the keys it still counts on, to unregister on cancel
  };

  // The job secret's part of apply(): nullopt where the request goes on as any other; else it
  // was the secret's to answer, and false refuses it (`error` says why).
  std::optional<bool> admit(ConnectionId connection, const Request& request, ReplySink& sink,
                            std::string& error);
  // Whether admission lets `connection` past the secret's own requests.
  bool admitted(ConnectionId connection) const;
  // The body of apply() for a connection whose keys are already in its `space`.
  bool apply_in_space(ConnectionId connection, const std::string& space, const Request& request,
                      ReplySink& sink, std::string& error);
  // The key as the connection in `space` named it.
  static std::string_view unscoped(std::string_view key, const std::string& space);
  bool present(const std::string& key) const;
  std::size_t reply_size(const Request& request, const std::string& space) const;
  void reply(ReplySink& sink, ConnectionId connection, std::string_view bytes);
  bool store(const std::string& key, std::string value, std::string& error);
  void wake_waiters(const std::string& key, ReplySink& sink, bool only_one = false);
  void notify_watchers(const std::string& key, std::uint8_t type, std::string_view old_value,
                       std::string_view new_value, ReplySink& sink);
  void register_wait(ConnectionId connection, const std::vector<std::string>& keys,
                     ReplySink& sink);
  void cancel_waits(ConnectionId connection);
  // The parts of apply: SET, APPEND and MULTI_SET; QUEUE_PUSH; GET, MULTI_GET and LIST's reply.
  bool set(const Request& request, ReplySink& sink, std::string& error);
  bool queue_push(const Request& request, ReplySink& sink, std::string& error);
  bool read(const Request& request, const std::string& space, std::string& out,
            std::string& error) const;
  bool add(ConnectionId connection, const Request& request, ReplySink& sink, std::string& error);
  void compare_set(ConnectionId connection, const Request& request, ReplySink& sink);
  void queue_pop(ConnectionId connection, const std::string& key, ReplySink& sink);

  std::size_t max_keys_;
  std::size_t max_reply_bytes_;
  std::unordered_map<std::string, std::string> values_;
  std::unordered_map<std::string, std::deque<std::string>> queues_;
  std::uint64_t next_wait_id_ = 1;
  std::unordered_map<std::uint64_t, PendingWait> waits_;
  std::unordered_map<std::string, std::vector<std::uint64_t>> waits_by_key_;
  std::unordered_map<ConnectionId, std::vector<std::uint64_t>> waits_by_connection_;
  std::unordered_map<std::string, std::vector<ConnectionId>> watchers_;
  std::string space_;       // the space of connections first seen from now on
  std::string next_space_;  // begins when the key space_trigger_ is first stored
  std::string space_trigger_;
  std::unordered_map<ConnectionId, std::string> space_of_;  // every connection seen
  std::string job_secret_;  // empty: every connection writes any key
  std::string job_salt_;
  std::unordered_set<ConnectionId> members_;  // proved the secret
  bool admission_ = false;                    // admit_members_only
  std::unordered_set<std::string> member_hosts_;
  std::unordered_map<ConnectionId, std::string> host_of_;  // connection_from
  std::unordered_set<ConnectionId> this_host_;             // connection_from: this host's
};

// Parses a stored value as ADD does (std::stoll: leading blanks, a sign, decimal digits, anything
// after them ignored). Returns false when there are no digits or the number overflows int64.
bool parse_counter(std::string_view text, std::int64_t& out);

}  // namespace acc::rendezvous::detail
