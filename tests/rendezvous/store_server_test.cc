#include "acc/rendezvous/store_server.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "acc/common/error.h"
#include "acc/rendezvous/job_secret.h"
#include "acc/rendezvous/store_client.h"
#include "raw_socket.h"

namespace acc::rendezvous {
namespace {

using namespace std::chrono_literals;
using testing::RawSocket;

StoreServerOptions loopback(std::chrono::milliseconds stall_timeout = 30s) {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.stall_timeout = stall_timeout;
  options.log = [](std::string_view) {};
  return options;
}

StoreClient connect(const StoreServer& server, std::chrono::milliseconds timeout = 20s) {
  StoreClientOptions options;
  options.port = server.port();
  options.connect_timeout = 10s;
  options.timeout = timeout;
  return StoreClient(options);
}

std::string legacy(Request request) {
  std::string bytes;
  encode_request(request, Dialect::kV1_13, bytes);
  return bytes;
}

std::string i64(std::int64_t value) {
  std::string out;
  append_i64(out, value);
  return out;
}

// The lines a server logs, kept for the test to read; `options` logs into it.
class LogLines {
 public:
  explicit LogLines(StoreServerOptions& options) {
    options.log = [this](std::string_view line) {
      std::lock_guard lock(mutex_);
      lines_.emplace_back(line);
    };
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST(StoreServerTest, WaitReturnsWhenAnotherClientSetsTheKey) {
  StoreServer server(loopback());
  server.start();
  StoreClient waiter = connect(server);
  auto waited = std::async(std::launch::async, [&] { return waiter.get("ready"); });
  EXPECT_EQ(waited.wait_for(200ms), std::future_status::timeout);
  StoreClient setter = connect(server);
  setter.set("ready", "yes");
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waited.get(), "yes");
}

TEST(StoreServerTest, ABegunWaitMakesTheDescriptorReadableWhenAnotherClientSetsTheKey) {
  StoreServer server(loopback());
  server.start();
  StoreClient watcher = connect(server);
  watcher.begin_wait({"restart"});
  pollfd p{watcher.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 100), 0) << "nothing set yet";
  EXPECT_FALSE(watcher.wait_ended());
  StoreClient setter = connect(server);
  setter.set("restart", "1");
  ASSERT_EQ(::poll(&p, 1, 10'000), 1);
  EXPECT_TRUE(watcher.wait_ended());
  EXPECT_EQ(watcher.get("restart"), "1") << "the connection is back in step";
}

TEST(StoreServerTest, ABegunWaitOnAGoneServerSaysSoAsANetworkError) {
  auto server = std::make_unique<StoreServer>(loopback());
  server->start();
  StoreClient watcher = connect(*server);
  watcher.begin_wait({"never"});
  server.reset();
  pollfd p{watcher.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10'000), 1);
  EXPECT_THROW(watcher.wait_ended(), NetworkError);
}

// A server that answers a client's handshake, takes its next request and goes: with an orderly
// close (an end of stream) or an abort (a reset, as a killed server's kernel answers a request in
// flight). Returns what the client's add() threw, less its "store HOST:PORT: " (a port each).
std::string what_a_client_hears_of_a_server_that_goes(bool reset) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), length), 0);
  EXPECT_EQ(::listen(listener, 1), 0);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  std::thread server([listener, reset] {
    const int fd = ::accept(listener, nullptr, nullptr);
    std::string handshake, echo;
    encode_request({Op::kValidate, {}, {}, kValidationMagic}, Dialect::kV2_2, handshake);
    encode_request({Op::kPing, {}, {}, 0}, Dialect::kV2_2, handshake);
    std::string bytes(handshake.size(), '\0');
    EXPECT_EQ(::recv(fd, bytes.data(), bytes.size(), MSG_WAITALL),
              static_cast<ssize_t>(bytes.size()));
    append_u32(echo, load_u32(std::string_view(bytes).substr(bytes.size() - 4)));
    ::send(fd, echo.data(), echo.size(), MSG_NOSIGNAL);
    char request[256];
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, 200) == 1 && ::recv(fd, request, sizeof(request), MSG_DONTWAIT) > 0) {
    }
    const linger abort{1, 0};
    if (reset) ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
    ::close(fd);
  });
  StoreClientOptions options;
  options.port = ntohs(address.sin_port);
  options.timeout = 10s;
  std::string what = "nothing was thrown";
  try {
    StoreClient client(options);
    client.add("key", 1);
  } catch (const NetworkError& e) {
    what = e.what();
  }
  server.join();
  ::close(listener);
  const std::size_t prefix_end = what.find(": ");
  return prefix_end == std::string::npos ? what : what.substr(prefix_end + 2);
}

TEST(StoreServerTest, AServerThatGoesIsOneMessageWhetherItClosedOrResetTheConnection) {
  const std::string closed = what_a_client_hears_of_a_server_that_goes(false);
  const std::string reset = what_a_client_hears_of_a_server_that_goes(true);
  EXPECT_EQ(closed, "the store server closed the connection");
  EXPECT_EQ(reset, closed);
}

TEST(StoreServerTest, ClientOperationsSeeOneSharedStore) {
  StoreServer server(loopback());
  server.start();
  StoreClient a = connect(server);
  StoreClient b = connect(server);
  a.set("k", std::string("\0bin", 4));
  EXPECT_EQ(b.get("k"), std::string("\0bin", 4));
  EXPECT_EQ(a.add("n", 5), 5);
  EXPECT_EQ(b.add("n", -2), 3);
  EXPECT_EQ(a.compare_set("k", "wrong", "x"), std::string("\0bin", 4));
  EXPECT_EQ(a.compare_set("k", std::string("\0bin", 4), "x"), "x");
  EXPECT_TRUE(b.check({"k", "n"}));
  EXPECT_FALSE(b.check({"k", "absent"}));
  b.multi_set({"m1", "m2"}, {"1", "2"});
  EXPECT_EQ(a.multi_get({"m2", "m1"}), (std::vector<std::string>{"2", "1"}));
  a.append("m1", "+");
  EXPECT_EQ(b.get("m1"), "1+");
  EXPECT_EQ(a.num_keys(), 4);
  EXPECT_TRUE(a.delete_key("m1"));
  EXPECT_FALSE(a.delete_key("m1"));
  EXPECT_EQ(b.num_keys(), 3);
}

