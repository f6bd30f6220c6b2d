#include "store_connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "store_event_loop.h"

namespace acc::rendezvous::detail {

std::string* EventLoop::buffer_for(ConnectionId id) {
  if (loop_of(id) != index) return foreign_buffer(id);
  auto it = connections.find(id);
  if (it == connections.end() || it->second->closed) return nullptr;
  Connection& conn = *it->second;
  if (!conn.dirty && !conn.write_waiting) {
    conn.dirty = true;
    dirty.push_back(it->second);
  }
  // Its own requests stop at pause_reading_bytes; past this bound only others' requests (wake-
  // ups, watch notifications) can bring more. It is closed at the next write attempt: dropping
  // a reply and going on would break its stream.
  if (conn.over_limit || conn.pending() > options.max_pending_reply_bytes) {
    conn.over_limit = true;
    if (!conn.dirty) {
      conn.dirty = true;
      dirty.push_back(it->second);
    }
    return nullptr;
  }
  return &conn.out;
}

bool EventLoop::read_some(Connection& conn) {
  bool eof = false;
  bool more = false;
  for (int i = 0;; ++i) {
    if (i == kReadsPerEvent) {
      more = true;
      break;
    }
    const ssize_t n = ::recv(conn.fd, read_buffer.get(), kReadBufferBytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      eof = true;  // EOF or reset: serve what arrived before it, then close
      break;
    }
    if (conn.in.empty()) conn.partial_since = round_time;
    conn.in.append(read_buffer.get(), static_cast<std::size_t>(n));
    if (static_cast<std::size_t>(n) < kReadBufferBytes) break;
  }
  process(conn);
  if (eof) close(conn, {});
  count_unfinished(conn);
  return more && !conn.closed;
}

void EventLoop::count_unfinished(Connection& conn) {
  if (conn.closed) return;
  // The memory `in` holds: a large buffer's capacity (appends grow it up to twice its size).
  const std::size_t held =
      conn.in.capacity() > kKeptBufferBytes ? conn.in.capacity() : conn.in.size();
  unfinished_bytes = unfinished_bytes - conn.counted_in + held;
  conn.counted_in = held;
  if (unfinished_bytes > options.max_unfinished_bytes) shed_unfinished();
}

void EventLoop::shed_unfinished() {
  std::vector<std::shared_ptr<Connection>> holding;
  for (auto& [id, conn] : connections)
    if (conn->counted_in > 0) holding.push_back(conn);
  std::sort(holding.begin(), holding.end(),
            [](const auto& a, const auto& b) { return a->partial_since < b->partial_since; });
  const std::string limit = std::to_string(options.max_unfinished_bytes >> 20) + " MB";
  for (auto& conn : holding) {
    if (unfinished_bytes <= options.max_unfinished_bytes) break;
    close(*conn, "the store held more unfinished requests than its limit of " + limit +
                     ", and this one's was the oldest (" + std::to_string(conn->counted_in) +
                     " bytes)");
  }
}

void EventLoop::process(Connection& conn) {
  std::size_t pos = 0;
  std::string_view in = conn.in;
  if (!conn.dialect_known) {
    auto detection = detect_dialect(in, options.legacy_dialect);
    if (!detection.complete) return;
    conn.dialect_known = true;
    conn.dialect = detection.dialect;
    pos = detection.consumed;
  }
  std::string error;
  std::optional<StateLock> lock;  // taken at the first request, for all of this read's
  while (pos < in.size() && !conn.closed) {
    // Back-pressure: a client that does not read its replies gets no more of them. Its
    // requests wait here, and the rest in the kernel once reading is paused.
    if (conn.pending() >= options.pause_reading_bytes) {
      conn.requests_held = true;
      break;
    }
    auto result = parse_request(in.substr(pos), conn.dialect, options.limits, request);
    if (result.status == ParseStatus::kIncomplete) break;
    if (result.status == ParseStatus::kError) return close(conn, result.error);
    pos += result.consumed;
    if (!lock) lock.emplace(*this);
    if (options.admit_members_only && !conn.host_told) {
      state.connection_from(conn.id, conn.peer_host, conn.from_this_host);
      conn.host_told = true;
    }
    if (!state.apply(conn.id, conn.dialect, request, *this, error)) return close(conn, error);
  }
  if (pos > 0) {
    conn.in.erase(0, pos);
    conn.partial_since = round_time;
    release_if_large(conn.in);
  }
}

void EventLoop::resume_held() {
  std::vector<std::shared_ptr<Connection>> batch;
  batch.swap(held);
  for (auto& conn : batch) {
    if (conn->closed || !conn->requests_held) continue;
    conn->requests_held = false;
    process(*conn);
    count_unfinished(*conn);
  }
}

void EventLoop::flush_dirty() {
  flushing.swap(dirty);  // both keep their capacity: no allocation per round
  const bool adapt = options.batch_sends && options.adapt_batching;
  if (flushing.size() > 1 && options.batch_sends && send_ring().ok() &&
      (!adapt || batching.batch())) {
    send_together(flushing);
  }
  if (adapt && send_ring().ok()) batching.sent(flushing.size());
  for (auto& conn : flushing) {
    conn->dirty = false;
    if (conn->closed) continue;
    if (conn->send_failed) {
      close(*conn, {});
      continue;
    }
    try_write(conn);
  }
  flushing.clear();
  close_log.end_round();
}

void EventLoop::send_together(std::vector<std::shared_ptr<Connection>>& batch) {
  auto on_done = [&](std::uint64_t index, int result) {
    Connection& conn = *batch[index];
    if (result > 0) {
      conn.out_pos += static_cast<std::size_t>(result);
      conn.write_blocked_since = round_time;
    } else if (result != -EAGAIN && result != -EWOULDBLOCK && result != -EINTR) {
      conn.send_failed = true;
    }
  };
  for (std::size_t i = 0; i < batch.size() && send_ring().ok(); ++i) {
    Connection& conn = *batch[i];
    if (conn.closed || conn.over_limit || conn.pending() == 0) continue;
    if (send_ring().full()) send_ring().flush(on_done);
    if (!send_ring().ok()) break;
    send_ring().send(conn.fd, conn.out.data() + conn.out_pos, conn.pending(), i);
  }
  send_ring().flush(on_done);
}

void EventLoop::try_write(const std::shared_ptr<Connection>& conn) {
  while (conn->out_pos < conn->out.size()) {
    const ssize_t n = ::send(conn->fd, conn->out.data() + conn->out_pos,
                             conn->out.size() - conn->out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) return close(*conn, {});
    conn->out_pos += static_cast<std::size_t>(n);
    conn->write_blocked_since = round_time;
  }
  if (conn->over_limit || conn->pending() > options.max_pending_reply_bytes) {
    return close(*conn, "its replies are not being read (" + std::to_string(conn->pending()) +
                            " bytes pending, over the limit of " +
                            std::to_string(options.max_pending_reply_bytes) + ")");
  }
  if (conn->pending() == 0) {
    conn->out.clear();
    conn->out_pos = 0;
    release_if_large(conn->out);
  }
  update_interest(*conn);
  if (!conn->closed && conn->requests_held && conn->pending() < options.pause_reading_bytes) {
    held.push_back(conn);
  }
}

void EventLoop::update_interest(Connection& conn) {
  if (conn.closed) return;
  const bool want_out = conn.pending() > 0;
  const bool want_in = conn.pending() < options.pause_reading_bytes;
  if (want_out == conn.write_waiting && want_in == conn.reading) return;
  epoll_event event{};
  event.events = (want_in ? EPOLLIN : 0u) | (want_out ? EPOLLOUT : 0u);
  event.data.u64 = conn.id;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, conn.fd, &event) != 0) return close(conn, {});
  if (want_out && !conn.write_waiting) conn.write_blocked_since = round_time;
  conn.write_waiting = want_out;
  conn.reading = want_in;
}

