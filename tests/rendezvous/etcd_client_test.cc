#include "acc/rendezvous/etcd_client.h"

#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

#include "acc/common/error.h"
#include "acc/rendezvous/elastic_rendezvous.h"
#include "etcd_process.h"
#include "refusing_port.h"

namespace acc::rendezvous {
namespace {

using namespace std::chrono_literals;

// One real single-member etcd on loopback for each test (each test runs in its own process).
// Skips the test where etcd-server is not installed.
class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!acc::testing::EtcdProcess::installed())
      GTEST_SKIP() << "no " << acc::testing::EtcdProcess::binary()
                   << " (Debian's etcd-server; or set ACC_ETCD)";
    std::string log;
    ASSERT_TRUE(etcd_.start(log)) << "etcd exited before it served:\n" << log;
    endpoint_ = etcd_.endpoint();
  }

  // A client of the test's etcd (its constructor waits until etcd answers).
  std::unique_ptr<EtcdClient> client(std::vector<std::string> endpoints = {}) {
    EtcdClientOptions options;
    options.endpoints = endpoints.empty() ? std::vector{endpoint_} : endpoints;
    options.key_prefix = "/test/";
    options.timeout = 20s;
    return std::make_unique<EtcdClient>(options);
  }

  acc::testing::EtcdProcess etcd_;
  std::string endpoint_;
};

TEST_F(EtcdClientTest, SetThenGetReturnsTheValueWhateverItsBytes) {
  auto etcd = client();
  const std::string value("a\0b\n\"{}\xff", 8);
  etcd->set("k", value);
  EXPECT_EQ(etcd->get("k"), value);
  etcd->set("k", "");
  EXPECT_EQ(etcd->get("k"), "");
  EXPECT_TRUE(etcd->check({"k"}));
  EXPECT_FALSE(etcd->check({"k", "missing"}));
}

TEST_F(EtcdClientTest, AddsFromRacingClientsAllCount) {
  constexpr int kClients = 4, kAdds = 25;
  std::vector<std::future<void>> racers;
  for (int i = 0; i < kClients; ++i) {
    racers.push_back(std::async(std::launch::async, [this] {
      auto etcd = client();
      for (int j = 0; j < kAdds; ++j) etcd->add("counter", 1);
    }));
  }
  for (auto& racer : racers) racer.get();
  auto etcd = client();
  EXPECT_EQ(etcd->add("counter", 0), kClients * kAdds);
  EXPECT_EQ(etcd->add("counter", -5), kClients * kAdds - 5);
  EXPECT_EQ(etcd->add("fresh", 0), 0);
  EXPECT_FALSE(etcd->check({"fresh"}));  // adding 0 only reads
  etcd->set("text", "x");
  EXPECT_THROW(etcd->add("text", 1), StoreError);
}

TEST_F(EtcdClientTest, CompareSetFollowsTheStoreSemantics) {
  auto etcd = client();
  EXPECT_EQ(etcd->compare_set("k", "old", "new"), "old");  // missing, expected not empty
  EXPECT_FALSE(etcd->check({"k"}));
  EXPECT_EQ(etcd->compare_set("k", "", "first"), "first");  // missing counts as empty
  EXPECT_EQ(etcd->compare_set("k", "", "second"), "first");
  EXPECT_EQ(etcd->compare_set("k", "other", "second"), "first");
  EXPECT_EQ(etcd->compare_set("k", "first", "second"), "second");
  EXPECT_EQ(etcd->get("k"), "second");
}

TEST_F(EtcdClientTest, WaitReturnsWhenAnotherClientSetsTheKeysAndTimesOutOtherwise) {
  auto etcd = client();
  auto waiter = std::async(std::launch::async, [this] { client()->wait({"a", "b"}, 20s); });
  etcd->set("a", "1");
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(waiter.wait_for(0ms), std::future_status::timeout);
  etcd->set("b", "2");
  waiter.get();
  EXPECT_THROW(etcd->wait({"a", "never"}, 100ms), TimeoutError);
  etcd->set("never", "now");  // the client stays usable after a timeout
  EXPECT_EQ(etcd->multi_get({"a", "never"}), (std::vector<std::string>{"1", "now"}));
}

