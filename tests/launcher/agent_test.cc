// The agent over a scripted Os (fake_os.h): teardown, restarts, signals, the kill bound and the
// exit code, with no real worker process and no wall-clock wait.

#include "acc/launcher/agent/agent.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <utility>

#include "acc/common/exit_code.h"
#include "acc/common/progress_file.h"
#include "acc/common/unique_fd.h"
#include "fake_os.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeOs;
using testing::Script;

Script exits(int code, milliseconds after) {
  Script script;
  script.exit_after = after;
  script.exit_code = code;
  return script;
}

Script runs_until_signalled() {
  return Script{};
}

// What a scripted membership saw the agent do, kept by the test (the agent owns the membership).
struct MembershipLog {
  std::vector<int> joins;                             // the restart count of each join
  std::vector<FakeOs::Clock::time_point> kept_alive;  // keep_alive() while workers stopped
  std::vector<std::pair<FakeOs::Clock::time_point, JobEnd>> ends;  // end_job()
  std::vector<int> restarts;                                       // restart_job()
};

// Node 0 of a static job of two nodes, whose other node acts as the test scripts: from `at`
// on, watch() reports `event` during attempt 0; await_exit() reports `at_exit` once, then kNone.
class ScriptedMembership : public Membership {
 public:
  ScriptedMembership(FakeOs& os, MembershipLog& log) : os_(os), log_(log) {}

  Round join(int restart_count) override {
    log_.joins.push_back(restart_count);
    Round round;
    round.nnodes = 2;
    round.master_addr = "127.0.0.1";
    round.master_port = 29500;
    round.restart_count = restart_count;
    return round;
  }
  std::chrono::milliseconds poll_interval() const override { return seconds(1); }
  JobEvent watch(int restart_count) override {
    if (restart_count == 0 && os_.now() >= os_.start() + at) return event;
    return {};
  }
  void keep_alive() override { log_.kept_alive.push_back(os_.now()); }
  JobEvent restart_job(int restart_count) override {
    log_.restarts.push_back(restart_count);
    return Membership::restart_job(restart_count);
  }
  JobEvent end_job(const JobEnd& end) override {
    log_.ends.emplace_back(os_.now(), end);
    JobEvent ended;
    ended.kind = JobEvent::Kind::kEnded;
    ended.end = end;
    ended.shared = true;
    return ended;
  }
  JobEvent await_exit(int) override { return std::exchange(at_exit, JobEvent{}); }

  milliseconds at{0};
  JobEvent event;
  JobEvent at_exit;

 private:
  FakeOs& os_;
  MembershipLog& log_;
};

JobEnd node_one_failed() {
  JobEnd end;
  end.node = 1;
  end.host = "b";
  end.rank = 3;
  end.local_rank = 1;
  end.pid = 4711;
  end.exit_code = 3;
  end.status = 3;
  end.reason = "rank 3 exited with 3";
  return end;
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string pattern =
        (std::filesystem::temp_directory_path() / "agent_test_XXXXXX").string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    ASSERT_NE(::mkdtemp(buffer.data()), nullptr);
    dir_ = buffer.data();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LaunchPlan plan(int workers, int max_restarts = 0) {
    LaunchOptions options;
    options.program = "/bin/true";
    options.no_python = true;
    options.nproc_per_node = std::to_string(workers);
    options.max_restarts = max_restarts;
    options.shutdown_timeout = 30;
    options.kill_timeout = 10;
    // The straggler watch, like the stall watch, runs on the real clock, not the fake OS's.
    options.straggler_window = 0;
    options.log_dir = dir_ + "/logs";
    HostInfo host;
    host.hostname = "node7";
    host.cpu_count = 8;
    LaunchPlan result = build_plan(options, host);
    result.quiet = true;
    return result;
  }

  // Runs the agent over `os`; its stderr (notices, the failure report) lands in `err_`.
  int run(LaunchPlan plan, FakeOs& os) {
    ::testing::internal::CaptureStderr();
    int status = -1;
    try {
      status = Agent(std::move(plan), {{"PATH", "/usr/bin:/bin"}}, "node7", os).run();
    } catch (...) {
      err_ = ::testing::internal::GetCapturedStderr();
      throw;
    }
    err_ = ::testing::internal::GetCapturedStderr();
    return status;
  }

  // The same as node 0 of two nodes, with `membership` for its link to the other node.
  int run(LaunchPlan plan, FakeOs& os, std::unique_ptr<Membership> membership) {
    ::testing::internal::CaptureStderr();
    int status = -1;
    try {
      status = Agent(std::move(plan), {{"PATH", "/usr/bin:/bin"}}, os, std::move(membership)).run();
    } catch (...) {
      err_ = ::testing::internal::GetCapturedStderr();
      throw;
    }
    err_ = ::testing::internal::GetCapturedStderr();
    return status;
  }

  std::string dir_;
  std::string err_;
};

