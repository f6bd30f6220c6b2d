#pragma once

// One client connection of the store server, as its event loop (store_event_loop.h) holds it: the
// bytes received and not yet parsed into a whole request, the reply bytes not yet sent, and where
// it stands (dialect, back-pressure, what the epoll set watches it for). What a loop does with a
// connection (reads it, applies its requests, writes its replies, closes it) is EventLoop's, in
// store_connection.cc, beside CloseLog, the lines about the connections a loop closed.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "acc/rendezvous/clock.h"
#include "acc/rendezvous/protocol.h"
#include "store_state.h"

namespace acc::rendezvous::detail {

// A connection's buffers keep at most this much capacity once empty: one big reply must not pin
// its size for the rest of a connection that PyTorch's clients hold for the whole job.
inline constexpr std::size_t kKeptBufferBytes = 256 * 1024;

struct Connection {
  Connection(int fd, ConnectionId id) : fd(fd), id(id) {}

  int fd;
  ConnectionId id;
  std::string peer;             // "host:port", for the lines
  std::string peer_host;        // its address alone, for admission
  bool host_told = false;       // the state knows peer_host (admission only)
  bool from_this_host = false;  // peer_host is the socket's own address
  bool dialect_known = false;
  Dialect dialect = Dialect::kV1_13;
  bool closed = false;
  std::string in;              // received bytes not yet parsed into a whole request
  std::size_t counted_in = 0;  // the memory of `in` counted in the loop's unfinished_bytes
  Clock::time_point partial_since;
  bool requests_held = false;  // whole requests wait in `in` for the replies to drain
  std::string out;             // reply bytes not yet written, from out_pos on
  std::size_t out_pos = 0;
  bool over_limit = false;     // replies were refused past max_pending_reply_bytes: close it
  bool reading = true;         // the epoll set watches it for readability
  bool write_waiting = false;  // the epoll set watches it for writability
  bool dirty = false;          // queued in EventLoop::dirty for a write attempt
  bool send_failed = false;    // a batched send failed with an error other than EAGAIN
  Clock::time_point write_blocked_since;

  std::size_t pending() const { return out.size() - out_pos; }
};

// Drops a buffer's memory once it is empty, if a big message left it large.
inline void release_if_large(std::string& buffer) {
  if (buffer.empty() && buffer.capacity() > kKeptBufferBytes) std::string().swap(buffer);
}

// The lines about the connections one loop closed with a reason. Not thread-safe: the loop's.
class CloseLog {
 public:
  // Says each line through `log` (StoreServerOptions::log, which outlives the loop).
  explicit CloseLog(const std::function<void(std::string_view)>& log) : log_(log) {}

  // A connection from `peer` was closed this round for `reason` (not empty).
  void closed(const std::string& peer, const std::string& reason);
  // The round's replies are out: its closes, one line per cause.
  void end_round() {
    if (!round_closes_.empty()) say_round();
  }
  // When the window has ended (or the store stops): the closes it did not log, one line per
  // kind; a new window begins.
  void end_window(bool stopping_now = false);

 private:
  // The round's closes that have a reason, one entry per cause (the reason up to its figures):
  // logged when the round's replies are out, one line per cause, so that a burst (every watcher
  // of a key past its bound at one SET, a sweep of many stalled clients) is one line, not one per
  // connection.
  struct Closes {
    std::string cause, peer, reason;  // the first connection's peer and reason
    std::size_t count = 0;
  };

  void say_round();
  static std::string kind_of(const std::string& reason);

  const std::function<void(std::string_view)>& log_;
  std::vector<Closes> round_closes_;

  // Past kCloseLinesPerWindow lines in kCloseLogWindow (a flood of bad clients), the closes are
  // counted instead, by kind (the reason up to its first figure: "unknown opcode ", "not a member
  // of the job: "), and said in one line per kind when the window ends, so that a flood of one
  // kind never hides another (a stranger's refusal among garbage).
  static constexpr std::size_t kCloseLinesPerWindow = 10;
  static constexpr std::chrono::seconds kCloseLogWindow{10};
  Clock::time_point window_start_;
  std::size_t lines_ = 0;
  std::vector<Closes> unsaid_;  // per kind: the count and the first one's peer and reason
};

}  // namespace acc::rendezvous::detail
