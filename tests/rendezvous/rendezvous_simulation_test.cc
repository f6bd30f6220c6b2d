// bench/rendezvous_scale's simulated nodes against the real thing: the same round of N nodes run
// once by ElasticRendezvous over StoreClients (one thread each) and once by the bench's NodeLoop,
// each through a proxy that records every request on the wire, connection by connection. The
// arrival order is fixed (each node joins once the one before it has its slot), so that every
// node's requests, keys and values included, can be compared one for one.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "acc/rendezvous/elastic_rendezvous.h"
#include "acc/rendezvous/protocol.h"
#include "acc/rendezvous/store_client.h"
#include "acc/rendezvous/store_server.h"
#include "node_loop.h"

namespace acc::rendezvous {
namespace {

using namespace std::chrono_literals;

// A TCP proxy in front of a store server that decodes what each client sends (2.2+ dialect) and
// keeps it, per connection. Thread per direction per connection: a test's handful of nodes.
class RecordingProxy {
 public:
  explicit RecordingProxy(int server_port) : server_port_(server_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int on = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(listener_, 128), 0);
    socklen_t length = sizeof(address);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~RecordingProxy() {
    stop_ = true;
    acceptor_.join();
    {
      std::lock_guard lock(mutex_);
      for (auto& c : connections_) {
        ::shutdown(c->client, SHUT_RDWR);
        ::shutdown(c->server, SHUT_RDWR);
      }
    }
    for (auto& c : connections_) {
      c->up.join();
      c->down.join();
      ::close(c->client);
      ::close(c->server);
    }
    ::close(listener_);
  }

  int port() const { return port_; }

  // Blocks until `count` connections have sent their SET of a slot (their join's answer came),
  // or 30 s pass; false then.
  bool await_joined(int count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 30s, [&] { return joined_ >= count; });
  }
  // Blocks until `count` connections have sent a node's last request, its MULTI_SET of node/RANK
  // (through this proxy, which may trail the client), or 30 s pass; false then.
  bool await_placed(int count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 30s, [&] { return placed_ >= count; });
  }

  // Every connection's requests, by the node id its SET of a slot carried.
  std::map<std::string, std::vector<Request>> by_node() {
    std::lock_guard lock(mutex_);
    std::map<std::string, std::vector<Request>> out;
    for (auto& c : connections_) {
      std::string id;
      for (const Request& r : c->requests)
        if (r.op == Op::kSet && r.keys[0].find("/slot/") != std::string::npos) id = r.values[0];
      out[id] = c->requests;
    }
    return out;
  }

 private:
  struct Connection {
    int client = -1, server = -1;
    std::vector<Request> requests;
    std::thread up, down;
  };