TEST_F(AgentTest, WorkersThatAllExitZeroEndTheJobWithZero) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return exits(0, seconds(2)); };
  EXPECT_EQ(run(plan(3), os), 0);
  ASSERT_EQ(os.processes().size(), 3u);
  for (const auto& p : os.processes()) EXPECT_TRUE(p->received.empty()) << p->pid;
  EXPECT_EQ(os.elapsed(), seconds(2));
}

// --dedup_lines holds a line back for its window on the agent's clock (the fake OS's here): the
// same line from two ranks 100 ms apart comes out once, 1 s apart twice.
TEST_F(AgentTest, DedupLinesMergesLinesWithinTheWindowOnTheAgentsClock) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    Script script = exits(0, seconds(5));
    script.stdout_lines = {{milliseconds(1000 + 100 * index), "loss 0.5\n"},
                           {milliseconds(2000 + 1000 * index), "step done\n"}};
    return script;
  };
  LaunchPlan p = plan(2);
  p.dedup_lines = true;
  p.dedup_window = milliseconds(150);
  ::testing::internal::CaptureStdout();
  const int status = run(std::move(p), os);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, 0) << err_;
  EXPECT_EQ(out, "[rank0-1]: loss 0.5\n[rank0]: step done\n[rank1]: step done\n");
  EXPECT_EQ(os.elapsed(), seconds(5));
}

TEST_F(AgentTest, AFailureStopsTheOthersWithSigtermAndReturnsItsExitCode) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    return index == 1 ? exits(3, seconds(1)) : runs_until_signalled();
  };
  EXPECT_EQ(run(plan(3), os), 3);
  for (int i : {0, 2}) {
    const auto& p = *os.processes()[i];
    EXPECT_EQ(p.when(SIGTERM), os.start() + seconds(1)) << i;
    EXPECT_FALSE(p.got(SIGKILL)) << i;
    EXPECT_TRUE(p.reaped) << i;
  }
  EXPECT_NE(err_.find("root cause (* above): rank 1 (local rank 1) on node7 exited with 3"),
            std::string::npos)
      << err_;
}

TEST_F(AgentTest, AWorkerThatIgnoresSigtermGetsSigkillAtTheShutdownDeadline) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    if (index == 1) return exits(3, seconds(1));
    Script stubborn;
    stubborn.ignores_sigterm = true;
    return stubborn;
  };
  EXPECT_EQ(run(plan(2), os), 3);
  const auto& p = *os.processes()[0];
  EXPECT_EQ(p.when(SIGTERM), os.start() + seconds(1));
  EXPECT_EQ(p.when(SIGKILL), os.start() + seconds(31));  // --shutdown_timeout 30
  EXPECT_EQ(p.status, SIGKILL);
}

TEST_F(AgentTest, ASignalledWorkerIsTheRootCauseWith128PlusItsSignal) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    Script script = index == 0 ? exits(0, seconds(1)) : runs_until_signalled();
    if (index == 0) script.killed_by = SIGSEGV;
    return script;
  };
  EXPECT_EQ(run(plan(2), os), 128 + SIGSEGV);
  EXPECT_TRUE(os.processes()[1]->got(SIGTERM));
}

TEST_F(AgentTest, RestartsUpToMaxRestartsWithTheRestartCountRising) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return exits(1, seconds(1)); };
  EXPECT_EQ(run(plan(2, 2), os), 1);
  ASSERT_EQ(os.processes().size(), 6u);  // three attempts of two workers
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(os.processes()[i]->env("TORCHELASTIC_RESTART_COUNT"), std::to_string(i / 2)) << i;
  EXPECT_NE(err_.find("FAILED after 3 attempts"), std::string::npos) << err_;
}

TEST_F(AgentTest, ARestartThatSucceedsEndsTheJobWithZero) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    return index < 2 ? exits(index == 0 ? 7 : 0, seconds(1)) : exits(0, seconds(1));
  };
  EXPECT_EQ(run(plan(2, 3), os), 0);
  EXPECT_EQ(os.processes().size(), 4u);
}

// --- --max_no_progress_restarts
// -------------------------------------------------------------------

std::string env_of(const SpawnRequest& request, const std::string& key) {
  for (const std::string& entry : request.env)
    if (entry.compare(0, key.size() + 1, key + "=") == 0) return entry.substr(key.size() + 1);
  return "";
}

