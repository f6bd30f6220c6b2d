// --stall_timeout and `acc-launch stacks` with native workers (test_worker): the report, the exit
// status, nothing left behind. The PyTorch and libacc cases are in pytorch/ and tests/runtime/.

#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;
using std::chrono::seconds;

std::vector<std::string> waiting_workers(std::vector<std::string> launcher_args,
                                         const std::string& dir) {
  launcher_args.insert(launcher_args.end(), {"--no_python", worker_binary(), "wait", dir});
  return launcher_args;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(StallTest, SilentWorkersAreReportedAndStoppedWithExitStatusFour) {
  const std::string dir = make_temp_dir();
  LaunchRun run = run_launcher(waiting_workers(
      {"--nproc_per_node", "2", "--stall_timeout", "1", "--log_dir", dir + "/logs"}, dir));
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_LT(run.elapsed, seconds(1 + 5 + 5)) << "stall timeout, stacks, startup on a busy machine";
  EXPECT_NE(run.err.find("acc-launch: hang: no worker on"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("made progress for 1."), std::string::npos) << run.err;
  EXPECT_EQ(count(run.err, "\n  0     0      "), 1u) << run.err;
  EXPECT_EQ(count(run.err, "\n  1     1      "), 1u) << run.err;
  EXPECT_NE(run.err.find("stopping the workers (--stall_timeout)"), std::string::npos);
  bool report_file = false;
  for (const auto& entry : fs::recursive_directory_iterator(dir + "/logs"))
    report_file |= entry.path().filename() == "hang_report.txt";
  EXPECT_TRUE(report_file);
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(StallTest, TheTimeoutCanComeFromTheEnvironment) {
  const std::string dir = make_temp_dir();
  LaunchRun run = run_launcher(waiting_workers({}, dir), {{"ACC_STALL_TIMEOUT", "0.5"}});
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(run.err.find("acc-launch: hang: no worker on"), std::string::npos) << run.err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

// The native fallbacks, chosen by what PATH offers the launcher: gdb alone, then nothing.
TEST(StallTest, NativeStacksComeFromGdbWithoutEuStack) {
  if (!fs::exists("/usr/bin/gdb")) GTEST_SKIP() << "gdb is not installed";
  const std::string dir = make_temp_dir();
  fs::create_directories(dir + "/bin");
  fs::create_symlink("/usr/bin/gdb", dir + "/bin/gdb");
  LaunchRun run =
      run_launcher(waiting_workers({"--stall_timeout", "0.5"}, dir), {{"PATH", dir + "/bin"}});
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(run.err.find(" gdb\n"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("block_forever"), std::string::npos) << run.err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(StallTest, WithoutDebuggersTheReportSaysWhatProcShows) {
  const std::string dir = make_temp_dir();
  LaunchRun run =
      run_launcher(waiting_workers({"--stall_timeout", "0.5"}, dir), {{"PATH", dir + "/none"}});
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(run.err.find("/proc (neither eu-stack nor gdb is installed)"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("(main): state S, wchan "), std::string::npos) << run.err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(StallTest, ReportActionReportsOnceAndTheJobGoesOn) {
  const std::string dir = make_temp_dir();
  pid_t launcher = start_launcher(
      waiting_workers({"--stall_timeout", "0.5", "--stall_action", "report"}, dir), dir);
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (read_text(dir + "/launcher.err").find("the job goes on") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // No progress, so no second report however long we wait: three more timeouts here.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(processes_mentioning(dir).size() >= 1) << "the job must still run";
  ::kill(launcher, SIGTERM);
  EXPECT_EQ(wait_launcher(launcher), 128 + SIGTERM);
  EXPECT_EQ(count(read_text(dir + "/launcher.err"), "acc-launch: hang:"), 1u)
      << read_text(dir + "/launcher.err");
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(StallTest, StacksCommandPrintsTheReportAndLeavesTheJobRunning) {
  const std::string dir = make_temp_dir();
  pid_t launcher = start_launcher(waiting_workers({"--nproc_per_node", "2"}, dir), dir);
  for (int rank = 0; rank < 2; ++rank)
    ASSERT_TRUE(wait_for_file(dir + "/" + std::to_string(rank) + ".ready", seconds(30)));
  LaunchRun stacks = run_launcher({"stacks", std::to_string(launcher)});
  EXPECT_EQ(stacks.exit_code, 0) << stacks.err;
  EXPECT_EQ(stacks.out.rfind("acc-launch: hang report (on demand)", 0), 0u) << stacks.out;
  EXPECT_EQ(count(stacks.out, "\n  0     0      "), 1u) << stacks.out;
  EXPECT_EQ(count(stacks.out, "\n  1     1      "), 1u) << stacks.out;
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_FALSE(fs::exists(dir + "/" + std::to_string(rank) + ".term")) << "a worker was hit";
  ::kill(launcher, SIGTERM);
  EXPECT_EQ(wait_launcher(launcher), 128 + SIGTERM);
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(StallTest, StacksRefusesAPidThatIsNoLauncher) {
  LaunchRun run = run_launcher({"stacks", std::to_string(::getpid())});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("is not a running acc-launch launcher"), std::string::npos) << run.err;
}

TEST(StallTest, BadStallFlagsExitTwoNamingTheFlag) {
  LaunchRun run = run_launcher({"--stall_action", "wait", "/bin/true"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--stall_action"), std::string::npos) << run.err;
  run = run_launcher({"--stall_timeout", "soon", "/bin/true"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--stall_timeout"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace acc::testing
