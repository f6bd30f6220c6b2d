// `acc-launch stacks` (commands/stacks_command.h) over a fake Os: which processes it takes for
// launchers (from the fake /proc), the signal it sends each, and how long it waits for the report
// on the Os's clock. tests/integration drives the real command against a real launcher.

#include "commands/stacks_command.h"

#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "fake_os.h"
#include "hangs/stall_watch.h"

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using testing::FakeOs;

// Above any pid_max (4194304): no process of the machine has these pids, so the report files the
// test writes at on_demand_report_path(pid) belong to no real launcher; apart for each test
// process, as ctest runs the cases side by side and a report's path is fixed by its pid.
const int kPids = 5000000 + 4 * (::getpid() % 1000000);
const int kLauncher = kPids + 1;
const int kWatchdog = kPids + 2;
const int kTop = kPids + 3;
const int kOtherLauncher = kPids + 4;
// Where this command runs: its session and its working directory, as the fake /proc says.
constexpr int kSession = 4242;
const char* const kDirectory = "/home/user/job";

class StacksCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeProc::Process& self = os_.fake_proc.set(::getpid());
    self.stat.session = kSession;
    self.working_directory = kDirectory;
    launcher(kLauncher, 1);
    os_.fake_proc.at(kLauncher).stat.session = kSession;
    launcher(kWatchdog, kLauncher);  // a launcher's watchdog looks like it: its child
    os_.fake_proc.set(kTop).command_line = {"/opt/bin/acc-launch", "top"};
    os_.fake_proc.set(77).command_line = {"python3", "train.py"};
  }
  void TearDown() override {
    for (int pid : {kLauncher, kWatchdog, kTop, kOtherLauncher})
      std::filesystem::remove(on_demand_report_path(pid));
  }
  void launcher(int pid, int parent) {
    os_.fake_proc.set(pid, "S", 0, parent).command_line = {"/opt/bin/acc-launch",
                                                           "--nproc_per_node", "2", "train.py"};
  }
  // The launcher writes its report `after_checks` looks of the command after its signal.
  void reports_after(int after_checks) {
    os_.on_signal = [this, after_checks](pid_t pid, int sig) {
      if (sig == SIGUSR2) checks_ = 0;
      if (sig == 0 && ++checks_ == after_checks)
        std::ofstream(on_demand_report_path(pid)) << "report of " << pid << "\n";
    };
  }
  int run(const std::vector<std::string>& args) {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    int code = -1;
    try {
      code = run_stacks_command(args, os_);
    } catch (...) {
      output_ = ::testing::internal::GetCapturedStdout();
      errors_ = ::testing::internal::GetCapturedStderr();
      throw;
    }
    output_ = ::testing::internal::GetCapturedStdout();
    errors_ = ::testing::internal::GetCapturedStderr();
    return code;
  }
  std::vector<std::pair<pid_t, int>> usr2s() const {
    std::vector<std::pair<pid_t, int>> sent;
    for (const auto& s : os_.signalled)
      if (s.second == SIGUSR2) sent.push_back(s);
    return sent;
  }

  FakeOs os_;
  int checks_ = 0;
  std::string output_;
  std::string errors_;
};

TEST_F(StacksCommandTest, PrintsTheReportTheLauncherWritesAfterItsSignalAndRemovesIt) {
  reports_after(3);
  EXPECT_EQ(run({std::to_string(kLauncher)}), 0);
  EXPECT_EQ(output_, "report of " + std::to_string(kLauncher) + "\n");
  EXPECT_EQ(usr2s(), (std::vector<std::pair<pid_t, int>>{{kLauncher, SIGUSR2}}));
  EXPECT_EQ(os_.elapsed(), 150ms) << "three looks 50 ms apart before the file, one after";
  EXPECT_FALSE(std::filesystem::exists(on_demand_report_path(kLauncher)));
}

// On a machine shared under one user (root in a container) another session's launcher, started
// elsewhere, is someone else's job: SIGUSR2 would print a report into their terminal.
TEST_F(StacksCommandTest, WithoutAPidAsksTheLauncherOfThisSessionButNotItsWatchdogNorASubcommand) {
  launcher(kOtherLauncher, 1);
  os_.fake_proc.at(kOtherLauncher).stat.session = kSession + 1;
  os_.fake_proc.at(kWatchdog).stat.session = kSession;
  os_.fake_proc.at(kTop).stat.session = kSession;
  reports_after(1);
  EXPECT_EQ(run({}), 0);
  EXPECT_EQ(usr2s(), (std::vector<std::pair<pid_t, int>>{{kLauncher, SIGUSR2}}));
  EXPECT_EQ(output_, "report of " + std::to_string(kLauncher) + "\n");
}