// A worker that beats once (as libacc's optimizer step does) when it starts, then fails.
Script beats_then_fails(const SpawnRequest& request) {
  progress_file::Writer(env_of(request, progress_file::kEnvVar)).beat();
  return exits(1, seconds(1));
}

LaunchPlan no_progress_limit(LaunchPlan plan) {
  plan.max_no_progress_restarts = 2;
  plan.no_restart_exit_code = 75;
  return plan;
}

TEST_F(AgentTest, AttemptsFailingBeforeAnyProgressEndTheJobWithTheNoRestartCode) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return exits(1, seconds(1)); };
  EXPECT_EQ(run(no_progress_limit(plan(2, 10)), os), 75);
  EXPECT_EQ(os.processes().size(), 4u) << "two attempts of two workers";
  EXPECT_NE(err_.find("2 attempt(s) in a row failed before any progress"), std::string::npos)
      << err_;
}

TEST_F(AgentTest, AttemptsWithABeatKeepEveryRestart) {
  FakeOs os;
  os.program = [](const SpawnRequest& request, int) { return beats_then_fails(request); };
  EXPECT_EQ(run(no_progress_limit(plan(2, 10)), os), 1);
  EXPECT_EQ(os.processes().size(), 22u) << "eleven attempts of two workers";
}

TEST_F(AgentTest, OneWorkersProgressIsTheAttemptsAndItStartsTheCountAgain) {
  FakeOs os;
  // Attempt 1's second worker beats; attempts 0, 2 and 3 make no progress.
  os.program = [](const SpawnRequest& request, int index) {
    return index == 3 ? beats_then_fails(request) : exits(1, seconds(1));
  };
  EXPECT_EQ(run(no_progress_limit(plan(2, 10)), os), 75);
  EXPECT_EQ(os.processes().size(), 8u) << "four attempts of two workers";
}

TEST_F(AgentTest, WithoutALimitAttemptsWithoutProgressUseEveryRestart) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return exits(1, seconds(1)); };
  EXPECT_EQ(run(plan(1, 4), os), 1);
  EXPECT_EQ(os.processes().size(), 5u);
}

TEST_F(AgentTest, AWorkersStderrTailIsInTheFailureReport) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) {
    Script script = exits(2, seconds(1));
    script.stderr_lines = {{milliseconds(500), "RuntimeError: out of memory\n"}};
    return script;
  };
  EXPECT_EQ(run(plan(1), os), 2);
  EXPECT_NE(err_.find("RuntimeError: out of memory"), std::string::npos) << err_;
}

TEST_F(AgentTest, AForwardedSignalReachesEveryWorkerAndTheJobGoesOn) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return exits(0, seconds(5)); };
  os.signal_launcher(seconds(1), SIGUSR1);
  EXPECT_EQ(run(plan(3), os), 0);
  for (const auto& p : os.processes()) {
    EXPECT_EQ(p->when(SIGUSR1), os.start() + seconds(1)) << p->pid;
    EXPECT_FALSE(p->got(SIGTERM)) << p->pid;
  }
  EXPECT_EQ(os.elapsed(), seconds(5));
}

TEST_F(AgentTest, AStopSignalEndsTheJobWith128PlusItAndNoRestart) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return runs_until_signalled(); };
  os.signal_launcher(seconds(2), SIGTERM);
  EXPECT_EQ(run(plan(2, 3), os), 128 + SIGTERM);
  ASSERT_EQ(os.processes().size(), 2u);
  for (const auto& p : os.processes()) EXPECT_EQ(p->when(SIGTERM), os.start() + seconds(2));
  EXPECT_TRUE(std::find(os.taken_signals().begin(), os.taken_signals().end(), SIGTERM) !=
              os.taken_signals().end());
}

TEST_F(AgentTest, ASecondStopSignalSendsSigkillAtOnce) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) {
    Script stubborn;
    stubborn.ignores_sigterm = true;
    return stubborn;
  };
  os.signal_launcher(seconds(1), SIGINT);
  os.signal_launcher(seconds(3), SIGINT);
  EXPECT_EQ(run(plan(2), os), 128 + SIGINT);
  for (const auto& p : os.processes()) EXPECT_EQ(p->when(SIGKILL), os.start() + seconds(3));
}

TEST_F(AgentTest, AWorkerThatCannotBeRunStopsTheOthersAndThrowsLaunchError) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    Script script = runs_until_signalled();
    if (index == 1) script.cannot_exec = "Permission denied";
    return script;
  };
  EXPECT_THROW(run(plan(3, 2), os), LaunchError);
  ASSERT_EQ(os.processes().size(), 3u);  // no restart
  for (const auto& p : os.processes()) EXPECT_TRUE(p->reaped) << p->pid;
}

