// The fan-out head's ssh sessions over a scripted Os (fake_os.h): the probe, the first failure
// stopping the other nodes, a stop signal stopping every node, SIGKILL after the grace, the
// relayed output; with no real ssh and no wall-clock wait.

#include "nodes/remote_job.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "fake_os.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeOs;
using testing::Script;

RemoteJobSettings settings() {
  RemoteJobSettings s;
  s.env = {"PATH=/usr/bin:/bin"};
  s.path = "/usr/bin:/bin";
  s.stop_grace = seconds(35);  // --shutdown_timeout 30 and the head's 5 s
  s.kill_timeout = seconds(10);
  return s;
}

std::vector<RemoteSession> sessions(const std::vector<std::string>& hosts) {
  std::vector<RemoteSession> result;
  for (size_t i = 0; i < hosts.size(); ++i) {
    RemoteSession session;
    session.node.host = hosts[i];
    session.node.node_rank = static_cast<int>(i);
    session.argv = {"ssh", "--", hosts[i], "acc-launch --node_rank " + std::to_string(i)};
    result.push_back(session);
  }
  return result;
}

// A node's ssh as a remote launcher (--stop_on_stdin_eof) makes it: runs until its stdin ends,
// then stops its workers as on SIGTERM and exits 143.
Script remote_launcher() {
  Script script;
  script.exits_at_stdin_eof = 143;
  return script;
}

Script exits(int code, milliseconds after) {
  Script script;
  script.exit_after = after;
  script.exit_code = code;
  return script;
}

class RemoteJobTest : public ::testing::Test {
 protected:
  // Runs the job over `os`; the head's messages land in `err_`.
  int run(FakeOs& os, const std::vector<std::string>& hosts) {
    ::testing::internal::CaptureStderr();
    int status = -1;
    try {
      status = run_remote_job(os, sessions(hosts), settings());
    } catch (...) {
      err_ = ::testing::internal::GetCapturedStderr();
      throw;
    }
    err_ = ::testing::internal::GetCapturedStderr();
    return status;
  }

  std::string err_;
};

TEST_F(RemoteJobTest, OneHostFailingClosesTheOthersStdinAndTheExitStatusIsThatHosts) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    return index == 1 ? exits(7, seconds(2)) : remote_launcher();
  };
  EXPECT_EQ(run(os, {"a", "b", "c"}), 7);
  ASSERT_EQ(os.processes().size(), 3u);
  for (int i : {0, 2}) {
    const auto& p = *os.processes()[i];
    EXPECT_EQ(p.stdin_closed, os.start() + seconds(2)) << i;
    EXPECT_TRUE(p.received.empty()) << i;  // they went by themselves: no signal
    EXPECT_EQ(p.status, 143 << 8) << i;
    EXPECT_TRUE(p.reaped) << i;
  }
  EXPECT_EQ(os.elapsed(), seconds(2));
  EXPECT_NE(err_.find("acc-launch: error: node 1 (b) failed with exit status 7; stopped the "
                      "other nodes\n"),
            std::string::npos)
      << err_;
}

TEST_F(RemoteJobTest, AHostWhoseSshExits255IsNamedAsABrokenConnection) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    return index == 0 ? exits(255, seconds(1)) : remote_launcher();
  };
  EXPECT_EQ(run(os, {"a", "b"}), 255);
  EXPECT_NE(err_.find("node 0 (a) failed or its ssh connection broke (ssh exited 255)"),
            std::string::npos)
      << err_;
}

TEST_F(RemoteJobTest, EveryHostExitingZeroEndsTheJobWithZero) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) { return exits(0, seconds(1 + index)); };
  EXPECT_EQ(run(os, {"a", "b"}), 0);
  for (const auto& p : os.processes()) EXPECT_FALSE(p->stdin_closed) << p->pid;
  EXPECT_EQ(os.elapsed(), seconds(2));
}

class RemoteJobStopTest : public RemoteJobTest, public ::testing::WithParamInterface<int> {};

TEST_P(RemoteJobStopTest, AStopSignalClosesEveryStdinAndReturns128PlusIt) {
  const int sig = GetParam();
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return remote_launcher(); };
  os.signal_launcher(seconds(3), sig);
  EXPECT_EQ(run(os, {"a", "b", "c"}), 128 + sig);
  ASSERT_EQ(os.processes().size(), 3u);
  for (const auto& p : os.processes()) {
    EXPECT_EQ(p->stdin_closed, os.start() + seconds(3)) << p->pid;
    EXPECT_TRUE(p->received.empty()) << p->pid;
    EXPECT_TRUE(p->reaped) << p->pid;
  }
  EXPECT_NE(err_.find(std::string("stopped by ") + sigabbrev_np(sig) + "; stopped every node"),
            std::string::npos)
      << err_;
}

INSTANTIATE_TEST_SUITE_P(IntAndTerm, RemoteJobStopTest, ::testing::Values(SIGINT, SIGTERM));