TEST_F(EtcdClientTest, MultiSetAndMultiGetSpanMoreKeysThanOneTransactionAllows) {
  auto etcd = client();
  std::vector<std::string> keys, values;
  for (int i = 0; i < 250; ++i) {
    keys.push_back("many/" + std::to_string(i));
    values.push_back(std::to_string(i * i));
  }
  etcd->multi_set(keys, values);
  EXPECT_EQ(etcd->multi_get(keys), values);
}

TEST_F(EtcdClientTest, MovesOnFromAnEndpointThatDoesNotAnswer) {
  const acc::testing::RefusingPort dead;
  auto etcd = client({dead.address(), endpoint_});
  etcd->set("k", "v");
  EXPECT_EQ(etcd->get("k"), "v");
  EXPECT_EQ(etcd->endpoint(), endpoint_);
}

TEST_F(EtcdClientTest, NoMemberAnsweringIsANetworkErrorNamingTheEndpoints) {
  const acc::testing::RefusingPort nobody;
  EtcdClientOptions options;
  options.endpoints = {nobody.address()};
  options.timeout = 300ms;
  try {
    EtcdClient etcd(options);
    FAIL() << "connected to nothing";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find(options.endpoints[0]), std::string::npos) << e.what();
  }
  options.endpoints.clear();
  EXPECT_THROW(EtcdClient{options}, ConfigError);
}

// A socket listening on a loopback port the kernel picked (set in `port`).
int loopback_listener(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::listen(fd, 8);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  port = ntohs(address.sin_port);
  return fd;
}

// A web server where etcd was expected: every request gets its error page, several lines of
// HTML, with 404 (a request etcd would not refuse so: the client stops at the first reply).
class ErrorPageServer {
 public:
  ErrorPageServer() {
    int port = 0;
    listener_ = loopback_listener(port);
    address_ = "127.0.0.1:" + std::to_string(port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ErrorPageServer() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  const std::string& str() const { return address_; }

 private:
  void serve();

  int listener_ = -1;
  std::string address_;
  std::thread thread_;
};

// Reads one HTTP message (headers, then Content-Length bytes) from `fd`; empty on EOF.
std::string read_message(int fd) {
  std::string data;
  char buffer[4096];
  for (;;) {
    const size_t end = data.find("\r\n\r\n");
    if (end != std::string::npos) {
      const size_t at = data.find("Content-Length: ");
      const size_t length = at < end ? std::stoul(data.substr(at + 16)) : 0;
      if (data.size() >= end + 4 + length) return data;
    }
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return "";
    data.append(buffer, static_cast<size_t>(n));
  }
}

int raw_connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void ErrorPageServer::serve() {
  const std::string page =
      "<html>\r\n<head><title>404 Not Found</title></head>\r\n"
      "<body>\r\n<center><h1>404 Not Found</h1></center>\r\n</body>\r\n"
      "</html>\r\n";
  const std::string reply =
      "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n"
      "Content-Length: " +
      std::to_string(page.size()) + "\r\n\r\n" + page;
  for (;;) {
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    while (!read_message(client).empty())
      if (::write(client, reply.data(), reply.size()) < 0) break;
    ::close(client);
  }
}

TEST(EtcdClientErrorTest, AWebServersErrorPageIsNamedOnOneLine) {
  const ErrorPageServer server;
  EtcdClientOptions options;
  options.endpoints = {server.str()};
  options.timeout = 30s;  // not reached: the first reply ends it
  try {
    EtcdClient etcd(options);
    etcd.set("k", "v");
    FAIL() << "a web server's error page was taken for etcd";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.find('\r'), std::string::npos) << what;
    EXPECT_NE(what.find("(HTTP 404): <html> <head><title>404 Not Found</title></head> <body>"),
              std::string::npos)
        << what;
  }
}

// A proxy in front of etcd that passes on every request but, once, drops the reply to the first
// transaction that writes (closes the connection instead): a reply lost after etcd applied it.
class ReplyDroppingProxy {
 public:
  explicit ReplyDroppingProxy(int etcd_port) : etcd_port_(etcd_port) {
    listener_ = loopback_listener(port_);
    thread_ = std::thread([this] { serve(); });
  }
  ~ReplyDroppingProxy() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  int port() const { return port_; }
  int dropped() const { return dropped_; }