// A static job's restart over real connections: the key space of attempt 1 begins the moment a
// launcher sets the attempt barrier's key (as our client names it); a worker that connects after
// it does not see attempt 0's Gloo key, one that connected before keeps seeing it, and the
// launchers' keys are one.
TEST(StoreServerTest, AKeySpaceBeginsWhenALauncherSetsTheKeyItNames) {
  StoreServer server(loopback());
  server.start();
  StoreClient launcher = connect(server);
  StoreClient old_worker = connect(server);
  old_worker.set("rank_1", "attempt 0");
  launcher.set("/acc/job/restart", "1");
  server.begin_key_space("/acc/space/attempt_1/", "/acc/job/attempt_1/ready");
  StoreClient early = connect(server);
  EXPECT_TRUE(early.check({"rank_1"}));  // before the barrier: the old space
  launcher.set("/acc/job/attempt_1/ready", "1");
  StoreClient new_worker = connect(server);
  EXPECT_FALSE(new_worker.check({"rank_1"}));
  new_worker.set("rank_1", "attempt 1");
  EXPECT_EQ(new_worker.get("rank_1"), "attempt 1");
  EXPECT_EQ(old_worker.get("rank_1"), "attempt 0");
  EXPECT_EQ(new_worker.get("/acc/job/restart"), "1");
  EXPECT_EQ(new_worker.num_keys(), 1);
}

TEST(StoreServerTest, WaitTimesOutWithTimeoutErrorAndTheClientStaysUsable) {
  StoreServer server(loopback());
  server.start();
  StoreClient client = connect(server);
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client.wait({"never"}, 150ms), TimeoutError);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms);
  client.set("after", "1");
  EXPECT_EQ(client.get("after"), "1");
  // The cancelled wait must not fire later and desynchronise the stream.
  StoreClient other = connect(server);
  other.set("never", "now");
  EXPECT_EQ(client.add("counter", 1), 1);
}

TEST(StoreServerTest, BytesOfAPytorch113ClientAreServedOnTheSameKeys) {
  StoreServer server(loopback());
  server.start();
  RawSocket old_client(server.port());
  ASSERT_TRUE(old_client.connected());
  // 1.13's set("k", "v") as seen on the wire, then ADD "/n" 7, then GET "/k".
  ASSERT_TRUE(old_client.send(
      std::string("\x00\x02\x00\x00\x00\x00\x00\x00\x00/k\x01\x00\x00\x00\x00\x00\x00\x00v", 20)));
  ASSERT_TRUE(old_client.send(legacy({Op::kAdd, {"/n"}, {}, 7})));
  EXPECT_EQ(old_client.receive(8, 5s), i64(7));
  StoreClient client = connect(server);
  EXPECT_EQ(client.get("k"), "v");
  EXPECT_EQ(client.add("n", 1), 8);
  ASSERT_TRUE(old_client.send(legacy({Op::kGet, {"/n"}, {}, 0})));
  EXPECT_EQ(old_client.receive(9, 5s), i64(1) + "8");
}

TEST(StoreServerTest, A22ClientHandshakeThenPingQueuesAndListAreServed) {
  StoreServer server(loopback());
  server.start();
  RawSocket client(server.port());
  auto send = [&](Request request) {
    std::string bytes;
    ASSERT_TRUE(encode_request(request, Dialect::kV2_2, bytes));
    ASSERT_TRUE(client.send(bytes));
  };
  send({Op::kValidate, {}, {}, kValidationMagic});
  send({Op::kPing, {}, {}, 0x01020304});
  std::string pong;
  append_u32(pong, 0x01020304);
  EXPECT_EQ(client.receive(4, 5s), pong);
  send({Op::kQueuePush, {"/q"}, {"a"}, 0});
  send({Op::kQueuePush, {"/q"}, {"b"}, 0});
  send({Op::kQueueLen, {"/q"}, {}, 0});
  EXPECT_EQ(client.receive(8, 5s), i64(2));
  send({Op::kQueuePop, {"/q"}, {}, 0});
  std::string popped = i64(2);
  append_bytes(popped, "a");
  EXPECT_EQ(client.receive(popped.size(), 5s), popped);
  send({Op::kSet, {"/k"}, {"v"}, 0});
  send({Op::kList, {}, {}, 0});
  std::string listed = i64(1);
  append_bytes(listed, "/k");
  EXPECT_EQ(client.receive(listed.size(), 5s), listed);
  send({Op::kCancelWait, {}, {}, 0});
  EXPECT_EQ(client.receive(1, 5s), std::string(1, static_cast<char>(kWaitCanceled)));
}

TEST(StoreServerTest, MalformedConnectionIsClosedAloneWhileOthersContinue) {
  std::atomic<int> logged{0};
  StoreServerOptions options = loopback();
  options.log = [&](std::string_view) { ++logged; };
  StoreServer server(options);
  server.start();
  StoreClient good = connect(server);
  good.set("a", "1");
  RawSocket bad(server.port());
  ASSERT_TRUE(bad.send("\x63garbage"));  // opcode 99 does not exist
  EXPECT_TRUE(bad.closed_by_peer(5s));
  EXPECT_EQ(good.get("a"), "1");
  EXPECT_EQ(good.add("n", 1), 1);
  EXPECT_EQ(logged.load(), 1);
}