TEST_F(RemoteJobTest, AHostStillRunningAfterItsStdinClosedGetsSigkillAfterTheGrace) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    return index == 0 ? exits(3, seconds(1)) : Script{};  // host b ignores the end of file
  };
  EXPECT_EQ(run(os, {"a", "b"}), 3);
  const auto& b = *os.processes()[1];
  EXPECT_EQ(b.stdin_closed, os.start() + seconds(1));
  EXPECT_EQ(b.when(SIGKILL), os.start() + seconds(36));  // 1 s + the 35 s grace
  EXPECT_EQ(b.received.size(), 1u);                      // nothing before SIGKILL
  EXPECT_EQ(b.status, SIGKILL);
  EXPECT_NE(err_.find("nodes still running 35 s after they were told to stop; dropping their "
                      "connections"),
            std::string::npos)
      << err_;
}

TEST_F(RemoteJobTest, ASecondStopSignalSendsSigkillAtOnce) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return Script{}; };
  os.signal_launcher(seconds(1), SIGINT);
  os.signal_launcher(seconds(4), SIGINT);
  EXPECT_EQ(run(os, {"a", "b"}), 128 + SIGINT);
  for (const auto& p : os.processes()) EXPECT_EQ(p->when(SIGKILL), os.start() + seconds(4));
}

TEST_F(RemoteJobTest, AnSshThatCannotBeStartedEndsThoseThatWere) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int index) {
    Script script = remote_launcher();
    if (index == 1) script.cannot_exec = "Permission denied";
    return script;
  };
  EXPECT_THROW(run(os, {"a", "b", "c"}), LaunchError);
  ASSERT_EQ(os.processes().size(), 2u);  // no ssh to c
  EXPECT_TRUE(os.processes()[0]->got(SIGKILL));
  for (const auto& p : os.processes()) EXPECT_TRUE(p->reaped) << p->pid;
}

TEST_F(RemoteJobTest, EachNodesLinesAreRelayedWithItsHostsName) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) {
    Script script = exits(0, seconds(1));
    script.stdout_lines = {{milliseconds(100), "loading\n[a 0]: step 1\n"}};
    script.stderr_lines = {{milliseconds(200), "warning: slow\n"}};
    return script;
  };
  ::testing::internal::CaptureStdout();
  const int status = run(os, {"a"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, 0);
  // The launcher's own line gets the host's name; its worker's already carries it.
  EXPECT_EQ(out, "[a]: loading\n[a 0]: step 1\n");
  EXPECT_NE(err_.find("[a]: warning: slow\n"), std::string::npos) << err_;
}

// --- the probe ---------------------------------------------------------------------------

TEST(RemoteProbeTest, AHostThatCannotBeReachedIsNamedWithWhatSshSaid) {
  FakeOs os;
  os.program = [](const SpawnRequest& request, int) {
    Script script = exits(request.argv[2] == "b" ? 255 : 0, seconds(1));
    if (request.argv[2] == "b")
      script.stderr_lines = {{milliseconds(500), "b: Permission denied (publickey).\r\n"}};
    return script;
  };
  try {
    probe_hosts(os, sessions({"a", "b", "c"}), settings());
    FAIL() << "no NetworkError";
  } catch (const NetworkError& e) {
    EXPECT_STREQ(e.what(),
                 "cannot reach host b over ssh: b: Permission denied (publickey). (check it "
                 "with: ssh b true)");
  }
  EXPECT_EQ(os.processes().size(), 3u);  // all at once, not stopped at the first failure
  for (const auto& p : os.processes()) EXPECT_TRUE(p->reaped) << p->pid;
}

TEST(RemoteProbeTest, ASilentFailureGivesSshsExitStatus) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return exits(255, seconds(1)); };
  try {
    probe_hosts(os, sessions({"a"}), settings());
    FAIL() << "no NetworkError";
  } catch (const NetworkError& e) {
    EXPECT_STREQ(e.what(),
                 "cannot reach host a over ssh: ssh exited 255 (check it with: ssh a "
                 "true)");
  }
}

TEST(RemoteProbeTest, AStopSignalKillsEveryProbeAndThrowsInterruptedError) {
  FakeOs os;
  os.program = [](const SpawnRequest&, int) { return Script{}; };  // hosts that never answer
  os.signal_launcher(seconds(2), SIGTERM);
  try {
    probe_hosts(os, sessions({"a", "b"}), settings());
    FAIL() << "no InterruptedError";
  } catch (const InterruptedError& e) {
    EXPECT_EQ(e.signal(), SIGTERM);
    EXPECT_STREQ(e.what(), "stopped by SIGTERM while probing the hosts over ssh");
  }
  for (const auto& p : os.processes()) {
    EXPECT_EQ(p->when(SIGKILL), os.start() + seconds(2)) << p->pid;
    EXPECT_TRUE(p->reaped) << p->pid;
  }
}

}  // namespace
}  // namespace acc::launcher
