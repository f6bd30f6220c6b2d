// The run directory of the real acc-launch: none is left however a launcher ends (its end, an
// error, a stop signal while its workers start, during a restart, while it waits for the other
// nodes), and the one of a launcher killed outright is removed by the next launcher of the host
// once its owner is gone, never while it lives. Every launcher here makes its run directory in a
// $TMPDIR of the test's own, not in the machine's /dev/shm.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;
using std::chrono::seconds;

class RunDirTest : public ::testing::Test {
 protected:
  // The launchers' environment: their temporary directory is tmp_.
  std::map<std::string, std::string> env() const {
    return {{"TMPDIR", tmp_.path()}, {"TMP", ""}, {"TEMP", ""}, {"TEMPDIR", ""}};
  }
  // The run directories in tmp_; and the launchers' checkpoint memories there (with $TMPDIR set,
  // acc-launch-<run id>-checkpoints_XXXXXX beside the run directory, not in /dev/shm).
  std::set<std::string> run_dirs() const { return launcher_dirs(false); }
  std::set<std::string> memory_dirs() const { return launcher_dirs(true); }
  std::set<std::string> launcher_dirs(bool memory) const {
    std::set<std::string> found;
    for (const auto& entry : fs::directory_iterator(tmp_.path())) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("acc-launch-", 0) == 0 &&
          (name.find("-checkpoints_") != std::string::npos) == memory)
        found.insert(entry.path().string());
    }
    return found;
  }
  // A worker, started by /bin/sh, that writes files_/<rank>.<restart count> and then (on the
  // restart `hang_at` and after) sleeps before doing anything else; before it, it fails.
  std::vector<std::string> sleeping_worker(std::vector<std::string> launcher_args,
                                           int hang_at = 0) const {
    launcher_args.insert(launcher_args.end(),
                         {"--no_python", "/bin/sh", "-c",
                          "touch \"$0/$RANK.$TORCHELASTIC_RESTART_COUNT\"; "
                          "[ \"$TORCHELASTIC_RESTART_COUNT\" -lt " +
                              std::to_string(hang_at) + " ] && exit 1; sleep 60; :",
                          files_.path()});
    return launcher_args;
  }
  // Starts a launcher, waits for `ready` (a file of files_; none: its run directory), stops it
  // with `sig` and expects it gone by that signal, with nothing left: no process, no run
  // directory.
  void stop_and_expect_nothing_left(const std::vector<std::string>& args, const std::string& ready,
                                    int sig) {
    const pid_t launcher = start_launcher(args, files_.path(), env());
    if (ready.empty()) {
      for (int i = 0; i < 6000 && run_dirs().empty(); ++i) ::usleep(5000);  // hang guard: 30 s
      ASSERT_EQ(run_dirs().size(), 1u);
    } else {
      ASSERT_TRUE(wait_for_file(files_.path() + "/" + ready, seconds(30))) << read_launcher_err();
    }
    ::kill(launcher, sig);
    EXPECT_EQ(wait_launcher(launcher), 128 + sig) << read_launcher_err();
    EXPECT_TRUE(run_dirs().empty() && memory_dirs().empty()) << read_launcher_err();
    expect_nothing_left(files_.path());
  }
  std::string read_launcher_err() const { return read_text(files_.path() + "/launcher.err"); }

  TempDir tmp_;    // the launchers' $TMPDIR
  TempDir files_;  // the launchers' output, the workers' files
};

TEST_F(RunDirTest, ALauncherKilledOutrightLeavesItsRunDirectoryAndTheNextLauncherRemovesIt) {
  const pid_t killed = start_launcher(worker({"--nproc_per_node", "2"}, {"wait", files_.path()}),
                                      files_.path(), env());
  for (int rank = 0; rank < 2; ++rank)
    ASSERT_TRUE(wait_for_file(files_.path() + "/" + std::to_string(rank) + ".ready", seconds(30)));
  const std::set<std::string> left = run_dirs();
  ASSERT_EQ(left.size(), 1u);
  ::kill(killed, SIGKILL);
  EXPECT_EQ(wait_launcher(killed), 128 + SIGKILL);
  EXPECT_TRUE(reap_until_no_children(seconds(10))) << "processes of the killed launcher live on";
  expect_nothing_left(files_.path());
  EXPECT_EQ(run_dirs(), left) << "SIGKILL: nothing of the launcher ran";
  EXPECT_EQ(memory_dirs().size(), 1u) << "its checkpoint memory is left too";

  const LaunchRun next = run_launcher(worker({"--nproc_per_node", "1"}, {"env"}), env());
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_TRUE(run_dirs().empty() && memory_dirs().empty())
      << "the next launcher removed it, and its own";
}

