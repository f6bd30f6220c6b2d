#pragma once

// A key-value store server that speaks PyTorch's TCPStore wire protocol, so that PyTorch's own
// clients (C++ c10d::TCPStore, Python torch.distributed.TCPStore with is_master=False) and our
// StoreClient connect to it unchanged. Each connection's dialect (1.13-2.0, or 2.2+) is told from
// its first bytes; docs/rendezvous.md has the grammar and the limits.
//
// One thread with its own epoll loop, non-blocking: a malformed, oversized or stalled
// connection is closed alone and the others go on. Every socket it opens is close-on-exec, so a
// process that forks and execs workers while the server runs leaks none of them. That thread has
// a descriptor table of its own (unshare(CLONE_FILES)): its connections take none of the calling
// process's descriptors. When it runs out of descriptors (RLIMIT_NOFILE, per table), another
// thread with a table of its own takes the next connections, up to 16; the store stays one.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "acc/rendezvous/protocol.h"

namespace acc::rendezvous {

struct StoreServerOptions {
  // Address to listen on: "0.0.0.0" (all IPv4), "::" (all IPv6 and IPv4), an address or a name.
  std::string host = "0.0.0.0";
  // Further addresses to listen on, at the same port as host's (the one it picked, where port is
  // 0): each a listener of its own in the same loop, for a store that serves on loopback and on
  // the address other machines reach it at, rather than on every interface. At most 11.
  std::vector<std::string> more_hosts;
  // Port to listen on; 0 picks a free one (see StoreServer::port()).
  int port = 0;
  // Bounds on a single request; a request over one closes its connection.
  Limits limits;
  // Most keys (plus queues) the store holds; a SET of a new key past it closes the connection.
  std::size_t max_keys = 1 << 20;
  // A connection that leaves a request half-sent, or does not read its replies, for this long
  // is closed. Idle connections between requests are kept (PyTorch clients hold them for hours).
  std::chrono::milliseconds stall_timeout{30'000};
  // Memory per connection (docs/rendezvous.md, "Limits"). A connection with this many reply
  // bytes unsent stops being read (its requests wait in the kernel, so its client's sends block)
  // until they drain below it again.
  std::size_t pause_reading_bytes = 1024 * 1024;
  // The largest reply to one request (GET, MULTI_GET, LIST); a request whose reply would be
  // larger closes its connection, before the reply is built.
  std::size_t max_reply_bytes = 32 * 1024 * 1024;
  // Most reply bytes queued for one connection: more closes it. Its own requests cannot reach it
  // (reading pauses first, so they add at most pause_reading_bytes + max_reply_bytes); what other
  // connections cause (WAIT wake-ups, WATCH_KEY notifications) can.
  std::size_t max_pending_reply_bytes = 64 * 1024 * 1024;
  // Most bytes of unfinished requests (sent in part, or waiting for their connection's replies
  // to drain) a store thread holds for all its connections together. Past it, the connections
  // whose unfinished request is oldest are closed until it holds no more: many clients that
  // each stall in the middle of a large SET cannot take the node's memory.
  std::size_t max_unfinished_bytes = 64 * 1024 * 1024;
  // The dialect of connections that do not start with VALIDATE: kV1_13 (PyTorch 1.13 to 2.0) or
  // kV2_1 (PyTorch 2.1). The two cannot be told apart from their bytes.
  Dialect legacy_dialect = Dialect::kV1_13;
  // Send the replies of one poll round together, in one io_uring submission, where the kernel
  // allows io_uring; otherwise (or false) one send each. Same bytes either way; the batch halves
  // the server's CPU per request where clients share the server's cores (bench/README.md).
  bool batch_sends = true;
  // With batch_sends: batch only while the clients preempt the server after its sends (measured
  // now and then: an epoch of one send each, counting the loop thread's involuntary context
  // switches); one send each was the cheaper on a 16-core machine. False: every round with two
  // or more replies is batched.
  bool adapt_batching = true;
  // Raise the soft RLIMIT_NOFILE to the hard limit, for thousands of connections.
  bool raise_fd_limit = true;
  // Non-empty: a connection writes the launchers' keys ("/acc/...", "/rdzv/...") only once it has
  // proven it knows this secret (acc/rendezvous/job_secret.h); others are closed with one line.
  // PyTorch's clients write no such key and are not asked.
  std::string job_secret;
  // With job_secret: a connection from an address other than loopback, `member_hosts` and those
  // from which a connection has proven the secret may do nothing but prove it; anything else
  // closes it with one line (docs/rendezvous.md, "Only the job's members").
  bool admit_members_only = false;
  std::vector<std::string> member_hosts;  // numeric addresses, as the server sees its peers
  // Receives one line per closed misbehaving connection; default: stderr.
  std::function<void(std::string_view)> log;
};

class StoreServer {
 public:
  // Resolves the hosts, binds and listens on each now (serving starts with start() or run()).
  // Throws NetworkError naming host:port when an address is in use or cannot be bound, and
  // ConfigError when a host does not resolve, the port is out of range or more_hosts too long.
  explicit StoreServer(StoreServerOptions options);
  // Stops (as stop()) and releases the socket.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // The bound port (the chosen one when options.port was 0). Thread-safe.
  int port() const;
  // "host:port" as bound, for messages (host's, not more_hosts'). Thread-safe.
  std::string address() const;
  // Every listener's "host:port", host's first. Thread-safe.
  std::vector<std::string> addresses() const;

  // Serves on a background thread and returns at once. Call at most once, and not with run().
  void start();
  // Serves until stop() is called from another thread, blocking the calling thread (the loops run
  // on threads of their own, each with its own descriptor table).
  void run();
  // Closes the listener and every connection, and joins the background thread if start() made
  // one. Thread-safe, idempotent, does not throw. Not async-signal-safe: from a signal, wake a
  // thread that calls it.
  void stop();
  // Asks the loop to close everything and end, and returns at once: a later stop() (or the
  // destructor) only joins, so the caller can do other work while the loop winds down.
  // Thread-safe, idempotent, does not throw.
  void request_stop();

  // A fresh key space for the connections that come from now on (with `when_set`: from the
  // moment a client first sets that key, as it names it), so that a restart's workers never read
  // the keys of the attempt before, which PyTorch 2.x's workers no longer prefix: every key a
  // connection names is kept under `prefix`, except the launchers' ("/acc/...") and those that
  // already name their attempt ("/worker/attempt_<n>/..."). Connections open before keep their own
  // space. LIST and GET_NUM_KEYS see the connection's own space. Thread-safe.
  void begin_key_space(std::string prefix, std::string when_set = {});

  // The keys that start with `prefix` (a key space's, say), as stored. Thread-safe.
  std::vector<std::string> keys(std::string_view prefix) const;

  // Connections open right now. Thread-safe (reads a counter the loop updates).
  std::size_t num_connections() const;

  // About how many connections one server holds at an open-file limit of `open_file_limit`: its
  // threads' descriptor tables together, less what each holds besides its connections.
  static std::uint64_t connection_capacity(std::uint64_t open_file_limit);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace acc::rendezvous
