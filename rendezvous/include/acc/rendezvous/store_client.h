#pragma once

// A small blocking client of the store, speaking the 2.2+ dialect of PyTorch's TCPStore protocol.
// It is for the launcher, which must not link LibTorch; workers keep using PyTorch's own clients.
// Keys get the "/" prefix PyTorch's clients add, so both see the same keys: a value set here under
// "MASTER_ADDR" is what torch.distributed.TCPStore.get("MASTER_ADDR") returns.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "acc/common/error.h"
#include "acc/rendezvous/key_value_store.h"

namespace acc::rendezvous {

struct StoreClientOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  // How long the constructor keeps retrying to connect (a server may start after its clients).
  std::chrono::milliseconds connect_timeout{60'000};
  // How long get() and wait() wait for keys, and any reply may take, before TimeoutError.
  std::chrono::milliseconds timeout{300'000};
  // How long the server's first reply (the PING's echo) may take once the connection is
  // accepted; 0: `timeout`. A short one tells a port held by another service (it accepts and
  // never answers) from a store, and lets a caller that retries look for a stop signal between
  // tries.
  std::chrono::milliseconds handshake_timeout{0};
  // A launcher's connection: after the handshake it asks whether the store demands the job
  // secret (one more round trip) and, where it does, proves it knows `job_secret`
  // (acc/rendezvous/job_secret.h). ConfigError, in one line, when the store demands it and
  // `job_secret` is empty or not the job's.
  bool job_member = false;
  std::string job_secret;
};

// A server accepted the connection and did not answer the handshake within
// StoreClientOptions::handshake_timeout: another service on that port, or a store too loaded.
class StoreHandshakeTimeout : public TimeoutError {
 public:
  using TimeoutError::TimeoutError;
};

// A server accepted the connection and then closed or reset it, or answered nonsense, during the
// handshake: a server going away (or not a store). Worth another try, as a timeout is.
class StoreHandshakeFailed : public NetworkError {
 public:
  using NetworkError::NetworkError;
};

// Not thread-safe: one request at a time (use one client per thread). Every method blocks for one
// round trip, or longer where it says so. Any method throws NetworkError when the connection
// breaks and TimeoutError when a reply does not come in time; after either, the client is unusable
// (every later call throws NetworkError).
class StoreClient : public KeyValueStore {
 public:
  // Connects (retrying until options.connect_timeout), then VALIDATEs and PINGs the server.
  // Throws TimeoutError if no server answered in time, NetworkError if the host does not resolve
  // or the server does not echo the ping.
  explicit StoreClient(StoreClientOptions options);
  ~StoreClient() override;
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  void set(std::string_view key, std::string_view value) override;
  // Waits up to the timeout for the key to exist, then returns its value.
  std::string get(std::string_view key) override;
  // Adds `delta` to the integer stored under `key` (created at 0) and returns the new value.
  // The server closes the connection if the value is not an integer (then NetworkError).
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  // Sets `desired` if the value is `expected` (a missing key counts as empty) and returns the
  // value now stored; when the key is missing and `expected` is not empty, returns `expected`.
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override;
  // Blocks until every key exists or `timeout` passes (TimeoutError naming the keys; the client
  // stays usable since the wait is cancelled on the server).
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys) { wait(keys, options_.timeout); }
  // A wait whose end is an event for the caller's own poll loop: sends WAIT for `keys` and
  // returns at once. fd() becomes readable when every key exists (or the connection breaks);
  // then wait_ended() reads the reply. No other request may go on this client meanwhile, so a
  // watch keeps a connection of its own; dropping the client cancels the wait (the server drops
  // a closed connection's waits). Throws NetworkError when the connection is broken.
  void begin_wait(const std::vector<std::string>& keys);
  // Never blocks: true once the reply to begin_wait() came (the keys exist), false while it has
  // not. Throws NetworkError when the connection broke meanwhile (the store is gone).
  bool wait_ended();
  // The connection's descriptor, for poll(); -1 after an error closed it.
  int fd() const { return fd_; }
  // True when every key exists now; never blocks on the keys.
  bool check(const std::vector<std::string>& keys) override;
  // Waits for all keys (as get()), then returns their values in order.
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) override;
  void append(std::string_view key, std::string_view value);
  // True when the key existed.
  bool delete_key(std::string_view key);
  // Keys in the store, counting those of every client (PyTorch's "init/" key included).
  std::int64_t num_keys();

  // What this client has exchanged so far (the rendezvous benchmark reports it per node).
  struct Traffic {
    std::int64_t requests = 0;  // requests written (the connection's VALIDATE and PING go as one)
    std::int64_t bytes_sent = 0;
    std::int64_t bytes_received = 0;
  };
  const Traffic& traffic() const { return traffic_; }

  // From the next request on, the longest any reply may take (options.timeout until then).
  void set_timeout(std::chrono::milliseconds timeout) { options_.timeout = timeout; }

 private:
  void send(std::string_view bytes);
  // Reads exactly `size` bytes; false when `timeout` passed first.
  bool receive(char* data, std::size_t size, std::chrono::milliseconds timeout);
  // As receive(), but a timeout closes the connection and throws TimeoutError.
  void receive_all(char* data, std::size_t size, std::chrono::milliseconds timeout);
  std::uint8_t receive_u8(std::chrono::milliseconds timeout);
  std::int64_t receive_i64();
  std::string receive_bytes();
  [[noreturn]] void broken(const std::string& what);
  // StoreClientOptions::job_member's question and proof.
  void join_job(const std::string& where);
  std::string prefixed(std::string_view key) const;
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;

  StoreClientOptions options_;
  int fd_ = -1;
  Traffic traffic_;
};

}  // namespace acc::rendezvous