// Issue 17, bounded teardown: a worker stuck in the kernel survives SIGKILL. The launcher
// names it, does not restart, and ends with its own code within the bound.
TEST_F(AgentTest, AWorkerThatSurvivesSigkillIsNamedAndEndsTheJobWithExit5) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    if (index == 1) return exits(3, seconds(1));
    Script stuck;
    stuck.ignores_sigterm = true;
    stuck.survives_sigkill = true;
    return stuck;
  };
  EXPECT_EQ(run(plan(2, 3), os), kExitUnkillable);
  EXPECT_EQ(kExitUnkillable, 5);
  ASSERT_EQ(os.processes().size(), 2u);  // no restart on this host
  const auto& stuck = *os.processes()[0];
  EXPECT_EQ(stuck.when(SIGKILL), os.start() + seconds(31));
  EXPECT_EQ(os.elapsed(), seconds(41));  // 1 s + --shutdown_timeout 30 + --kill_timeout 10
  EXPECT_NE(err_.find("acc-launch: rank 0 pid 1000 is in D state (wchan nvidia_wait_for_fence) "
                      "and cannot be killed; this host may need recycling\n"),
            std::string::npos)
      << err_;
  EXPECT_EQ(err_.find("FAILED"), std::string::npos) << err_;  // not a worker failure report
}

TEST_F(AgentTest, TheKillBoundAlsoHoldsWhenTheLauncherIsStopped) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) {
    Script stuck;
    stuck.survives_sigkill = true;
    stuck.ignores_sigterm = true;
    return stuck;
  };
  os.signal_launcher(seconds(1), SIGTERM);
  LaunchPlan p = plan(2);
  p.kill_timeout = seconds(2);
  EXPECT_EQ(run(std::move(p), os), kExitUnkillable);
  EXPECT_EQ(os.elapsed(), seconds(33));
  EXPECT_NE(err_.find("rank 1 pid 1001 is in D state"), std::string::npos) << err_;
}

// Issue 17, static fail-fast: another node's failure stops this node's workers at the next
// keep-alive tick, and this node exits with the job's status, naming that node.
TEST_F(AgentTest, AnotherNodesFailureStopsTheWorkersHereAndNamesThatNode) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return runs_until_signalled(); };
  MembershipLog log;
  auto membership = std::make_unique<ScriptedMembership>(os, log);
  membership->at = milliseconds(2500);
  membership->event.kind = JobEvent::Kind::kEnded;
  membership->event.end = node_one_failed();
  membership->event.shared = true;
  EXPECT_EQ(run(plan(2, 3), os, std::move(membership)), 3);
  ASSERT_EQ(os.processes().size(), 2u);  // no restart: the job is over
  for (const auto& p : os.processes()) EXPECT_EQ(p->when(SIGTERM), os.start() + seconds(3));
  EXPECT_TRUE(log.ends.empty());  // nothing of its own to publish
  EXPECT_NE(err_.find("root cause (* above): rank 3 (local rank 1) on node 1 (host b) exited "
                      "with 3"),
            std::string::npos)
      << err_;
  EXPECT_NE(err_.find("acc-launch: error: node 1 (host b) ended the job: rank 3 exited with 3\n"),
            std::string::npos)
      << err_;
}

TEST_F(AgentTest, AFailureHereIsPublishedTheMomentItHappensAndTheNodeBeatsWhileItStops) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    if (index == 1) return exits(3, seconds(1));
    Script stubborn;
    stubborn.ignores_sigterm = true;
    return stubborn;
  };
  MembershipLog log;
  EXPECT_EQ(run(plan(2), os, std::make_unique<ScriptedMembership>(os, log)), 3);
  ASSERT_EQ(log.ends.size(), 1u);
  EXPECT_EQ(log.ends[0].first, os.start() + seconds(1));  // not after the 30 s grace
  EXPECT_EQ(log.ends[0].second.rank, 1);
  EXPECT_EQ(log.ends[0].second.status, 3);
  EXPECT_EQ(log.ends[0].second.reason, "rank 1 exited with 3");
  EXPECT_GE(log.kept_alive.size(), 29u);  // every second of --shutdown_timeout 30
  EXPECT_NE(err_.find("node 0 (host node7) ended the job: rank 1 exited with 3"), std::string::npos)
      << err_;
}