TEST(StoreServerTest, OversizedKeyClosesItsConnectionBeforeTheBytesArrive) {
  StoreServerOptions options = loopback();
  options.limits.max_key_bytes = 1024;
  StoreServer server(options);
  server.start();
  StoreClient good = connect(server);
  RawSocket bad(server.port());
  std::string header;
  append_u8(header, *opcode_of(Op::kSet, Dialect::kV1_13));
  append_u64(header, 1u << 30);  // announces a 1 GiB key and sends none of it
  ASSERT_TRUE(bad.send(header));
  EXPECT_TRUE(bad.closed_by_peer(5s));
  good.set("still", "here");
  EXPECT_EQ(good.get("still"), "here");
}

TEST(StoreServerTest, StalledHalfRequestIsClosedButAnIdleConnectionIsKept) {
  StoreServer server(loopback(200ms));
  server.start();
  RawSocket idle(server.port());
  RawSocket stalled(server.port());
  ASSERT_TRUE(stalled.send(std::string("\x00\x05\x00", 3)));  // a SET cut inside its key length
  EXPECT_TRUE(stalled.closed_by_peer(5s));
  EXPECT_FALSE(idle.closed_by_peer(300ms));
  ASSERT_TRUE(idle.send(legacy({Op::kAdd, {"/n"}, {}, 3})));
  EXPECT_EQ(idle.receive(8, 5s), i64(3));
}

// Every connection sends at once, so that the server's rounds answer many together: through its
// send ring (batch_sends), or one send each.
void serve_thousands_of_connections(bool batch_sends) {
  StoreServerOptions options = loopback();
  options.batch_sends = batch_sends;
  options.adapt_batching = false;  // every round of two or more replies through the ring
  StoreServer server(options);
  server.start();
  constexpr int kConnections = 3000;
  std::vector<RawSocket> sockets;
  sockets.reserve(kConnections);
  for (int i = 0; i < kConnections; ++i) {
    sockets.emplace_back(server.port());
    ASSERT_TRUE(sockets.back().connected()) << i;
  }
  for (auto& socket : sockets) ASSERT_TRUE(socket.send(legacy({Op::kAdd, {"/n"}, {}, 1})));
  std::vector<bool> seen(kConnections + 1, false);
  for (auto& socket : sockets) {
    std::string reply = socket.receive(8, 10s);
    ASSERT_EQ(reply.size(), 8u);
    auto value = static_cast<std::int64_t>(load_u64(reply));
    ASSERT_TRUE(value >= 1 && value <= kConnections && !seen[value]) << value;
    seen[value] = true;
  }
  EXPECT_EQ(server.num_connections(), static_cast<std::size_t>(kConnections));
  StoreClient client = connect(server);
  EXPECT_EQ(client.get("n"), std::to_string(kConnections));
}

TEST(StoreServerTest, ThousandsOfConnectionsAreServedAtOnce) {
  serve_thousands_of_connections(/*batch_sends=*/true);
}

TEST(StoreServerTest, ThousandsOfConnectionsAreServedAtOnceWithOneSendEach) {
  serve_thousands_of_connections(/*batch_sends=*/false);
}

// Replies sent together that do not fit their sockets (small receive windows, read one
// connection at a time): the batch's partial sends and full sockets are finished later, and
// every connection gets every byte in order.
TEST(StoreServerTest, LargeRepliesToManySlowReadersAllArriveWhole) {
  StoreServer server(loopback());
  server.start();
  StoreClient writer = connect(server);
  const std::string value(256 * 1024, 'r');
  writer.set("r", value);
  ASSERT_TRUE(writer.check({"r"}));
  std::vector<RawSocket> readers;
  for (int i = 0; i < 20; ++i) readers.emplace_back(server.port(), 4096);
  std::string gets;
  for (int i = 0; i < 3; ++i) gets += legacy({Op::kGet, {"/r"}, {}, 0});
  for (auto& reader : readers) ASSERT_TRUE(reader.send(gets));
  std::string expected;
  append_bytes(expected, value);
  for (std::size_t r = 0; r < readers.size(); ++r) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(readers[r].receive(expected.size(), 20s), expected) << r << " " << i;
    }
  }
  EXPECT_EQ(writer.add("n", 1), 1);
}

