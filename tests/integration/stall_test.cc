// --stall_timeout and `acc-launch stacks` with native workers (test_worker): the report, the exit
// status, nothing left behind. The PyTorch and libacc cases are in pytorch/ and tests/runtime/.

#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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
  LaunchRun run =
      run_launcher(waiting_workers({"--nproc_per_node", "2", "--stall_timeout", "1",
                                    "--stall_init_timeout", "1", "--log_dir", dir + "/logs"},
                                   dir));
  EXPECT_EQ(run.exit_code, 4) << run.err;
  // When the stall fires (one timeout after the last progress) is stall_watch_test's, on a fake
  // clock.
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

TEST(StallTest, QuietStillSaysWhereTheHangReportIsOnce) {
  const std::string dir = make_temp_dir();
  LaunchRun run = run_launcher(waiting_workers(
      {"--quiet", "--nproc_per_node", "2", "--stall_timeout", "1", "--stall_init_timeout", "1"},
      dir));
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_EQ(count(run.err, "hang report in "), 1u) << run.err;
  // The path said is the report's, in the run directory that is kept for it.
  const size_t at = run.err.find("hang report in ");
  ASSERT_NE(at, std::string::npos);
  const size_t start = at + std::string("hang report in ").size();
  const std::string path = run.err.substr(start, run.err.find(';', start) - start);
  EXPECT_TRUE(fs::exists(path)) << path;
  EXPECT_NE(read_text(path).find("hang"), std::string::npos);
  fs::remove_all(fs::path(path).parent_path());
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(StallTest, TheTimeoutCanComeFromTheEnvironment) {
  const std::string dir = make_temp_dir();
  LaunchRun run = run_launcher(waiting_workers({}, dir),
                               {{"ACC_STALL_TIMEOUT", "0.5"}, {"ACC_STALL_INIT_TIMEOUT", "0.5"}});
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
      run_launcher(waiting_workers({"--stall_timeout", "0.5", "--stall_init_timeout", "0.5"}, dir),
                   {{"PATH", dir + "/bin"}});
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(run.err.find(" gdb\n"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("block_forever"), std::string::npos) << run.err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(StallTest, WithoutDebuggersTheReportSaysWhatProcShows) {
  const std::string dir = make_temp_dir();
  LaunchRun run =
      run_launcher(waiting_workers({"--stall_timeout", "0.5", "--stall_init_timeout", "0.5"}, dir),
                   {{"PATH", dir + "/none"}});
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(run.err.find("/proc (neither eu-stack nor gdb is installed)"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("(main): state S, wchan "), std::string::npos) << run.err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(StallTest, ReportActionReportsOnceAndTheJobGoesOn) {
  const std::string dir = make_temp_dir();
  pid_t launcher = start_launcher(waiting_workers({"--stall_timeout", "0.5", "--stall_init_timeout",
                                                   "0.5", "--stall_action", "report"},
                                                  dir),
                                  dir);
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (read_text(dir + "/launcher.err").find("the job goes on") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // That a silence is reported once however long it lasts is stall_watch_test's, on a fake clock.
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

// Ranks that use no CPU but run kernels (a blocking synchronize on the GPU) compute: no kill, one
// notice. NVML is fake_nvml.cc here, loaded as the real one is; "idle" is the same job on a GPU
// that runs nothing, which is a stall.
std::vector<std::string> quiet_workers(double seconds) {
  return {"--nproc_per_node",
          "2",
          "--stall_timeout",
          "1",
          "--stall_init_timeout",
          "1",
          "--no_python",
          worker_binary(),
          "quiet",
          std::to_string(seconds)};
}

TEST(StallTest, RanksBusyOnTheirGpuOnlyAreNotKilled) {
  LaunchRun run = run_launcher(
      quiet_workers(4), {{"ACC_NVML_LIBRARY", ACC_FAKE_NVML_LIBRARY}, {"ACC_FAKE_NVML", "busy"}});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("acc-launch: hang"), std::string::npos) << run.err;
  EXPECT_EQ(count(run.err,
                  "every rank is busy on CPU or GPU (2 ranks on GPU only, by NVML) "
                  "outside collectives"),
            1u)
      << run.err;
  EXPECT_EQ(count(run.out, "done"), 2u) << run.out;
}

TEST(StallTest, RanksIdleOnCpuAndGpuAreAStall) {
  LaunchRun run = run_launcher(
      quiet_workers(30), {{"ACC_NVML_LIBRARY", ACC_FAKE_NVML_LIBRARY}, {"ACC_FAKE_NVML", "idle"}});
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(run.err.find("acc-launch: hang: no worker on"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("busy on CPU"), std::string::npos) << run.err;
}

// --- PyTorch (Gloo, CPU) jobs as a user writes them: no false kills ---------------------------

const std::string kPytorch = ACC_PYTORCH_DIR;

std::vector<std::string> torch_job(std::vector<std::string> launcher_args,
                                   const std::string& script,
                                   const std::vector<std::string>& script_args) {
  launcher_args.insert(launcher_args.end(),
                       {"--python", "/usr/bin/python3", kPytorch + "/" + script});
  launcher_args.insert(launcher_args.end(), script_args.begin(), script_args.end());
  return launcher_args;
}

TEST(StallTest, AStartUpLongerThanTheStallTimeoutIsNoHang) {
  if (!python_has_torch("/usr/bin/python3"))
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
  LaunchRun run = run_launcher(
      torch_job({"--nproc_per_node", "4", "--stall_timeout", "3"}, "slow_start.py", {}), {},
      seconds(200));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("acc-launch: hang"), std::string::npos) << run.err;
  EXPECT_EQ(count(run.out, "sum 64"), 4u) << run.out;
}

TEST(StallTest, ASilentJobWhoseRanksAllComputeIsNotKilled) {
  if (!python_has_torch("/usr/bin/python3"))
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
  LaunchRun run = run_launcher(
      torch_job({"--nproc_per_node", "4", "--stall_timeout", "3"}, "silent_compute.py", {"10"}), {},
      seconds(200));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("acc-launch: hang"), std::string::npos) << run.err;
  // One notice per silent stretch: the 10 s of computing (and, on a loaded machine, maybe the
  // ranks' exit, which tears torch down for seconds on CPU).
  EXPECT_GE(count(run.err, "every rank is busy on CPU outside collectives"), 1u) << run.err;
  EXPECT_EQ(count(run.out, "sum 4"), 4u) << run.out;
}

void expect_section_overrun_stops_the_job(const std::vector<std::string>& launcher_args) {
  if (!python_has_torch("/usr/bin/python3"))
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
  const std::string dir = make_temp_dir();
  LaunchRun run =
      run_launcher(torch_job(launcher_args, "section_overrun.py", {dir}), {}, seconds(200));
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(run.err.find("acc-launch: hang: rank 1 on "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(" is still in its section \"checkpoint\" after "), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("(its timeout: 2.0 s)"), std::string::npos) << run.err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(StallTest, ASectionPastItsDeadlineIsReportedByNameAndStopsTheJob) {
  expect_section_overrun_stops_the_job({"--nproc_per_node", "4", "--stall_timeout", "60"});
}

// A section's own deadline is the program's word: it holds without --stall_timeout too.
TEST(StallTest, ASectionPastItsDeadlineStopsTheJobWithoutAStallTimeout) {
  expect_section_overrun_stops_the_job({"--nproc_per_node", "4"});
}

// A rank asleep before its first all_reduce while the others wait in it: no kill during the
// start-up (four imports of torch take longer than the timeout here), and the stall is reported
// soon after the hang begins.
TEST(StallTest, ARankAsleepBeforeItsFirstAllReduceIsAStallAfterStartUpNotDuringIt) {
  if (!python_has_torch("/usr/bin/python3"))
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
  const std::string dir = make_temp_dir();
  const auto started = std::chrono::steady_clock::now();
  pid_t launcher = start_launcher(torch_job({"--nproc_per_node", "4", "--stall_timeout", "3"},
                                            "sleep_before_first_all_reduce.py", {"2", dir}),
                                  dir);
  const auto deadline = started + seconds(200);
  while (read_text(dir + "/launcher.out").find("entering all_reduce") == std::string::npos &&
         read_text(dir + "/launcher.err").find("acc-launch: hang") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto hang = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_launcher(launcher, seconds(200)), 4);
  const auto ended = std::chrono::steady_clock::now();
  const std::string err = read_text(dir + "/launcher.err");
  EXPECT_NE(read_text(dir + "/launcher.out").find("entering all_reduce"), std::string::npos)
      << "stopped during start-up:\n"
      << err;
  const double after_hang = std::chrono::duration<double>(ended - hang).count();
  std::printf("start-up %.1f s, launcher exited %.1f s after the hang began\n",
              std::chrono::duration<double>(hang - started).count(), after_hang);
  // That the stall comes one timeout after the last rank started is stall_watch_test's, on a
  // fake clock; here, that it comes after the start-up and names the collective.
  EXPECT_NE(err.find("acc-launch: hang: no worker on "), std::string::npos) << err;
  EXPECT_NE(err.find("in all_reduce"), std::string::npos) << err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(StallTest, BadStallFlagsExitTwoNamingTheFlag) {
  LaunchRun run = run_launcher({"--stall_action", "wait", "/bin/true"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--stall_action"), std::string::npos) << run.err;
  run = run_launcher({"--stall_timeout", "soon", "/bin/true"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--stall_timeout"), std::string::npos) << run.err;
  run = run_launcher({"--stall_init_timeout", "later", "/bin/true"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--stall_init_timeout"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace acc::testing
