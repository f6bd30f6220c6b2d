// The health check (status/health_check.h): what it says about the workers' progress files, its
// replies, and the HTTP server (status/http_server.h) on a loopback socket, which a silent client
// does not hold up.

#include "status/health_check.h"
#include "status/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "acc/common/error.h"
#include "acc/common/progress_file.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
constexpr std::int64_t kSecond = 1'000'000'000;

progress_file::Snapshot written(std::int64_t last_progress_ns) {
  progress_file::Snapshot s;
  s.writer_pid = 42;
  s.last_progress_ns = last_progress_ns;
  return s;
}

TEST(LivenessTest, NoWorkerThatWritesItsFileIsNotJudged) {
  const Liveness l = liveness_of({progress_file::Snapshot{}, progress_file::Snapshot{}}, 0,
                                 100 * kSecond, seconds(60));
  EXPECT_EQ(l.state, Liveness::State::kNotReporting);
}

TEST(LivenessTest, TheNewestProgressOfAnyWorkerCounts) {
  const Liveness l =
      liveness_of({written(10 * kSecond), written(70 * kSecond)}, 0, 100 * kSecond, seconds(60));
  EXPECT_EQ(l.state, Liveness::State::kProgress);
  EXPECT_DOUBLE_EQ(l.seconds_since_progress, 30.0);
}

TEST(LivenessTest, TheAttemptsStartCountsAsProgressUntilTheTimeout) {
  EXPECT_EQ(liveness_of({written(0)}, 50 * kSecond, 100 * kSecond, seconds(60)).state,
            Liveness::State::kProgress);
  const Liveness late = liveness_of({written(0)}, 50 * kSecond, 111 * kSecond, seconds(60));
  EXPECT_EQ(late.state, Liveness::State::kNoProgress);
  EXPECT_DOUBLE_EQ(late.seconds_since_progress, 61.0);
}

TEST(HealthCheckReplyTest, ProgressIs200WithTheLastProgressTime) {
  Liveness l;
  l.state = Liveness::State::kProgress;
  l.seconds_since_progress = 1.5;
  const std::string reply = health_check_reply(l, 1000.0, seconds(60));
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
  const std::string body =
      "{\"state\": \"progress\", \"last_progress_time\": 998.500, \"seconds_since_progress\": "
      "1.500, \"timeout_s\": 60.000}\n";
  EXPECT_NE(reply.find("Content-Length: " + std::to_string(body.size()) + "\r\n"),
            std::string::npos)
      << reply;
  EXPECT_EQ(reply.substr(reply.find("\r\n\r\n") + 4), body);
}

TEST(HealthCheckReplyTest, NoProgressIs503AndEveryOtherStateIs200) {
  Liveness l;
  l.state = Liveness::State::kNoProgress;
  EXPECT_EQ(health_check_reply(l, 0, seconds(60)).rfind("HTTP/1.1 503 ", 0), 0u);
  for (auto state : {Liveness::State::kNoAttempt, Liveness::State::kNotReporting}) {
    l.state = state;
    EXPECT_EQ(health_check_reply(l, 0, seconds(60)).rfind("HTTP/1.1 200 ", 0), 0u);
  }
}

TEST(WorkerProgressTest, ReadsTheAttemptsFilesUntilItEnds) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("health_check_test_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  progress_file::create(dir + "/0");
  progress_file::create(dir + "/1");
  WorkerProgress progress(seconds(60));
  EXPECT_EQ(progress.look().state, Liveness::State::kNoAttempt);
  progress.attempt_started({dir + "/0", dir + "/1", dir + "/never-created"});
  EXPECT_EQ(progress.look().state, Liveness::State::kNotReporting);
  progress_file::Writer(dir + "/1").beat();
  EXPECT_EQ(progress.look().state, Liveness::State::kProgress);
  progress.attempt_ended();
  EXPECT_EQ(progress.look().state, Liveness::State::kNoAttempt);
  std::filesystem::remove_all(dir);
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

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
  const int silent = connect_to(server.port());  // connects and never sends a byte
  ASSERT_GE(silent, 0);
  const int fd = connect_to(server.port());
  ASSERT_GE(fd, 0);
  EXPECT_EQ(round_trip(fd, "GET /anything HTTP/1.1\r\nHost: x\r\n\r\n"),
            "HTTP/1.1 200 OK\r\n\r\n/anything");
  ::close(fd);
  ::close(silent);
}

TEST(HttpServerTest, ARequestTooLongIsClosedWithoutAReply) {
  HttpServer server(
      "", 0, [](const HttpRequest&) { return std::string("HTTP/1.1 200 OK\r\n\r\n"); }, "a test");
  const int fd = connect_to(server.port());
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
  EXPECT_LT(connect_to(port), 0);
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
  const int fd = connect_to(server.port());
  ASSERT_GE(fd, 0);
  EXPECT_EQ(round_trip(fd, "garbage\r\n\r\n"), "");
  ::close(fd);
  const int again = connect_to(server.port());
  ASSERT_GE(again, 0);
  EXPECT_EQ(round_trip(again, "GET /api/job?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            "HTTP/1.1 200 OK\r\n\r\n/api/job");
  ::close(again);
}

}  // namespace
}  // namespace acc::launcher