TEST_F(AgentTest, AnotherNodesRestartRunsTheNextAttemptHereWithItsCount) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    return index < 2 ? runs_until_signalled() : exits(0, seconds(1));
  };
  MembershipLog log;
  auto membership = std::make_unique<ScriptedMembership>(os, log);
  membership->at = seconds(2);
  membership->event.kind = JobEvent::Kind::kRestart;
  membership->event.restart_count = 1;
  membership->event.why = "another node's workers failed";
  EXPECT_EQ(run(plan(2, 1), os, std::move(membership)), 0);
  EXPECT_EQ(log.joins, (std::vector<int>{0, 1}));
  ASSERT_EQ(os.processes().size(), 4u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(os.processes()[i]->when(SIGTERM), os.start() + seconds(2));
  for (size_t i = 2; i < 4; ++i)
    EXPECT_EQ(os.processes()[i]->env("TORCHELASTIC_RESTART_COUNT"), "1") << i;
  EXPECT_TRUE(log.restarts.empty());  // the other node asked; this one follows
  EXPECT_NE(err_.find("another node's workers failed; restarting (1 of 1)"), std::string::npos)
      << err_;
}

// A membership whose other node's restart arrives as an event on its descriptor (a pipe the test
// writes), with a poll interval of an hour: only the event can make the agent look in time.
class EventMembership : public ScriptedMembership {
 public:
  EventMembership(FakeOs& os, MembershipLog& log) : ScriptedMembership(os, log), os_(os) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2");
    read_end_.reset(fds[0]);
    write_end_.reset(fds[1]);
  }
  std::chrono::milliseconds poll_interval() const override { return std::chrono::hours(1); }
  int event_fd() override { return read_end_.get(); }
  bool take_event() override {
    char byte;
    const bool got = ::read(read_end_.get(), &byte, 1) == 1;
    taken_ = taken_ || got;
    return got;
  }
  // The restart is there to see once the event was taken, or (as a poll would find it) once
  // the poll interval has passed: an agent that does not wait on the descriptor restarts late.
  JobEvent watch(int restart_count) override {
    if (!taken_ && os_.now() < os_.start() + poll_interval()) return {};
    return ScriptedMembership::watch(restart_count);
  }
  // Another node restarts the job: its key is set, the descriptor readable.
  void fire() { (void)!::write(write_end_.get(), "x", 1); }

 private:
  FakeOs& os_;
  UniqueFd read_end_;
  UniqueFd write_end_;
  bool taken_ = false;
};

TEST_F(AgentTest, AnotherNodesRestartIsActedOnTheMomentItsEventArrivesNotAtTheNextPoll) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    return index < 2 ? runs_until_signalled() : exits(0, seconds(1));
  };
  MembershipLog log;
  auto membership = std::make_unique<EventMembership>(os, log);
  membership->event.kind = JobEvent::Kind::kRestart;
  membership->event.restart_count = 1;
  membership->event.why = "another node's workers failed";
  membership->fire();
  EXPECT_EQ(run(plan(2, 1), os, std::move(membership)), 0);
  EXPECT_EQ(log.joins, (std::vector<int>{0, 1}));
  ASSERT_EQ(os.processes().size(), 4u);
  // The fake clock never reached the poll interval (an hour): the event alone stopped them.
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(os.processes()[i]->when(SIGTERM), os.start()) << i;
}

TEST_F(AgentTest, ANodeWhoseWorkersSucceededRunsThemAgainWhenAnotherNodeRestartsTheJob) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return exits(0, seconds(1)); };
  MembershipLog log;
  auto membership = std::make_unique<ScriptedMembership>(os, log);
  membership->at_exit.kind = JobEvent::Kind::kRestart;
  membership->at_exit.restart_count = 1;
  membership->at_exit.why = "another node's workers failed";
  EXPECT_EQ(run(plan(2, 1), os, std::move(membership)), 0);
  EXPECT_EQ(log.joins, (std::vector<int>{0, 1}));
  ASSERT_EQ(os.processes().size(), 4u);
  EXPECT_EQ(os.processes()[3]->env("TORCHELASTIC_RESTART_COUNT"), "1");
}

TEST_F(AgentTest, AStopSignalHereEndsTheJobForEveryNode) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return runs_until_signalled(); };
  os.signal_launcher(seconds(2), SIGTERM);
  MembershipLog log;
  EXPECT_EQ(run(plan(2, 3), os, std::make_unique<ScriptedMembership>(os, log)), 128 + SIGTERM);
  ASSERT_EQ(log.ends.size(), 1u);
  EXPECT_EQ(log.ends[0].second.status, 128 + SIGTERM);
  EXPECT_EQ(log.ends[0].second.rank, -1);
  EXPECT_EQ(log.ends[0].second.reason, "its launcher was stopped by SIGTERM");
}

}  // namespace
}  // namespace acc::launcher
