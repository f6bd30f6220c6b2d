// The health check (status/health_check.h): what it says about the workers' progress files, and
// its replies. (Its HTTP server: http_server_test.cc.)

#include "status/health_check.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
  const std::string body = reply.substr(reply.find("\r\n\r\n") + 4);
  EXPECT_NE(reply.find("Content-Length: " + std::to_string(body.size()) + "\r\n"),
            std::string::npos)
      << reply;
  const auto json = nlohmann::json::parse(body);
  EXPECT_EQ(json.at("state"), "progress");
  EXPECT_DOUBLE_EQ(json.at("last_progress_time").get<double>(), 998.5);
  EXPECT_DOUBLE_EQ(json.at("seconds_since_progress").get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(json.at("timeout_s").get<double>(), 60);
  EXPECT_EQ(body.back(), '\n');
  EXPECT_EQ(body.find("state"), 2u) << "the state first, as before: " << body;
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

}  // namespace
}  // namespace acc::launcher