TEST_F(StacksCommandTest, WithoutAPidALauncherStartedFromThisDirectoryIsAsked) {
  os_.fake_proc.at(kLauncher).stat.session = kSession + 1;  // started with nohup, or in tmux
  os_.fake_proc.at(kLauncher).working_directory = kDirectory;
  reports_after(1);
  EXPECT_EQ(run({}), 0);
  EXPECT_EQ(usr2s(), (std::vector<std::pair<pid_t, int>>{{kLauncher, SIGUSR2}}));
}

TEST_F(StacksCommandTest, WithoutAPidSeveralLaunchersStartedHereAreListedAndNoneIsSignalled) {
  const char* tz = std::getenv("TZ");
  const std::string saved_tz = tz ? tz : "";
  ::setenv("TZ", "UTC0", 1);
  ::tzset();
  launcher(kOtherLauncher, 1);
  os_.fake_proc.at(kOtherLauncher).working_directory = kDirectory;
  os_.fake_proc.at(kOtherLauncher).command_line = {"acc-launch", "--no_python", "/bin/sh", "-c",
                                                   "sleep 9\n"};
  os_.fake_proc.at(kLauncher).stat.started = 1767225600;  // 2026-01-01 00:00:00 UTC
  EXPECT_EQ(run({}), 2);
  tz ? ::setenv("TZ", saved_tz.c_str(), 1) : ::unsetenv("TZ");
  ::tzset();
  EXPECT_TRUE(os_.signalled.empty());
  EXPECT_EQ(output_, "");
  EXPECT_EQ(errors_,
            "acc-launch stacks: 2 acc-launch launchers were started from this session or this "
            "directory; name one: acc-launch stacks LAUNCHER_PID\n  " +
                std::to_string(kLauncher) +
                "  started 2026-01-01 00:00:00  /opt/bin/acc-launch --nproc_per_node 2 train.py\n"
                "  " +
                std::to_string(kOtherLauncher) +
                "  started ?  acc-launch --no_python /bin/sh -c sleep 9\\n\n");
}

TEST_F(StacksCommandTest, WithoutAPidAndNoLauncherStartedHereTheUserIsToldSoInOneLine) {
  os_.fake_proc.at(kLauncher).stat.session = kSession + 1;
  try {
    run({});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "acc-launch stacks: no acc-launch launcher was started from this session or this "
              "directory; name one of the 1 on this machine: acc-launch stacks LAUNCHER_PID (see "
              "`pgrep -a acc-launch`)");
  }
  EXPECT_TRUE(os_.signalled.empty());
  // Named, it is asked.
  reports_after(1);
  EXPECT_EQ(run({std::to_string(kLauncher)}), 0);
  EXPECT_EQ(usr2s(), (std::vector<std::pair<pid_t, int>>{{kLauncher, SIGUSR2}}));
}

TEST_F(StacksCommandTest, ALauncherThatEndsBeforeItsReportIsNamed) {
  os_.on_signal = [this](pid_t pid, int sig) {
    if (sig == SIGUSR2) os_.fake_proc.remove(pid);
  };
  try {
    run({std::to_string(kLauncher)});
    FAIL() << "no error";
  } catch (const LaunchError& e) {
    EXPECT_EQ(std::string(e.what()), "acc-launch stacks: launcher " + std::to_string(kLauncher) +
                                         " ended before it wrote its report");
  }
}

TEST_F(StacksCommandTest, ALauncherThatNeverWritesItsReportTimesOutAfterThirtySeconds) {
  EXPECT_THROW(run({std::to_string(kLauncher)}), TimeoutError);
  EXPECT_EQ(os_.elapsed(), 30s);
}

// SIGUSR2 ends a process that does not handle it: only our launchers get it.
TEST_F(StacksCommandTest, AProcessThatIsNoLauncherOfOursIsRefusedAndNotSignalled) {
  launcher(kOtherLauncher, 1);
  os_.fake_proc.at(kOtherLauncher).owner = static_cast<long>(::getuid()) + 1;  // another user's
  for (int pid : {77, kTop, kOtherLauncher, 6000000}) {
    try {
      run({std::to_string(pid)});
      ADD_FAILURE() << pid << " taken for a launcher";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), "acc-launch stacks: " + std::to_string(pid) +
                                           " is not a running acc-launch launcher of yours (see "
                                           "`pgrep -a acc-launch`)");
    }
  }
  EXPECT_THROW(run({"12x"}), ConfigError);
  EXPECT_TRUE(os_.signalled.empty());
}

TEST_F(StacksCommandTest, WithoutAnyLauncherTheUserIsToldSo) {
  os_.fake_proc.remove(kLauncher);
  os_.fake_proc.remove(kWatchdog);
  EXPECT_THROW(run({}), ConfigError);
  EXPECT_TRUE(os_.signalled.empty());
}

}  // namespace
}  // namespace acc::launcher
