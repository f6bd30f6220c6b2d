// Resolving and connecting (tcp_connect.h) over loopback: a listener is reached, a port nothing
// listens on is told as refused, and the retries reach a server that starts listening after the
// first tries, pausing on the caller's clock (a fake one here, so the pauses are exact).

#include "acc/rendezvous/tcp_connect.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "fake_clock.h"
#include "refusing_port.h"

namespace acc::rendezvous {
namespace {

using namespace std::chrono_literals;

std::vector<TcpAddress> loopback(int port) {
  const TcpResolution resolved = resolve_tcp("127.0.0.1", port);
  EXPECT_EQ(resolved.status, 0) << resolved.error();
  return resolved.addresses;
}

TEST(TcpConnectTest, ALoopbackListenerIsReachedOnABlockingSocket) {
  acc::testing::RefusingPort port;
  port.listen();
  const TcpConnection connection = connect_tcp(loopback(port.port()), Clock::steady().now() + 30s);
  ASSERT_TRUE(connection.fd) << std::strerror(connection.error);
  EXPECT_EQ(::fcntl(connection.fd.get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST(TcpConnectTest, APortNothingListensOnIsRefusedNotTimedOut) {
  acc::testing::RefusingPort port;
  const TcpConnection connection = connect_tcp(loopback(port.port()), Clock::steady().now() + 30s);
  EXPECT_FALSE(connection.fd);
  EXPECT_EQ(connection.error, ECONNREFUSED);
  EXPECT_FALSE(connection.timed_out);
}

TEST(TcpConnectTest, RetriesReachAServerThatListensAfterTheThirdPauseWithPausesDoubling) {
  acc::testing::RefusingPort port;
  acc::testing::FakeClock clock;
  clock.on_sleep = [&](Clock::duration) {
    if (clock.sleeps() == 3) port.listen();
  };
  const TcpConnection connection =
      connect_tcp_until(loopback(port.port()), clock.now() + 60s, clock, 50ms, 1000ms);
  ASSERT_TRUE(connection.fd) << std::strerror(connection.error);
  EXPECT_EQ(clock.sleeps(), 3);
  EXPECT_EQ(clock.elapsed(), 50ms + 100ms + 200ms);
}

TEST(TcpConnectTest, RetriesEndAtTheDeadlineWithoutASocket) {
  acc::testing::RefusingPort port;
  acc::testing::FakeClock clock;
  const TcpConnection connection =
      connect_tcp_until(loopback(port.port()), clock.now() + 5s, clock, 50ms, 1000ms);
  EXPECT_FALSE(connection.fd);
  EXPECT_TRUE(connection.error == ECONNREFUSED || connection.timed_out)
      << std::strerror(connection.error);
  EXPECT_EQ(clock.elapsed(), 5s);
}

}  // namespace
}  // namespace acc::rendezvous