 private:
  void serve() {
    for (;;) {
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      const int upstream = raw_connect_to(etcd_port_);
      for (;;) {
        const std::string request = read_message(client);
        if (request.empty() || ::write(upstream, request.data(), request.size()) < 0) break;
        const std::string reply = read_message(upstream);
        if (dropped_ == 0 && request.find("request_put") != std::string::npos) {
          ++dropped_;
          break;
        }
        if (reply.empty() || ::write(client, reply.data(), reply.size()) < 0) break;
      }
      ::close(upstream);
      ::close(client);
    }
  }

  int etcd_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> dropped_{0};
  std::thread thread_;
};

TEST_F(EtcdClientTest, AnAddWhoseReplyWasLostIsNotMadeTwice) {
  auto direct = client();
  ReplyDroppingProxy proxy(std::stoi(endpoint_.substr(endpoint_.rfind(':') + 1)));
  auto through_proxy = client({"127.0.0.1:" + std::to_string(proxy.port())});
  EXPECT_EQ(through_proxy->add("n", 1), 1);
  EXPECT_EQ(proxy.dropped(), 1);
  EXPECT_EQ(direct->get("n"), "1");
  EXPECT_EQ(through_proxy->add("n", 2), 3);
}

TEST_F(EtcdClientTest, ThreeNodesMeetInOneRoundWithDistinctRanks) {
  RendezvousOptions options;
  options.run_id = "job";
  options.min_nodes = 3;
  options.max_nodes = 3;
  options.join_timeout = 20s;
  std::vector<std::future<RendezvousInfo>> nodes;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::async(std::launch::async, [this, options, i] {
      auto etcd = client();
      ElasticRendezvous rendezvous(*etcd, options, "node" + std::to_string(i));
      return rendezvous.next_rendezvous();
    }));
  }
  std::set<int> ranks;
  for (int i = 0; i < 3; ++i) {
    const RendezvousInfo info = nodes[static_cast<size_t>(i)].get();
    EXPECT_EQ(info.round, 0);
    EXPECT_EQ(info.num_nodes, 3);
    EXPECT_EQ(info.node_rank, i);  // the node ids' sorted order
    ranks.insert(info.node_rank);
  }
  EXPECT_EQ(ranks.size(), 3u);
}

bool readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1 && (p.revents & POLLIN);
}

// The transactions etcd has served (its /metrics, grpc_server_handled_total of Txn, code OK):
// every read of this client is one.
long transactions_served(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(endpoint.substr(0, colon).c_str(), endpoint.substr(colon + 1).c_str(), &hints,
                    &found) != 0)
    return -1;
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool connected = ::connect(fd, found->ai_addr, found->ai_addrlen) == 0;
  ::freeaddrinfo(found);
  std::string reply;
  if (connected) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: etcd\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[65536];
      ssize_t n;
      while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) reply.append(buffer, n);
    }
  }
  ::close(fd);
  const std::string name =
      "grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"Txn\",grpc_service=\"etcdserverpb."
      "KV\",grpc_type=\"unary\"} ";
  const auto at = reply.find(name);
  return at == std::string::npos ? -1 : std::atol(reply.c_str() + at + name.size());
}