  void accept_loop() {
    while (!stop_) {
      pollfd ready{listener_, POLLIN, 0};
      if (::poll(&ready, 1, 50) != 1) continue;
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      address.sin_port = htons(static_cast<std::uint16_t>(server_port_));
      if (::connect(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        ADD_FAILURE() << "the proxy cannot reach the server";
        ::close(server);
        ::close(client);
        continue;
      }
      auto c = std::make_unique<Connection>();
      c->client = client;
      c->server = server;
      Connection* raw = c.get();
      std::lock_guard lock(mutex_);
      connections_.push_back(std::move(c));
      raw->up = std::thread([this, raw] { upstream(*raw); });
      raw->down = std::thread([raw] { copy(raw->server, raw->client); });
    }
  }

  static void copy(int from, int to) {
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::recv(from, buffer, sizeof(buffer), 0);
      if (n <= 0 || ::send(to, buffer, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    ::shutdown(to, SHUT_WR);
  }

  void upstream(Connection& c) {
    std::string pending;
    bool validated = false;
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::recv(c.client, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      pending.append(buffer, static_cast<std::size_t>(n));
      record(c, pending, validated);
      if (::send(c.server, buffer, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    ::shutdown(c.server, SHUT_WR);
  }

  void record(Connection& c, std::string& pending, bool& validated) {
    if (!validated) {
      const DialectDetection d = detect_dialect(pending, Dialect::kV1_13);
      if (!d.complete) return;
      ASSERT_EQ(d.dialect, Dialect::kV2_2) << "a client that does not start with VALIDATE";
      pending.erase(0, d.consumed);
      validated = true;
      std::lock_guard lock(mutex_);
      c.requests.push_back({Op::kValidate, {}, {}, kValidationMagic});
    }
    for (;;) {
      Request request;
      const ParseResult parsed = parse_request(pending, Dialect::kV2_2, Limits{}, request);
      if (parsed.status == ParseStatus::kIncomplete) return;
      ASSERT_EQ(parsed.status, ParseStatus::kComplete) << parsed.error;
      pending.erase(0, parsed.consumed);
      if (request.op == Op::kPing) request.number = 0;  // the nonce: a pid, or a node index
      std::lock_guard lock(mutex_);
      if (request.op == Op::kSet && request.keys[0].find("/slot/") != std::string::npos) {
        ++joined_;
        changed_.notify_all();
      }
      if (request.op == Op::kMultiSet && request.keys[0].find("/node/") != std::string::npos) {
        ++placed_;
        changed_.notify_all();
      }
      c.requests.push_back(std::move(request));
    }
  }

  int server_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int joined_ = 0;
  int placed_ = 0;
  std::vector<std::unique_ptr<Connection>> connections_;
};

std::string render(const std::vector<Request>& requests) {
  std::string text;
  for (const Request& r : requests) {
    text += std::string(op_name(r.op)) + " [";
    for (const auto& k : r.keys) text += k + " ";
    text += "] [";
    for (const auto& v : r.values) text += v + " ";
    text += "] " + std::to_string(r.number) + "\n";
  }
  return text;
}

std::unique_ptr<StoreServer> start_server() {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  auto server = std::make_unique<StoreServer>(options);
  server->start();
  return server;
}

struct Round {
  std::map<std::string, std::vector<Request>> requests;  // by node id
  std::map<std::string, int> ranks;                      // by node id
  std::map<std::string, std::int64_t> traffic;           // requests, by node id
  std::map<std::string, std::int64_t> bytes;             // sent and received, by node id
};

// The round as the launcher runs it: ElasticRendezvous over a StoreClient per node.
Round real_round(int nodes) {
  auto server = start_server();
  RecordingProxy proxy(server->port());
  std::vector<std::unique_ptr<StoreClient>> clients;
  for (int i = 0; i < nodes; ++i) {
    StoreClientOptions options;
    options.port = proxy.port();
    options.timeout = 60s;
    clients.push_back(std::make_unique<StoreClient>(options));
  }
  std::vector<RendezvousInfo> infos(static_cast<std::size_t>(nodes));
  std::vector<StoreClient::Traffic> traffic(static_cast<std::size_t>(nodes));
  std::vector<std::thread> threads;
  for (int i = 0; i < nodes; ++i) {
    if (i > 0) {
      EXPECT_TRUE(proxy.await_joined(i)) << "node " << i - 1 << " never joined";
    }
    threads.emplace_back([&, i] {
      StoreClient& client = *clients[static_cast<std::size_t>(i)];
      const StoreClient::Traffic before = client.traffic();
      RendezvousOptions options;
      options.run_id = "scale";
      options.min_nodes = options.max_nodes = nodes;
      options.join_timeout = 60s;
      ElasticRendezvous rendezvous(client, options, bench::simulated_node_id(i));
      infos[static_cast<std::size_t>(i)] = rendezvous.next_rendezvous();
      auto& t = traffic[static_cast<std::size_t>(i)];
      t.requests = client.traffic().requests - before.requests;
      t.bytes_sent = client.traffic().bytes_sent - before.bytes_sent +
                     client.traffic().bytes_received - before.bytes_received;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(proxy.await_placed(nodes));
  clients.clear();
  Round round;
  round.requests = proxy.by_node();
  for (int i = 0; i < nodes; ++i) {
    const std::string id = bench::simulated_node_id(i);
    round.ranks[id] = infos[static_cast<std::size_t>(i)].node_rank;
    round.traffic[id] = traffic[static_cast<std::size_t>(i)].requests;
    round.bytes[id] = traffic[static_cast<std::size_t>(i)].bytes_sent;
  }
  return round;
}

// The round as rendezvous_scale runs it: SimulatedNodes in one NodeLoop.
Round simulated_round(int nodes) {
  auto server = start_server();
  RecordingProxy proxy(server->port());
  std::vector<bench::NodeOutcome> outcomes(static_cast<std::size_t>(nodes));
  {
    bench::NodeLoopOptions options;
    options.port = proxy.port();
    options.block = 201;
    options.count = options.nodes = nodes;
    options.one_at_a_time = true;
    bench::NodeLoop loop(options, outcomes.data());
    EXPECT_EQ(loop.connect(std::chrono::steady_clock::now() + 60s), "");
    EXPECT_EQ(loop.run_round(std::chrono::steady_clock::now() + 60s), "");
    EXPECT_TRUE(proxy.await_placed(nodes));  // before the loop's connections close
  }
  Round round;
  round.requests = proxy.by_node();
  for (int i = 0; i < nodes; ++i) {
    const std::string id = bench::simulated_node_id(i);
    round.ranks[id] = outcomes[static_cast<std::size_t>(i)].rank;
    round.traffic[id] = outcomes[static_cast<std::size_t>(i)].requests;
    round.bytes[id] = outcomes[static_cast<std::size_t>(i)].bytes;
  }
  return round;
}

// 12 nodes: the ids sort otherwise than they arrive ("10.0.0.10:1010" before "10.0.0.2:1002"),
// so that the first arrival's sort and every node's rank are exercised.
TEST(RendezvousSimulationTest, SimulatedNodesSendWhatElasticRendezvousSendsRequestForRequest) {
  constexpr int kNodes = 12;
  const Round real = real_round(kNodes);
  const Round simulated = simulated_round(kNodes);
  ASSERT_EQ(real.requests.size(), static_cast<std::size_t>(kNodes));
  ASSERT_EQ(simulated.requests.size(), static_cast<std::size_t>(kNodes));
  for (int i = 0; i < kNodes; ++i) {
    const std::string id = bench::simulated_node_id(i);
    ASSERT_TRUE(real.requests.count(id)) << id;
    ASSERT_TRUE(simulated.requests.count(id)) << id;
    const auto& want = real.requests.at(id);
    EXPECT_GE(want.size(), 14u) << "the handshake and a round: " << render(want);
    EXPECT_EQ(render(simulated.requests.at(id)), render(want)) << "node " << i;
    EXPECT_EQ(simulated.requests.at(id), want) << "node " << i;
    EXPECT_EQ(simulated.ranks.at(id), real.ranks.at(id)) << "node " << i;
    EXPECT_EQ(simulated.traffic.at(id), real.traffic.at(id)) << "node " << i;
    EXPECT_EQ(simulated.bytes.at(id), real.bytes.at(id)) << "node " << i;
  }
  // The ids' order is not the arrival order: the ranks are a real permutation.
  EXPECT_NE(real.ranks.at(bench::simulated_node_id(2)), 2);
}

}  // namespace
}  // namespace acc::rendezvous