TEST(StoreServerTest, ClientThatStopsReadingIsClosedAfterTheStallTimeout) {
  StoreServer server(loopback(300ms));
  server.start();
  StoreClient writer = connect(server);
  writer.set("big", std::string(4 << 20, 'x'));
  ASSERT_TRUE(writer.check({"big"}));  // a round trip: the SET has landed
  // A small receive window, so that the replies cannot all sit in the kernel's buffers
  // (this machine lets a loopback socket buffer 32 MiB).
  RawSocket reader(server.port(), 4096);
  ASSERT_TRUE(reader.send(legacy({Op::kAdd, {"/m"}, {}, 1})));
  ASSERT_EQ(reader.receive(8, 5s), i64(1));  // accepted and served
  ASSERT_EQ(server.num_connections(), 2u);
  std::string gets;
  for (int i = 0; i < 8; ++i) gets += legacy({Op::kGet, {"/big"}, {}, 0});
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(reader.send(gets));  // 32 MiB of replies that are never read
  auto until = start + 10s;
  while (server.num_connections() > 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(server.num_connections(), 1u);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  EXPECT_EQ(writer.add("n", 1), 1);
}

// The careless client of an 8 MiB value: GETs sent on and on, no reply ever read, and no
// shrunken receive window: the kernel's buffers take replies for a while, then it is closed
// within the stall timeout (and a little more for the kernel to stop taking bytes).
TEST(StoreServerTest, ClientThatSendsGetsOfABigValueAndNeverReadsIsClosedWithinTheStallTimeout) {
  StoreServerOptions options = loopback(1s);
  LogLines log(options);
  StoreServer server(options);
  server.start();
  StoreClient writer = connect(server);
  writer.set("big", std::string(8 << 20, 'x'));
  ASSERT_TRUE(writer.check({"big"}));
  RawSocket reader(server.port());
  ASSERT_TRUE(reader.send(legacy({Op::kAdd, {"/m"}, {}, 1})));
  ASSERT_EQ(reader.receive(8, 5s), i64(1));  // accepted and served
  const std::string get = legacy({Op::kGet, {"/big"}, {}, 0});
  const auto start = std::chrono::steady_clock::now();
  ::fcntl(reader.fd(), F_SETFL, ::fcntl(reader.fd(), F_GETFL) | O_NONBLOCK);
  std::string unsent;  // whole GETs, however the full socket cuts them
  while (server.num_connections() > 1 && std::chrono::steady_clock::now() < start + 20s) {
    if (unsent.size() < get.size()) unsent += get;
    const ssize_t n = ::send(reader.fd(), unsent.data(), unsent.size(), MSG_NOSIGNAL);
    if (n > 0) unsent.erase(0, static_cast<std::size_t>(n));
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(server.num_connections(), 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(writer.add("n", 1), 1);
  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("it does not read its replies"), std::string::npos) << lines[0];
}

TEST(StoreServerTest, RepliesLargerThanTheSocketBuffersAllArriveWhenTheClientReadsThem) {
  StoreServer server(loopback());
  server.start();
  StoreClient writer = connect(server);
  const std::string big(4 << 20, 'x');
  writer.set("big", big);
  ASSERT_TRUE(writer.check({"big"}));
  // A small receive window: the server must wait for room, again and again, to send 32 MiB.
  RawSocket reader(server.port(), 4096);
  std::string gets;
  for (int i = 0; i < 8; ++i) gets += legacy({Op::kGet, {"/big"}, {}, 0});
  ASSERT_TRUE(reader.send(gets));
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(load_u64(reader.receive(8, 20s)), big.size()) << "reply " << i;
    ASSERT_EQ(reader.receive(big.size(), 20s), big) << "reply " << i;
  }
  EXPECT_EQ(writer.add("n", 1), 1);  // and the server still serves the others
}

TEST(StoreServerTest, ClientThatLeavesBeforeItsRepliesDoesNotDisturbTheServer) {
  StoreServer server(loopback());
  server.start();
  StoreClient writer = connect(server);
  writer.set("big", std::string(1 << 20, 'x'));
  ASSERT_TRUE(writer.check({"big"}));
  for (int i = 0; i < 20; ++i) {
    RawSocket leaver(server.port());
    std::string gets;
    for (int j = 0; j < 4; ++j) gets += legacy({Op::kGet, {"/big"}, {}, 0});
    ASSERT_TRUE(leaver.send(gets));
  }  // each closes with replies in flight: writes to it must fail quietly (no SIGPIPE)
  EXPECT_EQ(writer.add("n", 1), 1);
  EXPECT_EQ(writer.get("big").size(), 1u << 20);
}

TEST(StoreServerTest, APortInUseThrowsNetworkErrorNamingTheAddress) {
  StoreServer first(loopback());
  StoreServerOptions options = loopback();
  options.port = first.port();
  try {
    StoreServer second(options);
    FAIL() << "a second server bound the same port";
  } catch (const NetworkError& error) {
    std::string expected = "127.0.0.1:" + std::to_string(first.port()) + " is already in use";
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
  }
}

TEST(StoreServerTest, MoreHostsListenOnTheSamePortAndServeOneStore) {
  StoreServerOptions options = loopback();
  options.more_hosts = {"127.0.0.2", "127.0.0.3"};
  StoreServer server(options);
  server.start();
  const std::string port = std::to_string(server.port());
  EXPECT_EQ(server.addresses(), (std::vector<std::string>{"127.0.0.1:" + port, "127.0.0.2:" + port,
                                                          "127.0.0.3:" + port}));
  EXPECT_EQ(server.address(), "127.0.0.1:" + port);
  StoreClientOptions client;
  client.port = server.port();
  client.connect_timeout = 10s;
  client.timeout = 20s;
  client.host = "127.0.0.3";
  StoreClient third(client);
  third.set("from", "the third");
  client.host = "127.0.0.2";
  StoreClient second(client);
  EXPECT_EQ(second.get("from"), "the third");
  // Only those: another loopback address of the same port is refused.
  client.host = "127.0.0.4";
  client.connect_timeout = 0ms;
  EXPECT_THROW(StoreClient{client}, Error);
}

TEST(StoreServerTest, AMoreHostInUseThrowsNamingItAndReleasesTheOthers) {
  StoreServer first(loopback());
  StoreServerOptions options = loopback();
  options.host = "127.0.0.2";
  options.port = first.port();
  options.more_hosts = {"127.0.0.1"};
  try {
    StoreServer second(options);
    FAIL() << "a second server bound the same address and port";
  } catch (const NetworkError& error) {
    std::string expected = "127.0.0.1:" + std::to_string(first.port()) + " is already in use";
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
  }
  options.more_hosts.clear();  // 127.0.0.2's listener was closed: it binds again
  EXPECT_NO_THROW(StoreServer{options});
}

TEST(StoreServerTest, StopClosesEveryConnectionAndReturns) {
  StoreServer server(loopback());
  server.start();
  RawSocket one(server.port());
  RawSocket two(server.port());
  ASSERT_TRUE(one.send(legacy({Op::kWait, {"/never"}, {}, 0})));
  StoreClient client = connect(server);  // a round trip: both raw sockets are accepted by now
  server.stop();
  EXPECT_TRUE(one.closed_by_peer(5s));
  EXPECT_TRUE(two.closed_by_peer(5s));
  server.stop();  // idempotent
}

TEST(StoreServerTest, RequestStopClosesEverythingWithoutWaitingAndStopJoins) {
  StoreServer server(loopback());
  server.start();
  RawSocket one(server.port());
  StoreClient client = connect(server);  // a round trip: the raw socket is accepted by now
  server.request_stop();                 // returns at once; the loop winds down on its own
  EXPECT_TRUE(one.closed_by_peer(5s));
  server.request_stop();  // idempotent
  server.stop();          // joins
  EXPECT_EQ(server.num_connections(), 0u);
}

TEST(StoreServerTest, RunServesUntilStop) {
  StoreServer server(loopback());
  std::thread loop([&] { server.run(); });
  StoreClient client = connect(server);
  EXPECT_EQ(client.add("n", 2), 2);
  server.stop();
  loop.join();
  EXPECT_EQ(server.num_connections(), 0u);
}

TEST(StoreServerTest, ChildProcessesInheritNoServerSocket) {
  StoreServer server(loopback());
  server.start();
  StoreClient client = connect(server);
  EXPECT_EQ(client.add("n", 1), 1);
  // popen forks and execs a shell, as the launcher does for workers; the child lists its
  // descriptors. Only the pipe popen made (and std streams) may be there, not a socket.
  FILE* listing = ::popen("ls -l /proc/self/fd 2>/dev/null", "r");
  ASSERT_NE(listing, nullptr);
  std::string text;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof(buffer), listing)) text.append(buffer, n);
  ::pclose(listing);
  ASSERT_NE(text.find("pipe:"), std::string::npos) << text;
  EXPECT_EQ(text.find("socket:"), std::string::npos) << text;
}

