// StoreClient (rendezvous/src/store_client.cc) on its own: what it does where the server is not
// there, does not answer, or goes; the keys it writes as PyTorch's clients write them; what a
// timeout leaves usable; what each call returns. Against our StoreServer on loopback and sockets
// that are not stores. (store_server_test.cc drives the server through this client too.)

#include "acc/rendezvous/store_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "acc/common/error.h"
#include "acc/rendezvous/store_server.h"
#include "refusing_port.h"

namespace acc::rendezvous {
namespace {

using namespace std::chrono_literals;

StoreServerOptions quiet_loopback_server() {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.log = [](std::string_view) {};
  return options;
}

StoreClientOptions client_options(int port) {
  StoreClientOptions options;
  options.port = port;
  options.connect_timeout = 10s;
  options.timeout = 10s;
  return options;
}

TEST(StoreClientTest, KeysCarryTheSlashPyTorchsClientsAdd) {
  StoreServer server(quiet_loopback_server());
  server.start();
  StoreClient client(client_options(server.port()));
  client.set("MASTER_ADDR", "node0");
  client.set("acc/x", "1");
  EXPECT_EQ(client.get("acc/x"), "1");  // a round trip: the SETs before it are served
  EXPECT_EQ(server.keys("/MASTER_ADDR"), std::vector<std::string>{"/MASTER_ADDR"});
  EXPECT_EQ(server.keys("/acc/"), std::vector<std::string>{"/acc/x"});
  EXPECT_TRUE(server.keys("MASTER_ADDR").empty());
}

TEST(StoreClientTest, EachCallReturnsWhatTheStoreHolds) {
  StoreServer server(quiet_loopback_server());
  server.start();
  StoreClient client(client_options(server.port()));
  const std::int64_t keys_before = client.num_keys();
  EXPECT_EQ(client.add("count", 5), 5);
  EXPECT_EQ(client.add("count", -2), 3);
  // compare_set: a missing key counts as empty; a missing key and another expectation return
  // the expectation and set nothing.
  EXPECT_EQ(client.compare_set("cas", "x", "y"), "x");
  EXPECT_FALSE(client.check({"cas"}));
  EXPECT_EQ(client.compare_set("cas", "", "first"), "first");
  EXPECT_EQ(client.compare_set("cas", "wrong", "second"), "first");
  EXPECT_EQ(client.compare_set("cas", "first", "second"), "second");
  client.append("log", "a");
  client.append("log", "b");
  EXPECT_EQ(client.get("log"), "ab");
  client.multi_set({"m1", "m2"}, {"v1", "v2"});
  EXPECT_EQ(client.multi_get({"m2", "m1"}), (std::vector<std::string>{"v2", "v1"}));
  EXPECT_THROW(client.multi_set({"m3"}, {}), StoreError);
  EXPECT_EQ(client.num_keys(), keys_before + 5);
  EXPECT_TRUE(client.delete_key("m1"));
  EXPECT_FALSE(client.delete_key("m1"));
  EXPECT_TRUE(client.check({"m2", "log"}));
  EXPECT_FALSE(client.check({"m1", "log"}));
}

TEST(StoreClientTest, TrafficCountsTheHandshakeAsOneRequestAndEveryCallAfter) {
  StoreServer server(quiet_loopback_server());
  server.start();
  StoreClient client(client_options(server.port()));
  EXPECT_EQ(client.traffic().requests, 1);
  EXPECT_EQ(client.traffic().bytes_received, 4);  // the PING's echo
  const std::int64_t sent = client.traffic().bytes_sent;
  client.set("k", "value");
  EXPECT_EQ(client.traffic().requests, 2);
  EXPECT_GT(client.traffic().bytes_sent, sent + 5);
  EXPECT_EQ(client.add("n", 1), 1);
  EXPECT_EQ(client.traffic().bytes_received, 4 + 8);
}

TEST(StoreClientTest, NoServerAtThePortIsATimeoutNamingItAfterTheConnectTimeout) {
  const acc::testing::RefusingPort nobody;
  StoreClientOptions options = client_options(nobody.port());
  options.connect_timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  try {
    StoreClient client(options);
    FAIL() << "connected to a port nobody serves";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("no store server answered at " + nobody.address() +
                                         " within 300 ms"),
              std::string::npos)
        << e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

// A port held by a service that accepts and never answers (here: the kernel's backlog of a
// socket nobody accepts on) is not a store: a handshake timeout, apart from a plain timeout so
// that a caller may retry it.
TEST(StoreClientTest, AListenerThatNeverAnswersIsAHandshakeTimeout) {
  acc::testing::RefusingPort silent;
  silent.listen();
  StoreClientOptions options = client_options(silent.port());
  options.handshake_timeout = 200ms;
  try {
    StoreClient client(options);
    FAIL() << "a silent listener passed the handshake";
  } catch (const StoreHandshakeTimeout& e) {
    EXPECT_NE(std::string(e.what()).find(silent.address() +
                                         " accepted the connection but did not answer as a store"),
              std::string::npos)
        << e.what();
  }
}

TEST(StoreClientTest, AWaitThatTimesOutLeavesTheClientUsable) {
  StoreServer server(quiet_loopback_server());
  server.start();
  StoreClient client(client_options(server.port()));
  EXPECT_THROW(client.wait({"never"}, 100ms), TimeoutError);
  client.set("after", "yes");
  EXPECT_EQ(client.get("after"), "yes");
}

// get() waits for its key up to the client's timeout and cancels the wait: still in step. A
// server that goes breaks the client once; every call after is a NetworkError that says so, not
// a read of a stream out of step.
TEST(StoreClientTest, AServerThatGoesMakesTheClientUnusable) {
  StoreServer server(quiet_loopback_server());
  server.start();
  StoreClient client(client_options(server.port()));
  client.set_timeout(100ms);
  EXPECT_THROW(client.get("missing"), TimeoutError);
  client.set("k", "v");
  EXPECT_EQ(client.get("k"), "v");
  server.stop();
  EXPECT_THROW(client.add("n", 1), NetworkError);
  EXPECT_EQ(client.fd(), -1);
  try {
    client.set("k", "v");
    FAIL() << "a broken client sent a request";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("closed after an earlier error"), std::string::npos)
        << e.what();
  }
}

TEST(StoreClientTest, ABegunWaitEndsWhenTheKeysExistAndNotBefore) {
  StoreServer server(quiet_loopback_server());
  server.start();
  StoreClient watcher(client_options(server.port()));
  StoreClient writer(client_options(server.port()));
  watcher.begin_wait({"a", "b"});
  EXPECT_FALSE(watcher.wait_ended());
  writer.set("a", "1");
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(watcher.wait_ended()) << "one of two keys";
  writer.set("b", "2");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool ended = false;
  while (!ended && std::chrono::steady_clock::now() < deadline) {
    ended = watcher.wait_ended();
    if (!ended) std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(ended);
  EXPECT_EQ(watcher.get("b"), "2");  // usable for requests again
}

}  // namespace
}  // namespace acc::rendezvous
