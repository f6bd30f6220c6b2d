// torchelastic's file timer: the request lines PyTorch's FileTimerClient writes, and which region
// fires when (pure), then the named pipe with real writes.

#include "hangs/file_timer.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace acc::launcher {
namespace {

// As FileTimerRequest.to_json() writes them (json.dumps).
const char* kAcquire =
    R"({"version": 1, "pid": 4711, "scope_id": "load", "expiration_time": 1000.5, "signal": 9})";
const char* kRelease =
    R"({"version": 1, "pid": 4711, "scope_id": "load", "expiration_time": -1, "signal": 0})";

TEST(FileTimerTest, ParsesTheClientsRequestLines) {
  const auto acquire = parse_file_timer_request(kAcquire);
  ASSERT_TRUE(acquire);
  EXPECT_EQ(acquire->pid, 4711);
  EXPECT_EQ(acquire->scope_id, "load");
  EXPECT_DOUBLE_EQ(acquire->expiration_time, 1000.5);
  EXPECT_EQ(acquire->signal, 9);
  const auto release = parse_file_timer_request(kRelease);
  ASSERT_TRUE(release);
  EXPECT_LT(release->expiration_time, 0);
}

TEST(FileTimerTest, RefusesWhatIsNotARequest) {
  EXPECT_FALSE(parse_file_timer_request("not json {"));
  EXPECT_FALSE(parse_file_timer_request(R"({"pid": 1, "scope_id": "x"})"));
  EXPECT_FALSE(parse_file_timer_request(R"({"pid": 0, "scope_id": "x", "expiration_time": 1})"));
  EXPECT_FALSE(parse_file_timer_request(R"([1, 2, 3])"));
  // JSON only: YAML's flow style without quotes, wrong types, text after the object.
  EXPECT_FALSE(parse_file_timer_request("{pid: 1, scope_id: x, expiration_time: 1}"));
  EXPECT_FALSE(parse_file_timer_request(R"({"pid": "1", "scope_id": "x", "expiration_time": 1})"));
  EXPECT_FALSE(parse_file_timer_request(R"({"pid": 1, "scope_id": 2, "expiration_time": 1})"));
  EXPECT_FALSE(parse_file_timer_request(R"({"pid": 1, "scope_id": "x", "expiration_time": "1"})"));
  EXPECT_FALSE(parse_file_timer_request(R"({"pid": 1, "scope_id": "x", "expiration_time": 1} x)"));
}

TEST(FileTimerTest, AReleasedRegionNeverFires) {
  FileTimerRegions regions;
  regions.apply(*parse_file_timer_request(kAcquire));
  EXPECT_EQ(regions.next_expiry(), 1000.5);
  regions.apply(*parse_file_timer_request(kRelease));
  EXPECT_FALSE(regions.next_expiry());
  EXPECT_TRUE(regions.take_expired(2000).empty());
}

TEST(FileTimerTest, TheEarliestExpiredRegionWithASignalFiresAndThePidIsForgotten) {
  FileTimerRegions regions;
  regions.apply({7, "outer", 10, 0});  // expired first, but asked for no signal
  regions.apply({7, "inner", 12, SIGKILL});
  regions.apply({7, "later", 50, SIGTERM});
  regions.apply({8, "other", 30, SIGTERM});
  EXPECT_TRUE(regions.take_expired(9.9).empty());
  const auto expired = regions.take_expired(20);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].pid, 7);
  EXPECT_EQ(expired[0].scope_id, "inner");
  EXPECT_EQ(expired[0].signal, SIGKILL);
  EXPECT_EQ(regions.size(), 1u) << "every region of pid 7 goes, pid 8's stays";
  EXPECT_EQ(regions.next_expiry(), 30);
}

TEST(FileTimerTest, ReadsRequestsWrittenToThePipeInPieces) {
  const std::string dir = ::testing::TempDir() + "/file_timer_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    FileTimer timer(dir + "/timer_fifo");
    // As a client opens it: write-only, non-blocking (fails when no reader is there).
    const int client = ::open(timer.path().c_str(), O_WRONLY | O_NONBLOCK);
    ASSERT_GE(client, 0);
    const std::string first = std::string(kAcquire) + "\n" + R"({"version": 1, "pid": 5)";
    const std::string rest = R"(, "scope_id": "b", "expiration_time": 3, "signal": 15})"
                             "\n";
    ASSERT_EQ(::write(client, first.data(), first.size()), static_cast<ssize_t>(first.size()));
    timer.read_requests();
    EXPECT_EQ(timer.regions().size(), 1u) << "the second line is not whole yet";
    ASSERT_EQ(::write(client, rest.data(), rest.size()), static_cast<ssize_t>(rest.size()));
    ::close(client);
    timer.read_requests();
    EXPECT_EQ(timer.regions().size(), 2u);
    EXPECT_EQ(timer.regions().next_expiry(), 3);
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/timer_fifo")) << "the pipe goes with the timer";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace acc::launcher