TEST(StoreServerTest, ReplyToAPipelinedBurstArrivesInOrder) {
  StoreServer server(loopback());
  server.start();
  RawSocket socket(server.port());
  std::string burst;
  for (int i = 1; i <= 1000; ++i) burst += legacy({Op::kAdd, {"/n"}, {}, 1});
  ASSERT_TRUE(socket.send(burst));
  std::string replies = socket.receive(8000, 10s);
  ASSERT_EQ(replies.size(), 8000u);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(static_cast<std::int64_t>(load_u64(replies.substr(8 * i))), i + 1);
  }
}

// Back-pressure: with replies over pause_reading_bytes the server applies no more of a
// connection's requests until they drain; then it serves the held ones, in order, to the end.
TEST(StoreServerTest, PipelinedRequestsHeldForUnreadRepliesAreAllServedInOrderOnceRead) {
  StoreServerOptions options = loopback();
  options.pause_reading_bytes = 16 * 1024;
  StoreServer server(options);
  server.start();
  StoreClient writer = connect(server);
  const std::string value(10'000, 'v');
  writer.set("v", value);
  ASSERT_TRUE(writer.check({"v"}));
  RawSocket reader(server.port(), 4096);
  std::string burst;
  constexpr int kRounds = 3000;  // 30 MB of replies for 45 KB of requests
  for (int i = 1; i <= kRounds; ++i) {
    burst += legacy({Op::kGet, {"/v"}, {}, 0});
    burst += legacy({Op::kAdd, {"/n"}, {}, 1});
  }
  ASSERT_TRUE(reader.send(burst));
  std::string expected_value;
  append_bytes(expected_value, value);
  for (int i = 1; i <= kRounds; ++i) {
    ASSERT_EQ(reader.receive(expected_value.size(), 20s), expected_value) << "round " << i;
    ASSERT_EQ(reader.receive(8, 20s), i64(i)) << "round " << i;
  }
  EXPECT_EQ(writer.add("n", 0), kRounds);
}

TEST(StoreServerTest, MultiGetWhoseReplyIsOverTheLimitClosesItsConnectionWithOneLine) {
  std::mutex mutex;
  std::vector<std::string> lines;
  StoreServerOptions options = loopback();
  options.log = [&](std::string_view line) {
    std::lock_guard lock(mutex);
    lines.emplace_back(line);
  };
  StoreServer server(options);
  server.start();
  StoreClient good = connect(server);
  good.set("big", std::string(8 << 20, 'x'));
  ASSERT_TRUE(good.check({"big"}));
  RawSocket bad(server.port());
  std::string request;
  append_u8(request, *opcode_of(Op::kValidate, Dialect::kV2_2));
  append_u32(request, kValidationMagic);
  Request multi_get{Op::kMultiGet, std::vector<std::string>(1000, "/big"), {}, 0};
  encode_request(multi_get, Dialect::kV2_2, request);  // 14 KB that ask for 8 GiB
  ASSERT_TRUE(bad.send(request));
  EXPECT_TRUE(bad.closed_by_peer(10s));
  EXPECT_EQ(good.get("big").size(), 8u << 20);
  std::lock_guard lock(mutex);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("MULTI_GET reply of 8388616000 bytes is over the limit of 33554432"),
            std::string::npos)
      << lines[0];
}

// What other connections cause (here, WATCH_KEY notifications) is not held back by pausing the
// watcher's reads: past max_pending_reply_bytes the watcher is closed, with one line.
TEST(StoreServerTest, WatcherThatReadsNoNotificationsIsClosedPastThePendingBound) {
  std::mutex mutex;
  std::vector<std::string> lines;
  StoreServerOptions options = loopback();
  options.max_pending_reply_bytes = 4 << 20;
  options.log = [&](std::string_view line) {
    std::lock_guard lock(mutex);
    lines.emplace_back(line);
  };
  StoreServer server(options);
  server.start();
  RawSocket watcher(server.port(), 4096);
  ASSERT_TRUE(watcher.send(legacy({Op::kWatchKey, {"/w"}, {}, 0})));
  ASSERT_EQ(watcher.receive(1, 5s), std::string(1, static_cast<char>(kWatchCallbackRegistered)));
  StoreClient writer = connect(server);
  const std::string value(1 << 20, 'w');
  // Each SET pushes old and new value (up to 2 MiB); kernel buffers take some tens of MiB
  // on loopback, so keep going until the watcher is gone, within a bound.
  int sets = 0;
  while (server.num_connections() > 1 && sets < 2000) {
    writer.set("w", value + std::to_string(sets++));
    (void)writer.check({"w"});  // a round trip: the pushes of that SET are queued
  }
  EXPECT_EQ(server.num_connections(), 1u) << sets << " SETs";
  EXPECT_EQ(writer.add("n", 1), 1);
  std::lock_guard lock(mutex);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("its replies are not being read"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("over the limit of 4194304"), std::string::npos) << lines[0];
}

