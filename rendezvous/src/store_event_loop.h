#pragma once

// One event loop of the store server: a thread, its epoll set and the connections it accepted.
//
// The loop is the server's own: one level-triggered epoll set holds the listener, the
// connections (registered once), a timerfd for the stall sweep and an eventfd for stop(), and a
// round is one epoll_wait, a recv per ready connection and the round's replies. Asio only
// parses and resolves the listener's address. Through Asio's reactor a connection's readiness cost
// an epoll_ctl to re-arm, an operation allocated and a handler dispatched; with the connections in
// a set of their own behind Asio, a round still cost two epoll_waits and an epoll_ctl (Asio re-arms
// a descriptor it waits on), which at 8 clients was 0.8 system calls per request
// (bench/README.md, "Store server CPU per operation").
//
// A process holds at most RLIMIT_NOFILE descriptors in one descriptor table (descriptor numbers
// are below the limit), and without CAP_SYS_RESOURCE the hard limit cannot be raised. A thread
// that calls unshare(CLONE_FILES) gets a table of its own: a copy of the one it shared, after
// which what either opens or closes is private to it. So the server serves its connections from
// one or more loops, each a thread with its own table: a loop that runs out of descriptors stops
// accepting and starts the next, and one process holds kMaxLoops times the limit. Loop 0 starts
// with the server. The key-value state is one, under a mutex; a reply that a request causes on
// another loop's connection (a WAIT's wake-up, a WATCH_KEY notification) goes into that loop's
// inbox, under the same mutex, and its eventfd wakes it.
//
// The loop itself is in store_event_loop.cc, its accepting in store_listener.cc, and what it does
// with a connection (reads, requests, replies, closes) in store_connection.cc.

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "acc/rendezvous/clock.h"
#include "acc/rendezvous/protocol.h"
#include "acc/rendezvous/store_server.h"
#include "send_ring.h"
#include "store_connection.h"
#include "store_state.h"

namespace acc::rendezvous::detail {

// Most loops of one server: 16 times the open-file limit (320,000 connections at 20,000).
inline constexpr unsigned kMaxLoops = 16;

// A connection id carries its loop in its low bits, so that a reply caused by a request of
// another loop (a WAIT's wake-up, a WATCH_KEY notification) finds the loop that owns it.
constexpr unsigned loop_of(std::uint64_t connection) {
  return static_cast<unsigned>(connection % kMaxLoops);
}

// Reads go through one buffer shared by all connections: a connection's socket is read only when
// it is readable (reactor style), so thousands of idle connections cost no buffer each.
inline constexpr std::size_t kReadBufferBytes = 64 * 1024;
// Reads per readiness event before yielding to other connections.
inline constexpr int kReadsPerEvent = 4;
// Accepts per readiness event, for the same fairness.
inline constexpr int kAcceptsPerEvent = 256;
// Descriptors a loop with a table of its own keeps spare in it: it stops accepting (the next
// loop takes over) when an accepted socket's number comes this close to the open-file limit, so
// that what the thread opens later (its io_uring, a sanitizer's probe pipe) still fits.
inline constexpr int kSpareDescriptors = 8;
// Ready descriptors taken from the epoll set at once.
inline constexpr int kEventsPerPoll = 256;
// Tags of the loop's own descriptors in the epoll set; connection ids start above them.
inline constexpr std::uint64_t kWakeTag = 1;
inline constexpr std::uint64_t kSweepTag = 2;
inline constexpr std::uint64_t kAcceptRetryTag = 3;
inline constexpr std::uint64_t kFirstListenerTag = 4;  // listener i: kFirstListenerTag + i
inline constexpr ConnectionId kFirstConnectionId = 16;
// Listeners of one server (host and more_hosts): their tags fit below the connections'.
inline constexpr std::size_t kMaxListeners = kFirstConnectionId - kFirstListenerTag;

struct Server;

// Made, started and stopped by Server (store_server_impl.h). Not thread-safe: its thread's, but
// for `inbox`, which other loops fill under Server::state_mutex (foreign_buffer).
struct EventLoop : ReplySink {
  EventLoop(Server& server, unsigned index);

  // The loop's epoll set and timers, registered. Empty, or what failed. Loop 0's are made by
  // the thread that starts the server, before its thread (so start() throws what fails, and
  // returns without waiting for the thread); the next loops' by their own threads.
  std::string make_descriptors();
  // The loop's thread: its own descriptor table, then the loop until stop(). A next loop's
  // makes its descriptors first and gives `ready` an empty string once it serves, or what failed.
  void serve(std::promise<std::string>* ready);
  void close_descriptors();

  // --- ReplySink: called by StoreState while it applies a request.
  std::string* buffer_for(ConnectionId id) override;

  // --- The loop (store_event_loop.cc).
  bool watch(int fd, std::uint64_t tag, std::uint32_t events);
  // Registers the loop's descriptors and starts the sweep's clock. Loop thread, or before it.
  void arm();
  // Serves until stop(): each round waits for readiness, serves it, and writes the replies.
  void loop();
  // Serves one round of readiness, then writes the replies. True when more is waiting that the
  // next epoll_wait would not report at once (a full batch of events still counts on it).
  bool serve_round(const epoll_event* events, int ready);
  // The listeners, the stop eventfd and the timers.
  void serve_own(std::uint64_t tag);
  std::chrono::milliseconds sweep_interval() const;
  // Closes connections that left a request half-sent, or replies unread, past the stall timeout.
  void sweep();
  void close_all();
  std::string* foreign_buffer(ConnectionId id);
  bool start_next_loop();
  // The calling thread's involuntary context switches: how often a woken client preempted it.
  static double thread_preemptions();

