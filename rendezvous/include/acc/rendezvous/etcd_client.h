#pragma once

// The rendezvous store on an etcd cluster (--rdzv_backend etcd-v2): the KeyValueStore operations
// over etcd's v3 API, through its HTTP/JSON gateway (POST /v3/kv/range, /v3/kv/put, /v3/kv/txn;
// keys and values in base64). Sets are puts, add and compare_set are transactions that compare
// the key's revision (or value) before they write, and waits poll with a growing pause (5 ms to
// 100 ms). Keys get options.key_prefix in front.
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
#include <vector>

#include "acc/rendezvous/key_value_store.h"

namespace acc::rendezvous {

class HttpConnection;

struct EtcdClientOptions {
  std::vector<std::string> endpoints;  // the members' client URLs as host:port, tried in turn
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
  // Throws ConfigError when no endpoint is given.
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

 private:
  // A key's value and the revision that last modified it (defined in etcd_client.cc).
  struct Entry;
  // POSTs `body` to `path` on the current member, moving on through the members (with a pause
  // after each full turn) until one answers 200 or options_.timeout passes. Returns the body.
  std::string call(std::string_view path, const std::string& body);
  // Every key's entry now, in one transaction per 100 keys (etcd allows 128 operations in one).
  std::vector<std::optional<Entry>> read(const std::vector<std::string>& keys);
  // Polls read() until every key exists; TimeoutError after `timeout`.
  std::vector<std::string> await(const std::vector<std::string>& keys,
                                 std::chrono::milliseconds timeout);
  // The key with options_.key_prefix in front, in base64 as the gateway takes it.
  std::string encoded_key(std::string_view key) const;

  EtcdClientOptions options_;
  std::vector<std::unique_ptr<HttpConnection>> members_;
  size_t current_ = 0;
  // add() writes "<attempt>:<value>" here in the same transaction (see add()); removed by the
  // destructor.
  std::string receipt_key_;
  std::uint64_t adds_ = 0;
};

}  // namespace acc::rendezvous