// Many watchers that read nothing, over the bound at one SET: one line sums their closes.
TEST(StoreServerTest, WatchersClosedTogetherForTheSameCauseAreOneLine) {
  StoreServerOptions options = loopback();
  options.max_pending_reply_bytes = 1 << 20;
  LogLines log(options);
  StoreServer server(options);
  server.start();
  constexpr int kWatchers = 40;
  std::vector<RawSocket> watchers;
  for (int i = 0; i < kWatchers; ++i) {
    watchers.emplace_back(server.port(), 4096);
    ASSERT_TRUE(watchers.back().send(legacy({Op::kWatchKey, {"/w"}, {}, 0})));
    ASSERT_EQ(watchers.back().receive(1, 5s),
              std::string(1, static_cast<char>(kWatchCallbackRegistered)));
  }
  StoreClient writer = connect(server);
  writer.set("w", std::string(8 << 20, 'w'));  // 8 MiB to each: past the bound at once
  ASSERT_TRUE(writer.check({"w"}));
  EXPECT_EQ(server.num_connections(), 1u);
  EXPECT_EQ(writer.add("n", 1), 1);  // a round after the closes' round, which logs them at its end
  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 1u) << (lines.empty() ? "" : lines[0] + "\n..." + lines.back());
  EXPECT_NE(lines[0].find("closed 40 connections for the same cause, the first from 127.0.0.1:"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("its replies are not being read"), std::string::npos) << lines[0];
}

// Clients that each stall in the middle of a large SET cannot take the node's memory: past
// max_unfinished_bytes the oldest unfinished request's connection is closed, and the newest
// one, a client still sending, completes its SET.
TEST(StoreServerTest, UnfinishedRequestsPastTheirBoundCloseTheOldestAndTheNewestCompletes) {
  StoreServerOptions options = loopback();
  options.max_unfinished_bytes = 4 << 20;
  LogLines log(options);
  StoreServer server(options);
  server.start();
  // A SET of `key` announcing a value of 3 MiB, with the first 2 MiB of it.
  const auto half_set = [](const std::string& key) {
    std::string bytes;
    append_u8(bytes, *opcode_of(Op::kSet, Dialect::kV1_13));
    append_u64(bytes, key.size());
    bytes += key;
    append_u64(bytes, 3u << 20);
    return bytes + std::string(2u << 20, 'v');
  };
  RawSocket oldest(server.port());
  ASSERT_TRUE(oldest.send(half_set("/old")));
  std::this_thread::sleep_for(50ms);
  RawSocket middle(server.port());
  ASSERT_TRUE(middle.send(half_set("/middle")));
  std::this_thread::sleep_for(50ms);
  RawSocket newest(server.port());
  ASSERT_TRUE(newest.send(half_set("/new")));
  EXPECT_TRUE(oldest.closed_by_peer(5s));
  ASSERT_TRUE(newest.send(std::string(1u << 20, 'v')));  // the rest of its value
  StoreClient reader = connect(server, 5s);
  EXPECT_EQ(reader.get("new").size(), 3u << 20);  // GET waits for the key
  EXPECT_FALSE(reader.check({"old"}));
  const std::vector<std::string> lines = log.lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("held more unfinished requests than its limit of 4 MB"),
            std::string::npos)
      << lines[0];
}

// A flood of bad clients is a few lines, not one per client: past ten lines, the closes are
// counted and said in one line (here when the store stops, before its window ends).
TEST(StoreServerTest, AFloodOfBadClientsIsTenLinesAndOneThatCountsTheRest) {
  StoreServerOptions options = loopback();
  LogLines log(options);
  StoreServer server(options);
  server.start();
  StoreClient good = connect(server);
  for (int i = 0; i < 30; ++i) {
    RawSocket bad(server.port());
    ASSERT_TRUE(bad.send("\x63garbage"));  // opcode 99 does not exist
    ASSERT_TRUE(bad.closed_by_peer(5s));
    EXPECT_EQ(good.add("n", 1), i + 1);  // a round after the close's, which logs it
  }
  server.stop();
  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 11u) << lines.back();
  EXPECT_NE(lines[9].find("closed connection from 127.0.0.1:"), std::string::npos) << lines[9];
  EXPECT_NE(lines[10].find("closed 20 more connections in 10 s without a line each, the first "
                           "from 127.0.0.1:"),
            std::string::npos)
      << lines[10];
  EXPECT_NE(lines[10].find("unknown opcode 99"), std::string::npos) << lines[10];
}

