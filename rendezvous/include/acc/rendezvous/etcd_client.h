#pragma once

// The rendezvous store on an etcd cluster (--rdzv_backend etcd-v2): the KeyValueStore operations
// over etcd's v3 API, through its HTTP/JSON gateway (POST /v3/kv/range, /v3/kv/put, /v3/kv/txn;
// keys and values in base64). Sets are puts, add and compare_set are transactions that compare
// the key's revision (or value) before they write, and waits are etcd watches (POST /v3/watch, a
// stream the member answers when a key is written): a wait ends when the key is set, not at a
// poll period. Keys get options.key_prefix in front.
//
// Several members can be given: the client talks to one at a time and moves on to the next when
// it cannot be reached or answers with a server error (no leader during an election, a member
// shutting down), so the rendezvous outlives any minority of the cluster. A request that broke
// after the member received it may have been applied: resending a set or compare_set is
// harmless, and an add checks a receipt it wrote in the same transaction, so that it never adds
// twice.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "acc/rendezvous/key_value_store.h"

namespace acc::rendezvous {

class HttpConnection;
class TlsContext;
class TlsSession;

// A watch on one etcd key, on a connection of its own, for a caller's poll loop: the agent's
// loop, which waits on its workers, also waits on fd(), so that a key another node writes wakes
// it at once. Made by EtcdClient::watch(); no thread.
class EtcdWatch {
 public:
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // Readable when the key has been written (or deleted) since the watch began, or the stream
  // ended or broke. The same descriptor for the watch's life: once fired() has said so, it is
  // never readable again (a pipe nobody writes), so a poll loop that keeps it does not spin.
  int fd() const { return fd_; }
  // Never blocks: true once, when the key was written or the stream ended (the caller then
  // reads the store and learns which); false otherwise (etcd only confirmed the watch).
  bool fired();
  // fired() has said true: EtcdClient::rewatch() may start it again.
  bool ended() const { return done_; }

 private:
  friend class EtcdClient;
  // Connected to `address` (host:port) within `timeout` (through `tls` when not null), the
  // watch request sent; NetworkError when the member cannot be reached, ConfigError when it
  // refuses the TLS handshake.
  EtcdWatch(const std::string& address, const std::string& request,
            std::chrono::milliseconds timeout, TlsContext* tls);
  // Takes `other`'s connection onto this watch's descriptor number, so that a poll set holding
  // fd() watches the new stream.
  void take_over(EtcdWatch& other);
  // Takes what the stream holds now; true when it says the key changed or it ended.
  bool read_stream();
  // Sends the whole request (through TLS with https); false when the connection broke.
  bool send_all(std::string_view message);
  void quiet();

  int fd_ = -1;                      // the socket, then a duplicate of quiet_'s read end
  std::unique_ptr<TlsSession> tls_;  // over fd_, with https
  int quiet_read_ = -1;
  int quiet_write_ = -1;
  bool done_ = false;
  std::string received_;  // the reply as it came: status line, headers, chunks
  std::string body_;      // the chunks' data
  size_t parsed_ = 0;     // how much of received_ is in body_ (or headers) already
  bool in_body_ = false;
};

// https to the members (--rdzv_conf protocol=https,cacert=,cert=,key=, as torchrun's etcd
// rendezvous takes them): the members' certificates are verified against ca_file (the system's
// CAs where empty) and the host as the endpoint names it; cert_file and key_file (PEM) are
// presented to members that ask for a client certificate (key_file empty: the key is in
// cert_file).
struct EtcdTls {
  bool enabled = false;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

struct EtcdClientOptions {
  std::vector<std::string> endpoints;  // the members' client URLs as host:port, tried in turn
  EtcdTls tls;
  std::string key_prefix = "/acc-launch/";
  // How long get(), multi_get() and wait() without a timeout wait for keys, and how long one
  // request keeps trying the members before NetworkError.
  std::chrono::milliseconds timeout{60'000};
};

// Not thread-safe: one request at a time. Every operation blocks for at least one HTTP round
// trip; while no member answers, for up to options.timeout, then throws NetworkError naming the
// endpoints and the last failure. A reply that is not etcd's JSON throws StoreError.
class EtcdClient : public KeyValueStore {
 public:
  // Asks the members for their status until one answers (NetworkError after options.timeout).
  // Throws ConfigError when no endpoint is given, when a TLS file cannot be read, and when a
  // member refuses the TLS handshake (its certificate not signed by ca_file, or ours refused).
  explicit EtcdClient(EtcdClientOptions options);
  ~EtcdClient() override;
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  void set(std::string_view key, std::string_view value) override;
  std::string get(std::string_view key) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) override;

  // The member this client talks to now (host:port).
  const std::string& endpoint() const;

  // A watch on `key` from now on, on a connection of its own to the current member: it fires at
  // once when the key exists already (from its last write), else when it is written. One read
  // and one connection, at most `connect_timeout` for the connection; NetworkError as call().
  std::unique_ptr<EtcdWatch> watch(std::string_view key, std::chrono::milliseconds connect_timeout);
  // Starts an ended watch again on `key` from now on, as watch() does, keeping its descriptor
  // (a stream that broke, with the member it came from: a leader change, a restart). Throws as
  // watch(); the watch stays ended then.
  void rewatch(EtcdWatch& watch, std::string_view key, std::chrono::milliseconds connect_timeout);

 private:
  // A key's value and the revision that last modified it (defined in etcd_client.cc).
  struct Entry;
  // POSTs `body` to `path` on the current member, moving on through the members (with a pause
  // after each full turn) until one answers 200 or options_.timeout passes. Returns the body.
  std::string call(std::string_view path, const std::string& body);
  // Every key's entry now, in one transaction per 100 keys (etcd allows 128 operations in one);
  // `revision`, when given, gets the store's revision the first transaction read at.
  std::vector<std::optional<Entry>> read(const std::vector<std::string>& keys,
                                         std::int64_t* revision = nullptr);
  // The watch request's body for `key`: from the key's last write when it exists, else from the
  // revision after `revision`.
  std::string watch_request(std::string_view key, const std::optional<Entry>& entry,
                            std::int64_t revision) const;
  // Waits until every key exists, on a watch of the first missing one at a time; TimeoutError
  // after `timeout`.
  std::vector<std::string> await(const std::vector<std::string>& keys,
                                 std::chrono::milliseconds timeout);
  // The key with options_.key_prefix in front, in base64 as the gateway takes it.
  std::string encoded_key(std::string_view key) const;

  EtcdClientOptions options_;
  std::shared_ptr<TlsContext> tls_;  // with https, shared by members_ and the watches
  std::vector<std::unique_ptr<HttpConnection>> members_;
  size_t current_ = 0;
  // add() writes "<attempt>:<value>" here in the same transaction (see add()); removed by the
  // destructor.
  std::string receipt_key_;
  std::uint64_t adds_ = 0;
};

}  // namespace acc::rendezvous