void EventLoop::close(Connection& conn, const std::string& reason) {
  if (conn.closed) return;
  conn.closed = true;
  unfinished_bytes -= conn.counted_in;
  conn.counted_in = 0;
  if (!reason.empty()) close_log.closed(conn.peer, reason);
  // Out of the epoll set before the close: a worker forked meanwhile may still hold the socket.
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, conn.fd, nullptr);
  ::close(conn.fd);
  if (state_locked) {
    state.drop_connection(conn.id);
  } else {
    StateLock lock(*this);
    state.drop_connection(conn.id);
  }
  connections.erase(conn.id);  // may destroy conn's owner last reference after handlers run
  total_connections.fetch_sub(1, std::memory_order_relaxed);
}

void CloseLog::closed(const std::string& peer, const std::string& reason) {
  const std::string cause = reason.substr(0, reason.find('('));
  auto it = std::find_if(round_closes_.begin(), round_closes_.end(),
                         [&](const Closes& c) { return c.cause == cause; });
  if (it == round_closes_.end()) it = round_closes_.insert(it, {cause, peer, reason, 0});
  ++it->count;
}

void CloseLog::say_round() {
  end_window();
  for (const Closes& c : round_closes_) {
    if (lines_ < kCloseLinesPerWindow) {
      ++lines_;
      log_(c.count == 1
               ? "closed connection from " + c.peer + ": " + c.reason
               : "closed " + std::to_string(c.count) +
                     " connections for the same cause, the first from " + c.peer + ": " + c.reason);
      continue;
    }
    const std::string kind = kind_of(c.reason);
    auto it = std::find_if(unsaid_.begin(), unsaid_.end(),
                           [&](const Closes& u) { return u.cause == kind; });
    if (it == unsaid_.end())
      unsaid_.push_back({kind, c.peer, c.reason, c.count});
    else
      it->count += c.count;
  }
  round_closes_.clear();
}

void CloseLog::end_window(bool stopping_now) {
  const auto now = Clock::steady().now();
  if (!stopping_now && now - window_start_ < kCloseLogWindow) return;
  for (const Closes& u : unsaid_) {
    log_("closed " + std::to_string(u.count) + " more connections in " +
         std::to_string(kCloseLogWindow.count()) + " s without a line each, the first from " +
         u.peer + ": " + u.reason);
  }
  unsaid_.clear();
  lines_ = 0;
  window_start_ = now;
}

std::string CloseLog::kind_of(const std::string& reason) {
  return reason.substr(0, reason.find_first_of("0123456789"));
}

}  // namespace acc::rendezvous::detail