TEST_F(EtcdClientTest, AWatchFiresWhenAnotherClientWritesTheKeyAndIsQuietBefore) {
  auto watcher = client();
  auto writer = client();
  auto watch = watcher->watch("next", 5s);
  ASSERT_GE(watch->fd(), 0);
  // etcd confirms the watch ("created"): the descriptor may wake for it, but it has not fired.
  for (int i = 0; i < 3 && readable(watch->fd(), 300ms); ++i) EXPECT_FALSE(watch->fired());
  EXPECT_FALSE(readable(watch->fd(), 200ms)) << "nothing written: nothing more to read";
  writer->set("other", "x");
  EXPECT_FALSE(readable(watch->fd(), 200ms)) << "another key does not wake it";
  writer->set("next", "open");
  ASSERT_TRUE(readable(watch->fd(), 10s));
  bool fired = watch->fired();
  // The confirmation and the event may come in two reads.
  for (int i = 0; i < 5 && !fired && readable(watch->fd(), 2s); ++i) fired = watch->fired();
  EXPECT_TRUE(fired);
  EXPECT_FALSE(readable(watch->fd(), 100ms)) << "quiet once fired, so a poll loop does not spin";
  EXPECT_FALSE(watch->fired()) << "fires once";
}

TEST_F(EtcdClientTest, AWatchOnAKeyThatIsAlreadySetFiresAtOnce) {
  auto etcd = client();
  etcd->set("next", "open");
  etcd->set("other", "x");  // the store's revision moves past the key's own
  auto watch = etcd->watch("next", 5s);
  bool fired = false;
  for (int i = 0; i < 5 && !fired && readable(watch->fd(), 5s); ++i) fired = watch->fired();
  EXPECT_TRUE(fired) << "a key set before the watch began is not missed";
}

TEST_F(EtcdClientTest, AWaitEndsOnTheWriteWithoutPollingTheStore) {
  auto waiter = client();
  auto writer = client();
  const long before = transactions_served(endpoint_);
  ASSERT_GE(before, 0) << "etcd's /metrics has no Txn count";
  // A wait that runs out: 1.5 s of a poll every 100 ms would be 15 reads or more.
  EXPECT_THROW(waiter->wait({"never"}, 1500ms), TimeoutError);
  const long reads = transactions_served(endpoint_) - before;
  EXPECT_LE(reads, 3) << "a wait reads the key, watches it, and reads again at its end only";
  // And a wait ends when the key is written.
  auto waited = std::async(std::launch::async, [&] { waiter->wait({"a", "b"}, 20s); });
  EXPECT_EQ(waited.wait_for(300ms), std::future_status::timeout);
  writer->set("b", "1");
  EXPECT_EQ(waited.wait_for(300ms), std::future_status::timeout) << "a is not set yet";
  writer->set("a", "1");
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  waited.get();
}

TEST_F(EtcdClientTest, AnEndedWatchStartedAgainKeepsItsDescriptorAndFiresOnTheNextWrite) {
  auto watcher = client();
  auto writer = client();
  auto watch = watcher->watch("next", 5s);
  const int fd = watch->fd();
  writer->set("next", "1");
  bool fired = false;
  for (int i = 0; i < 5 && !fired && readable(fd, 10s); ++i) fired = watch->fired();
  ASSERT_TRUE(fired);
  ASSERT_TRUE(watch->ended());
  writer->set("later", "x");  // the store moves on; the key's own write is before the rewatch
  watcher->rewatch(*watch, "gone", 5s);
  EXPECT_EQ(watch->fd(), fd) << "the descriptor a poll loop holds stays valid";
  EXPECT_FALSE(watch->ended());
  for (int i = 0; i < 3 && readable(fd, 300ms); ++i) EXPECT_FALSE(watch->fired());
  writer->set("gone", "1");
  fired = false;
  for (int i = 0; i < 5 && !fired && readable(fd, 10s); ++i) fired = watch->fired();
  EXPECT_TRUE(fired) << "the new stream wakes the same descriptor";
}

}  // namespace
}  // namespace acc::rendezvous
