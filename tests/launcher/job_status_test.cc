// The job's status (status/job_status.h, status/status_server.h): the board over real progress
// files written as a worker writes them, and what it renders: Prometheus' text format, JSON, the
// routes and the URL.

#include "status/job_status.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "acc/common/progress_file.h"
#include "fake_clock.h"
#include "fake_proc.h"
#include "status/http_server.h"
#include "status/status_server.h"

namespace acc::launcher {
namespace {

class StatusBoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("acc-status-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    for (int rank = 0; rank < 2; ++rank) {
      const std::string path = (dir_ / ("progress." + std::to_string(rank))).string();
      progress_file::create(path);
      workers_.push_back({rank, rank, 1000 + rank, path});
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::vector<StatusBoard::Worker> workers_;
};

TEST_F(StatusBoardTest, RanksGoFromStartingToRunningToExitedWithTheirCounters) {
  StatusBoard board("job-1", "host-a", 0);
  EXPECT_EQ(board.status().phase, "waiting");
  EXPECT_TRUE(board.status().ranks.empty());
  board.attempt_started(0, 1, 2, workers_);
  progress_file::Writer rank0(workers_[0].progress_file);
  progress_file::Writer rank1(workers_[1].progress_file);
  board.sample();
  JobStatus status = board.status();
  ASSERT_EQ(status.ranks.size(), 2u);
  EXPECT_EQ(status.attempt, 1);
  EXPECT_EQ(status.workers_alive, 2);
  EXPECT_EQ(status.ranks[0].state, "starting");
  EXPECT_TRUE(status.ranks[0].reporting);

  const std::uint64_t slot = rank1.begin("default", 1, "all_reduce", 4, "float32", 2, -1, "x.py:1");
  rank1.end(slot);
  for (int step = 0; step < 3; ++step) {
    rank0.beat();
    board.sample();
    usleep(2000);
  }
  status = board.status();
  EXPECT_EQ(status.ranks[0].steps, 3u);
  EXPECT_EQ(status.ranks[0].state, "running");
  EXPECT_EQ(status.ranks[1].collectives, 1u);
  EXPECT_EQ(status.ranks[1].last_collective, "all_reduce (default)");
  EXPECT_FALSE(status.ranks[1].in_collective);
  ASSERT_TRUE(status.ranks[0].step_seconds);
  EXPECT_GT(*status.ranks[0].step_seconds, 0);
  EXPECT_EQ(status.ranks[0].recent_step_seconds.size(), 3u);  // one per sample with new steps
  EXPECT_FALSE(status.ranks[1].step_seconds);                 // it never beat

  board.workers_running({false, true});
  status = board.status();
  EXPECT_EQ(status.ranks[0].state, "exited");
  EXPECT_EQ(status.workers_alive, 1);
  board.stalled("the report");
  EXPECT_EQ(board.status().ranks[1].state, "stalled");
  EXPECT_EQ(board.status().hang_report, "the report");

  board.attempt_ended();
  board.attempt_started(1, 1, 2, workers_);
  status = board.status();
  EXPECT_EQ(status.attempt, 2);
  EXPECT_EQ(status.restarts, 1);
  EXPECT_EQ(status.ranks[1].state, "running");  // a new attempt is not stalled
  board.job_ended();
  EXPECT_EQ(board.status().phase, "ended");
  EXPECT_EQ(board.status().workers_alive, 0);
}

TEST_F(StatusBoardTest, AWorkerWithoutAProgressFileIsShownButNotReporting) {
  StatusBoard board("job-1", "host-a", 0);
  workers_[1].progress_file = (dir_ / "missing").string();
  board.attempt_started(0, 1, 2, workers_);
  board.sample();
  const JobStatus status = board.status();
  EXPECT_FALSE(status.ranks[1].reporting);
  EXPECT_EQ(status.ranks[1].state, "running");
}

// The board's own NVML client (the fake's "busy": every child of this process runs kernels at 87%)
// follows the busy processes to the workers; without NVML the share is unknown, not 0.
TEST_F(StatusBoardTest, GpuBusyComesFromNvmlPerWorkerProcess) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  workers_[0].pid = child;
  ::setenv("ACC_NVML_LIBRARY", ACC_FAKE_NVML_LIBRARY, 1);
  ::setenv("ACC_FAKE_NVML", "busy", 1);
  {
    StatusBoard board("job-1", "host-a", 0);
    board.attempt_started(0, 1, 2, workers_);
    board.sample();
    const JobStatus status = board.status();
    ASSERT_TRUE(status.ranks[0].gpu_busy);
    EXPECT_DOUBLE_EQ(*status.ranks[0].gpu_busy, 0.87);
    ASSERT_TRUE(status.ranks[1].gpu_busy);  // pid 1001 is no child: it ran nothing
    EXPECT_DOUBLE_EQ(*status.ranks[1].gpu_busy, 0.0);
    EXPECT_NE(prometheus_text(status).find("acc_rank_gpu_busy_ratio{job_id=\"job-1\",node=\"0\","
                                           "host=\"host-a\",rank=\"0\",local_rank=\"0\"} 0.87\n"),
              std::string::npos);
  }
  ::setenv("ACC_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  {
    StatusBoard board("job-1", "host-a", 0);
    board.attempt_started(0, 1, 2, workers_);
    board.sample();
    EXPECT_FALSE(board.status().ranks[0].gpu_busy);
  }
  ::unsetenv("ACC_NVML_LIBRARY");
  ::unsetenv("ACC_FAKE_NVML");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

// The busy GPU process is followed up its parents as /proc (a fake here) says, through
// processes that are no worker (a DataLoader's, a launcher script's), to the rank it belongs to.
TEST_F(StatusBoardTest, GpuBusyOfAWorkersDescendantCountsForThatWorkerAsProcSays) {
  const pid_t child = ::fork();  // the fake NVML's busy process: a child of this one
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  ::setenv("ACC_NVML_LIBRARY", ACC_FAKE_NVML_LIBRARY, 1);
  ::setenv("ACC_FAKE_NVML", "busy", 1);
  testing::FakeProc proc;
  proc.set(child, "S", 0, 3000);  // the busy one, under a process of its own
  proc.set(3000, "S", 0, workers_[1].pid);
  {
    StatusBoard board("job-1", "host-a", 0, proc);
    board.attempt_started(0, 1, 2, workers_);
    board.sample();
    const JobStatus status = board.status();
    ASSERT_TRUE(status.ranks[1].gpu_busy);
    EXPECT_DOUBLE_EQ(*status.ranks[1].gpu_busy, 0.87);
    ASSERT_TRUE(status.ranks[0].gpu_busy);
    EXPECT_DOUBLE_EQ(*status.ranks[0].gpu_busy, 0.0);
  }
  proc.remove(3000);  // the chain breaks: the busy process belongs to no rank
  {
    StatusBoard board("job-1", "host-a", 0, proc);
    board.attempt_started(0, 1, 2, workers_);
    board.sample();
    const JobStatus status = board.status();
    ASSERT_TRUE(status.ranks[1].gpu_busy);
    EXPECT_DOUBLE_EQ(*status.ranks[1].gpu_busy, 0.0);
  }
  ::unsetenv("ACC_NVML_LIBRARY");
  ::unsetenv("ACC_FAKE_NVML");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

JobStatus two_ranks() {
  JobStatus job;
  job.job_id = "run \"7\"";
  job.host = "host-a";
  job.world_size = 2;
  job.attempt = 1;
  job.phase = "running";
  job.workers_alive = 2;
  for (int rank = 0; rank < 2; ++rank) {
    RankStatus r;
    r.rank = rank;
    r.local_rank = rank;
    r.host = "host-a";
    r.state = "running";
    r.steps = 10 + rank;
    if (rank == 1) {
      r.step_seconds = 0.25;
      r.straggler_ratio = 1.8;
      r.straggler = true;
      r.recent_step_seconds = {0.2, 0.3};
    }
    job.ranks.push_back(r);
  }
  return job;
}

TEST(PrometheusTextTest, EveryFamilyHasHelpAndTypeAndEverySampleABelongingFamily) {
  const std::string text = prometheus_text(two_ranks());
  std::set<std::string> helped, typed;
  std::smatch m;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_match(line, m, std::regex("# HELP (\\w+) .+")))
      helped.insert(m[1]);
    else if (std::regex_match(line, m, std::regex("# TYPE (\\w+) (gauge|counter|histogram)")))
      typed.insert(m[1]);
    else {
      ASSERT_TRUE(std::regex_match(line, m, std::regex("(\\w+)\\{[^}]*\\} -?[0-9.e+-]+"))) << line;
      // A histogram's samples: its name with _bucket, _sum or _count.
      const std::string family =
          std::regex_replace(std::string(m[1]), std::regex("_(bucket|sum|count)$"), "");
      EXPECT_TRUE(typed.count(m[1]) || typed.count(family)) << line;
    }
  }
  EXPECT_EQ(helped, typed);
  EXPECT_GE(typed.size(), 10u);
  EXPECT_NE(text.find("acc_rank_steps_total{job_id=\"run \\\"7\\\"\",node=\"0\",host=\"host-a\","
                      "rank=\"1\",local_rank=\"1\"} 11\n"),
            std::string::npos);
  // A value nobody knows is no sample: rank 0 has no step time.
  EXPECT_EQ(
      text.find(
          "acc_rank_step_seconds{job_id=\"run \\\"7\\\"\",node=\"0\",host=\"host-a\",rank=\"0\""),
      std::string::npos);
  EXPECT_NE(text.find("rank=\"1\",local_rank=\"1\",state=\"running\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("rank=\"1\",local_rank=\"1\",state=\"stalled\"} 0\n"), std::string::npos);
}

TEST(PrometheusTextTest, RecoveriesAreAHistogramBesideTimeLostAndGoodput) {
  JobStatus job = two_ranks();
  RecoveryStatus fast, slow;
  fast.seconds = 0.008;
  slow.seconds = 2.5;
  job.recoveries = {fast, slow};
  job.goodput.wall_seconds = 100;
  job.goodput.progress_seconds = 90;
  job.goodput.lost_seconds = 10;
  const std::string text = prometheus_text(job);
  const std::string own = "job_id=\"run \\\"7\\\"\",node=\"0\",host=\"host-a\"";
  EXPECT_NE(text.find("# TYPE acc_recovery_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("acc_recovery_seconds_bucket{" + own + ",le=\"0.01\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("acc_recovery_seconds_bucket{" + own + ",le=\"1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("acc_recovery_seconds_bucket{" + own + ",le=\"10\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("acc_recovery_seconds_bucket{" + own + ",le=\"+Inf\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("acc_recovery_seconds_count{" + own + "} 2\n"), std::string::npos);
  EXPECT_NE(text.find("acc_recovery_seconds_sum{" + own + "} 2.508\n"), std::string::npos);
  EXPECT_NE(text.find("acc_time_lost_seconds_total{" + own + "} 10\n"), std::string::npos);
  EXPECT_NE(text.find("acc_goodput_ratio{" + own + "} 0.9\n"), std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(job_json(job));
  EXPECT_EQ(json["recoveries"].size(), 2u);
  EXPECT_EQ(json["goodput"]["lost_seconds"], 10);
}

TEST(JobJsonTest, ReadsBackWithNullsWhereNothingIsKnown) {
  const nlohmann::json job = nlohmann::json::parse(job_json(two_ranks()));
  EXPECT_EQ(job["job_id"], "run \"7\"");
  ASSERT_EQ(job["ranks"].size(), 2u);
  EXPECT_TRUE(job["ranks"][0]["step_seconds"].is_null());
  EXPECT_DOUBLE_EQ(job["ranks"][1]["step_seconds"].get<double>(), 0.25);
  EXPECT_TRUE(job["ranks"][1]["straggler"].get<bool>());
  EXPECT_EQ(job["ranks"][1]["recent_step_seconds"].size(), 2u);
}

TEST(JobJsonTest, ANodesStatusReadsBackAsWrittenAndAnythingElseIsRefused) {
  JobStatus job = two_ranks();
  job.nodes.push_back({0, "host-a", "running", 1, 0, 2});
  const std::optional<JobStatus> back = decode_node_status(encode_node_status(job));
  ASSERT_TRUE(back);
  EXPECT_EQ(job_json(*back), job_json(job));
  EXPECT_FALSE(decode_node_status("{}"));
  EXPECT_FALSE(decode_node_status("not json"));
  EXPECT_FALSE(decode_node_status(job_json(job)));  // the API's object, untagged
  // A field of the wrong type is refused, not read as 0 or true.
  const std::string text = encode_node_status(job);
  const std::string workers = "\"workers_alive\":2";
  ASSERT_NE(text.find(workers), std::string::npos) << text;
  std::string bad = text;
  bad.replace(bad.find(workers), workers.size(), "\"workers_alive\":2.5");
  EXPECT_FALSE(decode_node_status(bad));
  bad = text;
  bad.replace(bad.find(workers), workers.size(), "\"workers_alive\":\"2\"");
  EXPECT_FALSE(decode_node_status(bad));
}

TEST_F(StatusBoardTest, NodeZeroShowsTheOtherNodesRanksAfterItsOwnByRank) {
  StatusBoard board("job-1", "host-a", 0);
  board.attempt_started(0, 2, 4, workers_, {"127.0.0.1", 29500, 0, 2, 0, ""});
  EXPECT_EQ(board.job_store().nnodes, 2);
  JobStatus other = two_ranks();
  other.host = "host-b";
  other.node_rank = 1;
  other.nodes = {{1, "host-b", "running", 1, 0, 2}};
  for (RankStatus& r : other.ranks) {
    r.rank += 2;
    r.node = 1;
    r.host = "host-b";
  }
  board.set_other_nodes({other});
  const JobStatus status = board.status();
  ASSERT_EQ(status.ranks.size(), 4u);
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(status.ranks[rank].rank, rank);
  EXPECT_EQ(status.ranks[3].host, "host-b");
  ASSERT_EQ(status.nodes.size(), 2u);
  EXPECT_EQ(status.nodes[1].host, "host-b");
  const std::string text = prometheus_text(status);
  EXPECT_NE(text.find("acc_node_workers_alive{job_id=\"job-1\",node=\"1\",host=\"host-b\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("acc_rank_steps_total{job_id=\"job-1\",node=\"1\",host=\"host-b\",rank=\"3\","
                      "local_rank=\"1\"} 11\n"),
            std::string::npos);
  // A new attempt forgets the other nodes until they report again.
  board.attempt_started(1, 2, 4, workers_, {"127.0.0.1", 29500, 1, 2, 0, ""});
  EXPECT_EQ(board.status().ranks.size(), 2u);
}

// Workers' exits with --sdc_exit_codes' codes are counted per node on /metrics, the other
// nodes' included.
TEST_F(StatusBoardTest, SdcExitsAreCountedPerNode) {
  StatusBoard board("job-1", "host-a", 0);
  board.attempt_started(0, 2, 4, workers_, {"127.0.0.1", 29500, 0, 2, 0, ""});
  board.sdc_exit(false);
  board.sdc_exit(true);
  board.sdc_exit(false);
  JobStatus other = two_ranks();
  other.host = "host-b";
  other.node_rank = 1;
  other.nodes = {{1, "host-b", "running", 1, 0, 2, 0, 1}};
  board.set_other_nodes({other});
  const std::string text = prometheus_text(board.status());
  EXPECT_NE(
      text.find(
          "acc_node_sdc_restart_exits_total{job_id=\"job-1\",node=\"0\",host=\"host-a\"} 2\n"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          "acc_node_sdc_suspect_exits_total{job_id=\"job-1\",node=\"0\",host=\"host-a\"} 1\n"),
      std::string::npos);
  EXPECT_NE(
      text.find(
          "acc_node_sdc_suspect_exits_total{job_id=\"job-1\",node=\"1\",host=\"host-b\"} 1\n"),
      std::string::npos);
}

// /api/job's goodput as of now: the wall time since the first attempt started, and an attempt's
// time as progress once a worker made some, as the agent counts it at the attempt's end.
TEST_F(StatusBoardTest, GoodputIsTheProgressSoFarOverTheWallTimeSoFarWhileTheJobRuns) {
  acc::testing::FakeClock clock;
  StatusBoard board("job-1", "host-a", 0, proc::Reader::machine(), clock);
  auto goodput = [&] {
    const nlohmann::json job = nlohmann::json::parse(job_json(board.status()));
    return std::pair(job["goodput"]["wall_seconds"].get<double>(),
                     job["goodput"]["progress_seconds"].get<double>());
  };
  EXPECT_EQ(goodput(), std::pair(0.0, 0.0)) << "before the first attempt";

  board.attempt_started(0, 1, 2, workers_);
  progress_file::Writer rank1(workers_[1].progress_file);
  clock.advance(std::chrono::seconds(10));
  EXPECT_EQ(goodput(), std::pair(10.0, 0.0)) << "no progress yet";
  EXPECT_EQ(board.status().goodput.lost_seconds, 0) << "nor lost: the attempt may yet progress";
  rank1.beat();
  clock.advance(std::chrono::seconds(5));
  EXPECT_EQ(goodput(), std::pair(15.0, 15.0)) << "the whole attempt, as at its end";
  const std::string ratio = "acc_goodput_ratio{job_id=\"job-1\",node=\"0\",host=\"host-a\"} 1\n";
  EXPECT_NE(prometheus_text(board.status()).find(ratio), std::string::npos);

  // The attempt ends (the agent's count replaces the running one), a recovery of 4 s.
  board.attempt_ended();
  clock.advance(std::chrono::milliseconds(1));
  EXPECT_EQ(goodput().second, 15.001) << "until the agent's count comes";
  board.set_goodput({15.001, 15.001, 0, 0});
  clock.advance(std::chrono::seconds(4));
  EXPECT_EQ(goodput(), std::pair(19.001, 15.001)) << "between attempts the wall time runs";
  board.set_goodput({15.001, 15.001, 4, 4});

  // The next attempt, whose workers make no progress.
  std::vector<StatusBoard::Worker> again = workers_;
  for (StatusBoard::Worker& w : again) {
    w.progress_file += ".2";
    progress_file::create(w.progress_file);
  }
  board.attempt_started(1, 1, 2, again);
  clock.advance(std::chrono::seconds(6));
  EXPECT_EQ(goodput(), std::pair(25.001, 15.001));
  EXPECT_EQ(board.status().goodput.lost_seconds, 4);
  board.attempt_ended();
  board.set_goodput({25.0, 15.001, 4, 10});
  board.job_ended();
  clock.advance(std::chrono::seconds(60));
  EXPECT_EQ(goodput(), std::pair(25.0, 15.001)) << "ended: the agent's, the wall time stopped";
  EXPECT_EQ(board.status().goodput.lost_seconds, 10);
}

// A request for `path` from this host (loopback) or another.
HttpRequest local(const std::string& path) {
  return {path, "", "", true};
}
HttpRequest remote(const std::string& path, const std::string& query = "",
                   const std::string& authorization = "") {
  return {path, query, authorization, false};
}

TEST(StatusServerTest, RoutesUrlsAndAPageWithoutAnythingFromElsewhere) {
  StatusBoard board("j", "h", 0);
  EXPECT_EQ(status_reply(board, local("/metrics"), "")
                .rfind("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4", 0),
            0u);
  EXPECT_NE(status_reply(board, local("/api/job"), "").find("application/json"), std::string::npos);
  EXPECT_NE(status_reply(board, local("/"), "").find("<!DOCTYPE html>"), std::string::npos);
  EXPECT_EQ(status_reply(board, local("/nope"), "").rfind("HTTP/1.1 404 ", 0), 0u);
  EXPECT_NE(status_page().find("fetch(\"/api/job\" + location.search"), std::string::npos)
      << "the page passes its ?token= on";
  EXPECT_EQ(status_page().find("src="), std::string::npos);
  EXPECT_EQ(status_page().find("http"), std::string::npos);
  EXPECT_EQ(status_url("0.0.0.0", 80), "http://127.0.0.1:80/");
  EXPECT_EQ(status_url("::", 80), "http://[::1]:80/");
  EXPECT_EQ(status_url("10.0.0.2", 8000), "http://10.0.0.2:8000/");
}

// Beyond this host the page and /api/job need the job's secret's token; /metrics does not.
TEST(StatusServerTest, AnotherHostReadsThePageAndApiJobOnlyWithTheJobSecretsToken) {
  StatusBoard board("j", "h", 0);
  const std::string token = status_token("the job's secret");
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(status_token(""), "");
  EXPECT_NE(token, status_token("another secret"));
  EXPECT_EQ(token.find("secret"), std::string::npos);
  const auto status_of = [&](const HttpRequest& request, const std::string& expected) {
    return status_reply(board, request, expected).substr(0, 12);
  };
  EXPECT_EQ(status_of(remote("/metrics"), token), "HTTP/1.1 200");
  EXPECT_EQ(status_of(remote("/metrics"), ""), "HTTP/1.1 200");
  EXPECT_EQ(status_of(local("/api/job"), token), "HTTP/1.1 200") << "this host needs none";
  for (const std::string path : {"/api/job", "/", "/index.html"}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(status_of(remote(path), ""), "HTTP/1.1 403") << "no secret: this host alone";
    EXPECT_EQ(status_of(remote(path, "", "Bearer " + token), ""), "HTTP/1.1 403");
    EXPECT_EQ(status_of(remote(path), token), "HTTP/1.1 401");
    EXPECT_EQ(status_of(remote(path, "", "Bearer " + token), token), "HTTP/1.1 200");
    EXPECT_EQ(status_of(remote(path, "a=1&token=" + token), token), "HTTP/1.1 200");
    EXPECT_EQ(status_of(remote(path, "", "Bearer " + token.substr(1)), token), "HTTP/1.1 401");
    EXPECT_EQ(status_of(remote(path, "", "Bearer " + status_token("another")), token),
              "HTTP/1.1 401");
    EXPECT_EQ(status_of(remote(path, "", token), token), "HTTP/1.1 401") << "not Bearer";
  }
  EXPECT_NE(status_reply(board, remote("/api/job"), token).find("Authorization: Bearer"),
            std::string::npos)
      << "the refusal says what to send";
}

}  // namespace
}  // namespace acc::launcher
