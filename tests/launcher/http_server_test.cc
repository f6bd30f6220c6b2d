// The launcher's HTTP server (status/http_server.h) on loopback sockets: one reply per
// connection with the request's path, while a silent client waits; what is not HTTP, or too long,
// closed without a reply; the port closed when the server goes; hosts that are no address here
// refused.

#include "status/http_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "acc/common/error.h"
#include "loopback.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Sends `request` on `fd` and reads until the server closes (10 s at most).
std::string round_trip(int fd, const std::string& request) {
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) == 0) continue;
    char buffer[4096];
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got <= 0) break;
    text.append(buffer, static_cast<size_t>(got));
  }
  return text;
}

TEST(HttpServerTest, AnswersWithTheRequestsPathWhileASilentClientWaits) {
  HttpServer server(
      "", 0, [](const HttpRequest& request) { return "HTTP/1.1 200 OK\r\n\r\n" + request.path; },
      "a test");
  ASSERT_GT(server.port(), 0);
  const int silent =
      acc::testing::connect_loopback(server.port());  // connects and never sends a byte
  ASSERT_GE(silent, 0);
  const int fd = acc::testing::connect_loopback(server.port());
  ASSERT_GE(fd, 0);
  EXPECT_EQ(round_trip(fd, "GET /anything HTTP/1.1\r\nHost: x\r\n\r\n"),
            "HTTP/1.1 200 OK\r\n\r\n/anything");
  ::close(fd);
  ::close(silent);
}

TEST(HttpServerTest, ARequestTooLongIsClosedWithoutAReply) {
  HttpServer server(
      "", 0, [](const HttpRequest&) { return std::string("HTTP/1.1 200 OK\r\n\r\n"); }, "a test");
  const int fd = acc::testing::connect_loopback(server.port());
  ASSERT_GE(fd, 0);
  EXPECT_EQ(round_trip(fd, "GET /" + std::string(20000, 'a')), "");
  ::close(fd);
}

TEST(HttpServerTest, ThePortIsClosedWhenTheServerGoesAndATakenPortIsANetworkError) {
  int port = 0;
  {
    const auto nothing = [](const HttpRequest&) { return std::string(); };
    HttpServer server("", 0, nothing, "a test");
    port = server.port();
    EXPECT_THROW({ HttpServer taken("", port, nothing, "a test"); }, NetworkError);
    EXPECT_THROW({ HttpServer loopback("127.0.0.1", port, nothing, "a test"); }, NetworkError);
  }
  EXPECT_LT(acc::testing::connect_loopback(port), 0);
}

TEST(HttpServerTest, AHostThatIsNoAddressOfThisHostIsAConfigError) {
  const auto nothing = [](const HttpRequest&) { return std::string(); };
  EXPECT_THROW({ HttpServer named("nowhere.invalid", 0, nothing, "a test"); }, ConfigError);
  EXPECT_THROW({ HttpServer elsewhere("203.0.113.77", 0, nothing, "a test"); }, ConfigError);
  HttpServer loopback("127.0.0.1", 0, nothing, "a test");
  EXPECT_GT(loopback.port(), 0);
}

TEST(HttpServerTest, ThePathLeavesTheQueryOut) {
  EXPECT_EQ(path_of_target("/metrics?x=1"), "/metrics");
  EXPECT_EQ(path_of_target("/#top"), "/");
  EXPECT_EQ(path_of_target("/api/job"), "/api/job");
}

TEST(HttpServerTest, WhatIsNotHttpIsClosedWithoutAReply) {
  HttpServer server(
      "", 0, [](const HttpRequest& request) { return "HTTP/1.1 200 OK\r\n\r\n" + request.path; },
      "a test");
  const int fd = acc::testing::connect_loopback(server.port());
  ASSERT_GE(fd, 0);
  EXPECT_EQ(round_trip(fd, "garbage\r\n\r\n"), "");
  ::close(fd);
  const int again = acc::testing::connect_loopback(server.port());
  ASSERT_GE(again, 0);
  EXPECT_EQ(round_trip(again, "GET /api/job?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            "HTTP/1.1 200 OK\r\n\r\n/api/job");
  ::close(again);
}

}  // namespace
}  // namespace acc::launcher