TEST_F(RunDirTest, TheRunDirectoryOfALauncherThatRunsIsKeptByTheNextLauncher) {
  const pid_t running = start_launcher(worker({"--nproc_per_node", "1"}, {"wait", files_.path()}),
                                       files_.path(), env());
  ASSERT_TRUE(wait_for_file(files_.path() + "/0.ready", seconds(30)));
  const std::set<std::string> its = run_dirs();
  ASSERT_EQ(its.size(), 1u);
  const LaunchRun next = run_launcher(worker({"--nproc_per_node", "1"}, {"env"}), env());
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(run_dirs(), its);
  EXPECT_TRUE(fs::exists(*its.begin() + "/attempt_0/0")) << "whole";
  ::kill(running, SIGTERM);
  EXPECT_EQ(wait_launcher(running), 128 + SIGTERM);
  EXPECT_TRUE(run_dirs().empty() && memory_dirs().empty());
  expect_nothing_left(files_.path());
}

// What acc-launch did not make, or made for the user to read, is no launcher's to remove.
TEST_F(RunDirTest, ASweepLeavesWhatIsNotAnAbandonedRunDirectory) {
  const pid_t killed = start_launcher(worker({"--nproc_per_node", "1"}, {"wait", files_.path()}),
                                      files_.path(), env());
  ASSERT_TRUE(wait_for_file(files_.path() + "/0.ready", seconds(30)));
  const std::string abandoned = *run_dirs().begin();
  ::kill(killed, SIGKILL);
  EXPECT_EQ(wait_launcher(killed), 128 + SIGKILL);
  EXPECT_TRUE(reap_until_no_children(seconds(10)));
  // Another program's directory with a copy of the abandoned one's owner record, a directory
  // named as a run directory without one, and a file named as one.
  fs::create_directory(tmp_.path() + "/not-a-run-dir");
  fs::copy_file(abandoned + "/owner", tmp_.path() + "/not-a-run-dir/owner");
  fs::create_directory(tmp_.path() + "/acc-launch-job_norecord");
  fs::copy_file(abandoned + "/owner", tmp_.path() + "/acc-launch-file");

  const LaunchRun next = run_launcher({"--nproc_per_node", "1", "--no_python", "/bin/true"}, env());
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(tmp_.path() + "/not-a-run-dir/owner"));
  EXPECT_EQ(run_dirs(), (std::set<std::string>{tmp_.path() + "/acc-launch-job_norecord",
                                               tmp_.path() + "/acc-launch-file"}));
  expect_nothing_left(files_.path());
}

TEST_F(RunDirTest, EveryStopSignalWhileTheWorkersSleepInStartUpLeavesNoRunDirectory) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
    SCOPED_TRACE(sigabbrev_np(sig));
    stop_and_expect_nothing_left(sleeping_worker({"--nproc_per_node", "2"}), "1.0", sig);
    fs::remove(files_.path() + "/0.0");
    fs::remove(files_.path() + "/1.0");
  }
}

// As `timeout` ends a job whose restart hangs in its start-up.
TEST_F(RunDirTest, ASigtermDuringARestartLeavesNoRunDirectory) {
  stop_and_expect_nothing_left(sleeping_worker({"--nproc_per_node", "2", "--max_restarts", "3"}, 1),
                               "1.1", SIGTERM);
}

TEST_F(RunDirTest, ASigtermWhileWaitingForTheOtherNodesLeavesNoRunDirectory) {
  stop_and_expect_nothing_left(
      sleeping_worker({"--nnodes", "2", "--node_rank", "0", "--master_addr", "127.0.0.1",
                       "--master_port", std::to_string(unused_port()), "--nproc_per_node", "1"}),
      "", SIGTERM);
}

// A stop signal at whatever moment of the launch it comes: before the launcher takes its
// signals it dies of it, and has made no run directory yet.
TEST_F(RunDirTest, ASigtermAtAnyMomentOfTheStartLeavesNoRunDirectory) {
  for (int delay_ms : {0, 1, 2, 5, 10, 20, 40, 80}) {
    SCOPED_TRACE("SIGTERM after " + std::to_string(delay_ms) + " ms");
    const pid_t launcher =
        start_launcher(sleeping_worker({"--nproc_per_node", "2"}), files_.path(), env());
    ::usleep(static_cast<useconds_t>(delay_ms) * 1000);
    ::kill(launcher, SIGTERM);
    EXPECT_EQ(wait_launcher(launcher), 128 + SIGTERM) << read_launcher_err();
    EXPECT_TRUE(run_dirs().empty() && memory_dirs().empty()) << read_launcher_err();
    expect_nothing_left(files_.path());
  }
}

TEST_F(RunDirTest, AFailedStartLeavesNoRunDirectory) {
  const LaunchRun run = run_launcher({"--nproc_per_node", "2", "./no-such-program"}, env());
  EXPECT_EQ(run.exit_code, 127) << run.err;
  const LaunchRun failed = run_launcher(sleeping_worker({"--nproc_per_node", "2"}, 99), env());
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  EXPECT_TRUE(run_dirs().empty() && memory_dirs().empty());
}

}  // namespace
}  // namespace acc::testing
