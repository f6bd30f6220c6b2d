// LibTorch's own C++ client, c10d::TCPStore with is_master=false, against our StoreServer: what
// the runtime and every C++ worker will do. Built only where LibTorch is found.

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "acc/rendezvous/store_client.h"
#include "acc/rendezvous/store_server.h"

namespace acc::rendezvous {
namespace {

using namespace std::chrono_literals;

std::vector<uint8_t> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}
std::string text(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

class TorchClientTest : public ::testing::Test {
 protected:
  TorchClientTest() : server_(options()) { server_.start(); }

  static StoreServerOptions options() {
    StoreServerOptions options;
    options.host = "127.0.0.1";
    options.log = [](std::string_view) {};
    return options;
  }

  std::unique_ptr<c10d::TCPStore> torch_client(std::chrono::milliseconds timeout = 20s,
                                               c10::optional<std::size_t> world_size = {}) {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(server_.port());
    options.isServer = false;
    options.numWorkers = world_size;
    options.timeout = timeout;
    return std::make_unique<c10d::TCPStore>("127.0.0.1", options);
  }

  StoreServer server_;
};

TEST_F(TorchClientTest, SetGetAddCompareSetDeleteAndNumKeysBehaveAsOnPytorchsServer) {
  auto store = torch_client();
  store->set("k", bytes("v"));
  EXPECT_EQ(text(store->get("k")), "v");
  EXPECT_EQ(store->add("n", 3), 3);
  EXPECT_EQ(store->add("n", -1), 2);
  EXPECT_EQ(text(store->get("n")), "2");
  EXPECT_EQ(text(store->compareSet("k", bytes("v"), bytes("w"))), "w");
  EXPECT_EQ(text(store->compareSet("k", bytes("v"), bytes("x"))), "w");
  EXPECT_EQ(text(store->compareSet("fresh", {}, bytes("new"))), "new");
  EXPECT_EQ(text(store->compareSet("absent", bytes("e"), bytes("d"))), "e");
  EXPECT_TRUE(store->check({"k", "n", "fresh"}));
  EXPECT_FALSE(store->check({"k", "absent"}));
  EXPECT_EQ(store->getNumKeys(), 3);
  EXPECT_TRUE(store->deleteKey("fresh"));
  EXPECT_FALSE(store->deleteKey("fresh"));
  EXPECT_EQ(store->getNumKeys(), 2);
}

TEST_F(TorchClientTest, WorldSizeRegistersOnTheInitKeyWithoutWaiting) {
  auto first = torch_client(20s, 3);
  auto second = torch_client(20s, 3);
  StoreClientOptions options;
  options.port = server_.port();
  StoreClient ours(options);
  // c10d's clients ADD "init/" (without the "/" prefix) once each when given a world size.
  EXPECT_EQ(ours.num_keys(), 1);
  EXPECT_EQ(first->add("probe", 0), 0);
  EXPECT_EQ(text(second->get("probe")), "0");
}

TEST_F(TorchClientTest, WaitWithoutTimeoutReturnsWhenAnotherClientSetsTheKeys) {
  auto waiter = torch_client();
  auto setter = torch_client();
  auto waited = std::async(std::launch::async, [&] { waiter->wait({"a", "b"}); });
  setter->set("a", bytes("1"));
  EXPECT_EQ(waited.wait_for(200ms), std::future_status::timeout);
  setter->set("b", bytes("2"));
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  waited.get();
  EXPECT_EQ(text(waiter->get("b")), "2");
}

TEST_F(TorchClientTest, WaitWithTimeoutThrowsWhenTheKeyNeverComes) {
  auto store = torch_client();
  auto start = std::chrono::steady_clock::now();
  EXPECT_ANY_THROW(store->wait({"never"}, 300ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  // The server is unaffected: another client goes on.
  auto other = torch_client();
  other->set("never", bytes("now"));
  EXPECT_EQ(text(other->get("never")), "now");
}

TEST_F(TorchClientTest, WatchKeyCallbackSeesEveryUpdate) {
  auto watcher = torch_client();
  auto writer = torch_client();
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> seen;
  try {
    watcher->watchKey("w", [&](c10::optional<std::string>, c10::optional<std::string> value) {
      std::lock_guard lock(mutex);
      seen.push_back(value.value_or("<none>"));
      changed.notify_all();
    });
  } catch (const c10::Error& e) {
    // PyTorch 2.x's client dropped watchKey ("deprecated, no implementation support it").
    if (std::string(e.what()).find("deprecated") != std::string::npos)
      GTEST_SKIP() << "this LibTorch's TCPStore has no watchKey";
    throw;
  }
  writer->set("w", bytes("one"));
  writer->set("w", bytes("two"));
  std::unique_lock lock(mutex);
  ASSERT_TRUE(changed.wait_for(lock, 10s, [&] { return seen.size() >= 2; }));
  EXPECT_EQ(seen, (std::vector<std::string>{"one", "two"}));
}

TEST_F(TorchClientTest, ThirtyTwoClientsAddingAtOnceGetDistinctCounts) {
  constexpr int kClients = 32;
  constexpr int kAdds = 200;
  std::vector<std::vector<std::int64_t>> results(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto store = torch_client();
      for (int j = 0; j < kAdds; ++j) results[i].push_back(store->add("counter", 1));
      store->set("done/" + std::to_string(i), bytes("1"));
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<std::int64_t> all;
  for (const auto& r : results) all.insert(r.begin(), r.end());
  EXPECT_EQ(all.size(), static_cast<std::size_t>(kClients * kAdds));
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kClients * kAdds);
}

TEST_F(TorchClientTest, OurClientAndLibTorchsClientShareKeys) {
  auto store = torch_client();
  StoreClientOptions options;
  options.port = server_.port();
  StoreClient ours(options);
  ours.set("MASTER_ADDR", "node0");
  EXPECT_EQ(text(store->get("MASTER_ADDR")), "node0");
  store->set("from_torch", bytes("hello"));
  EXPECT_EQ(ours.get("from_torch"), "hello");
  EXPECT_EQ(store->add("shared", 2), 2);
  EXPECT_EQ(ours.add("shared", 3), 5);
}

}  // namespace
}  // namespace acc::rendezvous