// The closes past the ten lines are counted by kind, so that a flood of one kind (garbage) never
// hides another that came after it (here an oversized key): one line each when the store stops.
TEST(StoreServerTest, AFloodOfOneKindDoesNotHideAnotherKindOfClose) {
  StoreServerOptions options = loopback();
  options.limits.max_key_bytes = 1024;
  LogLines log(options);
  StoreServer server(options);
  server.start();
  StoreClient good = connect(server);
  const auto close_one = [&](const std::string& bytes, int n) {
    RawSocket bad(server.port());
    ASSERT_TRUE(bad.send(bytes));
    ASSERT_TRUE(bad.closed_by_peer(5s));
    EXPECT_EQ(good.add("n", 1), n);  // a round after the close's, which logs it
  };
  for (int i = 0; i < 15; ++i) close_one(std::string("\x63garbage", 8), i + 1);
  std::string oversized_key;
  append_u8(oversized_key, *opcode_of(Op::kSet, Dialect::kV1_13));
  append_u64(oversized_key, 1u << 30);
  for (int i = 0; i < 3; ++i) close_one(oversized_key, 16 + i);
  server.stop();
  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 12u) << lines.back();
  EXPECT_NE(lines[10].find("closed 5 more connections in 10 s without a line each"),
            std::string::npos)
      << lines[10];
  EXPECT_NE(lines[10].find("unknown opcode 99"), std::string::npos) << lines[10];
  EXPECT_NE(lines[11].find("closed 3 more connections in 10 s without a line each"),
            std::string::npos)
      << lines[11];
  EXPECT_NE(lines[11].find("over the limit of 1024"), std::string::npos) << lines[11];
}

// A StoreServer in a child process whose open-file limit, soft and hard, is `limit`: one that no
// process can raise, as on a machine whose root lacks CAP_SYS_RESOURCE. The child holds only its
// standard streams: stdin is the control pipe (the server stops when it closes), stdout gives the
// port, stderr the server's log lines.
class LimitedServer {
 public:
  explicit LimitedServer(rlim_t limit) {
    int control[2], port[2], log[2];
    if (::pipe2(control, O_CLOEXEC) != 0 || ::pipe2(port, O_CLOEXEC) != 0 ||
        ::pipe2(log, O_CLOEXEC) != 0) {
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(control[0], 0);
      ::dup2(port[1], 1);
      ::dup2(log[1], 2);
      ::close_range(3, ~0u, 0);
      rlimit low{limit, limit};
      ::setrlimit(RLIMIT_NOFILE, &low);
      StoreServerOptions options;
      options.host = "127.0.0.1";
      int bound = -1;
      try {
        StoreServer server(options);
        server.start();
        bound = server.port();
        (void)!::write(1, &bound, sizeof(bound));
        for (char byte; ::read(0, &byte, 1) > 0;) {
        }
        server.stop();
      } catch (const std::exception& error) {
        std::fprintf(stderr, "%s\n", error.what());
        (void)!::write(1, &bound, sizeof(bound));
      }
      ::_exit(0);
    }
    ::close(control[0]);
    ::close(port[1]);
    ::close(log[1]);
    control_ = control[1];
    log_ = log[0];
    if (::read(port[0], &port_, sizeof(port_)) != sizeof(port_)) port_ = -1;
    ::close(port[0]);
  }
  ~LimitedServer() {
    if (control_ >= 0) ::close(control_);  // the child stops its server and exits
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    if (log_ >= 0) ::close(log_);
  }
  LimitedServer(const LimitedServer&) = delete;
  LimitedServer& operator=(const LimitedServer&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  // The log so far, after waiting up to `timeout` for `text` in it.
  std::string log(std::string_view text, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (text.empty() || log_text_.find(text) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{log_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1) break;
      char buffer[4096];
      ssize_t n = ::read(log_, buffer, sizeof(buffer));
      if (n <= 0) break;
      log_text_.append(buffer, static_cast<std::size_t>(n));
    }
    return log_text_;
  }

  // The names of the child's threads that serve the store.
  std::vector<std::string> store_threads() const {
    std::vector<std::string> names;
    const auto tasks = std::filesystem::path("/proc") / std::to_string(pid_) / "task";
    for (const auto& task : std::filesystem::directory_iterator(tasks)) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name.starts_with("acc-store")) names.push_back(name);
    }
    return names;
  }

 private:
  pid_t pid_ = -1;
  int port_ = -1;
  int control_ = -1;
  int log_ = -1;
  std::string log_text_;
};

// The test process holds the clients: its soft limit up to its hard one.
void raise_own_fd_limit() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

std::unique_ptr<StoreClient> connect_to(int port) {
  StoreClientOptions options;
  options.port = port;
  options.connect_timeout = 10s;
  options.timeout = 20s;
  return std::make_unique<StoreClient>(options);
}