  // --- Accepting (store_listener.cc).
  bool watch_listeners();
  void unwatch_listeners();
  void accept_ready(int listen_fd);
  // This loop's table is full: the next loop, with a table of its own, takes the listeners.
  // False where there is none to take it (this thread has no table of its own, or no loop is
  // left).
  bool hand_over();
  // Out of descriptors (`error`), or the last loop's table full but for its spare ones
  // (EMFILE): the listeners leave the set for 100 ms instead of spinning on a readiness that
  // stays. Said once until an accept succeeds again, not at each retry, with the limit and the way
  // to raise it.
  void out_of_descriptors(int error);
  // The listener is looked at again (has_spare_descriptors) in 100 ms.
  void retry_accept_soon();
  // Whether the table has a free descriptor below its spare ones, for the retry after
  // out_of_descriptors.
  bool has_spare_descriptors() const;
  std::string out_of_descriptors_message(int error) const;
  void add_connection(int fd);

  // --- A connection's requests and replies (store_connection.cc).
  // Reads what the connection has (up to kReadsPerEvent buffers) and applies the whole requests
  // in it. True if more may be waiting.
  bool read_some(Connection& conn);
  // Keeps unfinished_bytes up to date with `conn.in`, and sheds the oldest unfinished requests
  // when it passes max_unfinished_bytes.
  void count_unfinished(Connection& conn);
  void shed_unfinished();
  void process(Connection& conn);
  // Serves the requests that waited for their connection's replies to drain.
  void resume_held();
  // Writes the replies of a round. With two or more connections to answer, their first sends go
  // out together through the send ring (one system call) when `batching` finds that cheaper
  // here; try_write then finishes what is left (a partial send, a full socket) and does the
  // bookkeeping, as for a single reply.
  void flush_dirty();
  void send_together(std::vector<std::shared_ptr<Connection>>& batch);
  void try_write(const std::shared_ptr<Connection>& conn);
  // Watches a connection for what it can do: readable unless its replies are over
  // pause_reading_bytes, writable while replies wait for room in its socket. A call costs an
  // epoll_ctl only when that changes, which the one-request-one-reply clients never make it do.
  void update_interest(Connection& conn);
  void close(Connection& conn, const std::string& reason);

  Server& server;
  const StoreServerOptions& options;
  StoreState& state;                  // under state_locked
  const unsigned index;               // in Server::loops, and the low bits of its connections' ids
  const std::vector<int> listen_fds;  // the server's, in the epoll set of the loop that accepts
  const int wake_fd;                  // an eventfd: stop(), or replies in the inbox
  std::atomic<bool>& stop_requested;
  std::atomic<std::size_t>& total_connections;  // of all loops
  int epoll_fd = -1;           // the listener while this loop accepts, the connections, the rest
  int sweep_fd = -1;           // a periodic timerfd: the stall sweep
  int accept_retry_fd = -1;    // a one-shot timerfd: the listener back after running out of fds
  bool private_table = false;  // the thread has a descriptor table of its own
  int fd_limit = 0;            // the soft RLIMIT_NOFILE when the thread started
  bool out_of_descriptors_logged = false;  // accepts fail for want of descriptors; said once
  std::size_t unfinished_bytes = 0;        // every connection's counted_in (max_unfinished_bytes)
  CloseLog close_log{options.log};

  // Holds Server::state_mutex: the state is this thread's to apply to, and the replies that other
  // loops left in the inbox are taken first, so that a connection's replies keep the order in
  // which the state made them. On release, wakes the loops this one left replies for.
  class StateLock {
   public:
    explicit StateLock(EventLoop& loop);
    ~StateLock();
    StateLock(const StateLock&) = delete;
    StateLock& operator=(const StateLock&) = delete;

   private:
    EventLoop& loop_;
  };
  bool state_locked = false;
  // Replies for this loop's connections made by other loops' requests, with the id of the
  // connection each is for. Under Server::state_mutex.
  std::vector<std::pair<ConnectionId, std::string>> inbox;
  std::vector<std::pair<ConnectionId, std::string>> incoming;  // the inbox being taken
  std::uint32_t to_wake = 0;  // loops (bits) this one left replies for while it held the state
  // Not zeroed: its pages are touched by the first recv, not when a launch that no worker
  // connects to makes the server.
  std::unique_ptr<char[]> read_buffer;
  Request request;  // the request being applied (parse_request overwrites it)
  std::unordered_map<ConnectionId, std::shared_ptr<Connection>> connections;
  std::vector<std::shared_ptr<Connection>> dirty;
  std::vector<std::shared_ptr<Connection>> flushing;  // the dirty ones being written
  // Made at the first reply, in the loop's thread: a job whose workers never connect (a launch of
  // /bin/true, a script without torch.distributed) sets up no io_uring.
  std::optional<SendRing> ring;
  SendRing& send_ring() {
    if (!ring) ring.emplace(kEventsPerPoll);
    return *ring;
  }
  BatchingChoice batching{thread_preemptions};
  std::vector<std::shared_ptr<Connection>> held;  // requests_held, and room again for replies
  ConnectionId next_id;
  // When the round being served began: the requests' and replies' times, to the stall sweep's
  // precision, for one clock read per round instead of several per request.
  Clock::time_point round_time;
  bool stopping = false;  // loop thread only
};

}  // namespace acc::rendezvous::detail