TEST(StoreServerTest, AtAnOpenFileLimitOf64AServerHolds300ConnectionsInThreadsOfTheirOwnTables) {
  raise_own_fd_limit();
  LimitedServer server(64);
  ASSERT_GT(server.port(), 0) << server.log({}, 1s);
  RawSocket watcher(server.port());  // the first thread's
  ASSERT_TRUE(watcher.send(legacy({Op::kWatchKey, {"/w"}, {}, 0})));
  ASSERT_EQ(watcher.receive(1, 5s), std::string(1, static_cast<char>(kWatchCallbackRegistered)));
  std::vector<std::unique_ptr<StoreClient>> clients;
  for (int i = 0; i < 300; ++i) {
    clients.push_back(connect_to(server.port()));
    ASSERT_EQ(clients.back()->add("joined", 1), i + 1);
  }
  // Each thread's table holds fewer than 64 descriptors: 300 connections took several.
  const auto threads = server.store_threads();
  EXPECT_GE(threads.size(), 6u);
  EXPECT_EQ(std::count(threads.begin(), threads.end(), "acc-store"), 1);
  // The state is one, and a wait is woken across threads both ways: the first client's by the
  // last one's set, and the last one's by the first one's.
  StoreClient& first = *clients.front();
  StoreClient& last = *clients.back();
  first.begin_wait({"from-last"});
  last.begin_wait({"from-first"});
  last.set("from-last", "1");
  first.set("from-first", "1");
  for (StoreClient* client : {&first, &last}) {
    pollfd p{client->fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10'000), 1);
    EXPECT_TRUE(client->wait_ended());
  }
  // A watched key set by the last thread's client reaches the first thread's watcher.
  last.set("w", "v");
  std::string pushed;
  append_u8(pushed, kWatchKeyCreated);
  append_bytes(pushed, "/w");
  append_bytes(pushed, "");
  append_bytes(pushed, "v");
  EXPECT_EQ(watcher.receive(pushed.size(), 10s), pushed);
  EXPECT_EQ(clients[150]->get("joined"), "300");
  EXPECT_EQ(server.log({}, 0ms), "") << "no descriptor ran out";
}

TEST(StoreServerTest,
     OutOfDescriptorsInEveryThreadIsOneLineWithTheLimitThenClientsAreAcceptedLater) {
  raise_own_fd_limit();
  LimitedServer server(32);
  ASSERT_GT(server.port(), 0) << server.log({}, 1s);
  // Far more than 16 threads of at most 32 descriptors each can take: the rest wait in the
  // listener's queue. Each sends an ADD, answered once its connection is accepted.
  std::deque<RawSocket> clients;
  for (int i = 0; i < 600; ++i) {
    clients.emplace_back(server.port());
    ASSERT_TRUE(clients.back().send(legacy({Op::kAdd, {"/n"}, {}, 1})));
  }
  const std::string line = server.log("Too many open files (", 20s);
  ASSERT_NE(line.find("Too many open files ("), std::string::npos) << line;
  EXPECT_NE(line.find(" connections open; open-file limit 32, hard limit 32)"), std::string::npos)
      << line;
  EXPECT_NE(line.find("ulimit -Hn"), std::string::npos) << line;
  std::this_thread::sleep_for(500ms);  // five of the listener's 100 ms retries
  const std::string later = server.log({}, 0ms);
  EXPECT_EQ(std::count(later.begin(), later.end(), '\n'), 1)
      << "one line for the episode, not one per retry: " << later;
  EXPECT_EQ(clients.back().receive(8, 200ms), "") << "not accepted yet";
  // The accepted ones leave; the last thread's descriptors come free and it accepts again.
  std::size_t accepted = 0;
  while (accepted < clients.size() && clients[accepted].receive(8, 50ms).size() == 8) ++accepted;
  ASSERT_GT(accepted, 16u);
  ASSERT_LT(accepted, 400u);
  for (std::size_t i = 0; i < accepted; ++i) clients.pop_front();
  EXPECT_EQ(clients.front().receive(8, 10s).size(), 8u) << "accepted once descriptors are free";
}

}  // namespace
}  // namespace acc::rendezvous

namespace acc::rendezvous {
namespace {

StoreClientOptions launcher_of(const StoreServer& server, std::string secret) {
  StoreClientOptions options;
  options.port = server.port();
  options.connect_timeout = 10s;
  options.timeout = 5s;
  options.job_member = true;
  options.job_secret = std::move(secret);
  return options;
}

// A store with a job secret: the job's launchers prove it and write their keys; a launcher
// without it, or with another, is refused in one line each; a client that never asks (PyTorch's,
// a worker's) reads and writes its own keys, and reads the launchers', but cannot write them.
TEST(StoreServerTest, OnlyConnectionsThatProveTheJobSecretWriteTheLaunchersKeys) {
  StoreServerOptions options = loopback();
  options.job_secret = "the job's secret";
  LogLines log(options);
  StoreServer server(options);
  server.start();

  StoreClient member(launcher_of(server, "the job's secret"));
  member.set("acc/round", "1");
  EXPECT_EQ(member.add("acc/restarts", 1), 1);

  try {
    StoreClient stranger(launcher_of(server, ""));
    ADD_FAILURE() << "a launcher without the secret joined";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("this launcher has none"), std::string::npos) << e.what();
  }
  try {
    StoreClient other_job(launcher_of(server, "another job's secret"));
    ADD_FAILURE() << "a launcher with a wrong secret joined";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("refused this launcher's job secret"), std::string::npos)
        << e.what();
  }

  StoreClient worker = connect(server);
  worker.set("MASTER_ADDR", "node0");
  EXPECT_EQ(worker.get("acc/round"), "1");
  worker.set("acc/round", "2");  // SET has no reply: the closed connection shows next
  EXPECT_THROW(worker.get("MASTER_ADDR"), NetworkError) << "a worker's connection wrote it";
  StoreClient again = connect(server);
  EXPECT_THROW(again.add("acc/restarts", 1), NetworkError);
  EXPECT_EQ(member.get("acc/round"), "1");
  EXPECT_EQ(member.add("acc/restarts", 0), 1);
  EXPECT_EQ(member.get("MASTER_ADDR"), "node0");

  // The proof is the connection's own: replayed on another connection it is wrong.
  StoreClient replay = connect(server);
  const std::string nonce = replay.get(std::string(kJobNonceKey));
  StoreClient second = connect(server);
  second.set(kJobProofKey, job_proof("the job's secret", nonce));
  EXPECT_THROW(second.check({std::string(kJobMemberKey)}), NetworkError);

  server.stop();
  bool wrong = false, unproven = false;
  for (const std::string& line : log.lines()) {
    wrong = wrong || line.find("a wrong job secret") != std::string::npos;
    unproven = unproven || line.find("has not presented the job secret") != std::string::npos;
  }
  EXPECT_TRUE(wrong && unproven) << "one line per refusal";
}

// Without a job secret the store asks none: a launcher that has one joins as before.
TEST(StoreServerTest, AStoreWithoutASecretTakesEveryLauncher) {
  StoreServer server(loopback());
  server.start();
  StoreClient member(launcher_of(server, "a secret"));
  member.set("acc/round", "1");
  StoreClient plain(launcher_of(server, ""));
  EXPECT_EQ(plain.get("acc/round"), "1");
}

}  // namespace
}  // namespace acc::rendezvous
