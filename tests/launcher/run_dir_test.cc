// The run directory (agent/run_dir.h): its owner record, the sweep of those whose launcher is
// gone (over a scripted /proc, in a directory of the test's own), and the directory's own ends.

#include "agent/run_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "acc/common/files.h"
#include "fake_proc.h"
#include "launcher_harness.h"

namespace acc::launcher {
namespace {
namespace fs = std::filesystem;

constexpr int kDeadPid = 4001;
constexpr int kLivePid = 4002;
constexpr int kReusedPid = 4003;

RunDirOwner owner(int pid, unsigned long long start_ticks, std::string space = "") {
  return {space.empty() ? testing::FakeProc().space : space, pid, start_ticks};
}

TEST(RunDirOwnerTest, ReadsBackAsWrittenAndAnythingElseIsRefused) {
  const RunDirOwner written = owner(1234, 987654321);
  const std::string text = encode_run_dir_owner(written);
  const std::optional<RunDirOwner> read = decode_run_dir_owner(text);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->pid_space, written.pid_space);
  EXPECT_EQ(read->pid, 1234);
  EXPECT_EQ(read->start_ticks, 987654321u);

  EXPECT_FALSE(decode_run_dir_owner(""));
  EXPECT_FALSE(decode_run_dir_owner(text.substr(0, text.size() - 1))) << "torn: no last newline";
  EXPECT_FALSE(decode_run_dir_owner(text.substr(0, text.size() / 2))) << "torn";
  EXPECT_FALSE(decode_run_dir_owner(text + "more\n"));
  EXPECT_FALSE(decode_run_dir_owner("some other file\n" + text));
  for (const char* pid : {"0", "-5", "12a", "99999999999", ""}) {
    RunDirOwner bad = written;
    std::string changed = encode_run_dir_owner(bad);
    changed.replace(changed.find("pid 1234"), 8, std::string("pid ") + pid);
    EXPECT_FALSE(decode_run_dir_owner(changed)) << "pid " << pid;
  }
}

class RunDirSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    proc_.set(kLivePid).stat.start_ticks = 500;
    proc_.set(kReusedPid).stat.start_ticks = 900;  // started after the one that had the pid
  }

  // A directory `name` in the base, with `record` as its owner record (none when empty).
  std::string dir(const std::string& name, const std::string& record) {
    const std::string path = base_.path() + "/" + name;
    fs::create_directories(path + "/attempt_0/0");
    std::ofstream(path + "/attempt_0/0/progress") << "x";
    if (!record.empty()) std::ofstream(path + "/owner") << record;
    return path;
  }
  std::set<std::string> left() const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(base_.path()))
      names.insert(entry.path().filename().string());
    return names;
  }

  acc::testing::TempDir base_;
  testing::FakeProc proc_;
};

TEST_F(RunDirSweepTest, AnOwnerIsGoneWhenItsPidIsFreeOrReusedAndOnlyInThisPidSpace) {
  EXPECT_TRUE(run_dir_owner_gone(owner(kDeadPid, 100), proc_));
  EXPECT_FALSE(run_dir_owner_gone(owner(kLivePid, 500), proc_));
  EXPECT_TRUE(run_dir_owner_gone(owner(kReusedPid, 300), proc_)) << "the pid was reused";
  EXPECT_FALSE(run_dir_owner_gone(owner(kDeadPid, 100, "boot-2 pid:[4026531836]"), proc_))
      << "another machine's launcher, or this one's before a reboot";
  EXPECT_FALSE(run_dir_owner_gone(owner(kDeadPid, 100, "boot-1 pid:[4026532999]"), proc_))
      << "another container's launcher";
  proc_.space = "";
  EXPECT_FALSE(run_dir_owner_gone(owner(kDeadPid, 100, ""), proc_)) << "unknown: never gone";
}

TEST_F(RunDirSweepTest, RemovesOnlyTheRunDirectoriesOfLaunchersThatAreGone) {
  const std::string dead = dir("acc-launch-job_aaaaaa", encode_run_dir_owner(owner(kDeadPid, 1)));
  const std::string reused =
      dir("acc-launch-job_bbbbbb", encode_run_dir_owner(owner(kReusedPid, 300)));
  dir("acc-launch-job_cccccc", encode_run_dir_owner(owner(kLivePid, 500)));
  dir("acc-launch-job_dddddd", "");  // no record: being made, kept for its logs, an old launcher's
  dir("acc-launch-job_eeeeee", encode_run_dir_owner(owner(kDeadPid, 1, "boot-2 pid:[1]")));
  dir("acc-launch-job_ffffff", "acc-launch run directory owner\npid_space boot-1");  // torn
  dir("someone-elses", encode_run_dir_owner(owner(kDeadPid, 1)));
  // A link named as a run directory, to a directory with a record of a dead launcher: neither
  // the link nor what it points to is touched.
  const std::string target = dir("target", encode_run_dir_owner(owner(kDeadPid, 1)));
  fs::create_directory_symlink(target, base_.path() + "/acc-launch-job_gggggg");

  std::vector<std::string> removed = sweep_run_dirs(base_.path(), proc_);
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{dead, reused}));
  EXPECT_EQ(left(), (std::set<std::string>{"acc-launch-job_cccccc", "acc-launch-job_dddddd",
                                           "acc-launch-job_eeeeee", "acc-launch-job_ffffff",
                                           "someone-elses", "target", "acc-launch-job_gggggg"}));
  EXPECT_TRUE(fs::exists(target + "/attempt_0/0/progress"));
  EXPECT_TRUE(sweep_run_dirs(base_.path(), proc_).empty()) << "nothing more to sweep";
}

// A launcher killed while it swept leaves the directory it had claimed, its record inside.
TEST_F(RunDirSweepTest, ADirectoryClaimedByASweepThatWasKilledIsSweptAgain) {
  const std::string claimed =
      dir("acc-launch-job_aaaaaa.swept-77", encode_run_dir_owner(owner(kDeadPid, 1)));
  fs::remove_all(claimed + "/attempt_0");  // it got that far
  EXPECT_EQ(sweep_run_dirs(base_.path(), proc_), std::vector<std::string>{claimed});
  EXPECT_TRUE(left().empty());
}

TEST_F(RunDirSweepTest, ABaseThatCannotBeReadIsNothingToSweep) {
  EXPECT_TRUE(sweep_run_dirs(base_.path() + "/absent", proc_).empty());
}

// RunDir itself, its temporary directory made in the test's own $TMPDIR.
class RunDirTest : public RunDirSweepTest {
 protected:
  void SetUp() override {
    RunDirSweepTest::SetUp();
    const char* before = std::getenv("TMPDIR");
    tmpdir_before_ = before ? before : "";
    ::setenv("TMPDIR", base_.path().c_str(), 1);
    proc_.set(::getpid()).stat.start_ticks = 4242;
    plan_.run_id = "job";
  }
  void TearDown() override {
    if (tmpdir_before_.empty())
      ::unsetenv("TMPDIR");
    else
      ::setenv("TMPDIR", tmpdir_before_.c_str(), 1);
  }

  std::string tmpdir_before_;
  LaunchPlan plan_;
};

TEST_F(RunDirTest, ATemporaryOneNamesThisLauncherAsItsOwnerUntilItIsKept) {
  RunDir run_dir(plan_, proc_);
  EXPECT_EQ(run_dir.path().rfind(base_.path() + "/acc-launch-job_", 0), 0u) << run_dir.path();
  const std::optional<RunDirOwner> recorded =
      decode_run_dir_owner(read_file(run_dir.path() + "/owner"));
  ASSERT_TRUE(recorded);
  EXPECT_EQ(recorded->pid, ::getpid());
  EXPECT_EQ(recorded->start_ticks, 4242u);
  EXPECT_EQ(recorded->pid_space, proc_.space);
  EXPECT_FALSE(run_dir_owner_gone(*recorded, proc_));

  run_dir.keep();
  EXPECT_FALSE(fs::exists(run_dir.path() + "/owner")) << "kept: out of any sweep";
  std::vector<std::string> notices;
  run_dir.finish([&](const std::string& m) { notices.push_back(m); });
  run_dir.finish([&](const std::string& m) { notices.push_back(m); });
  EXPECT_EQ(notices, std::vector<std::string>{"logs in " + run_dir.path()}) << "said once";
  EXPECT_TRUE(fs::exists(run_dir.path()));
}

TEST_F(RunDirTest, OneNotFinishedIsRemovedWithItsRunDirObject) {
  std::string path;
  {
    RunDir run_dir(plan_, proc_);
    path = run_dir.path();
    fs::create_directories(path + "/attempt_0/0");
  }
  EXPECT_FALSE(fs::exists(path)) << "an error or a failed start leaves nothing";
  {
    RunDir run_dir(plan_, proc_);
    path = run_dir.path();
    run_dir.keep();
  }
  EXPECT_TRUE(fs::exists(path)) << "kept for its logs";
}

TEST_F(RunDirTest, MakingOneSweepsWhatLaunchersThatAreGoneLeft) {
  dir("acc-launch-job_aaaaaa", encode_run_dir_owner(owner(kDeadPid, 1)));
  dir("acc-launch-job_cccccc", encode_run_dir_owner(owner(kLivePid, 500)));
  plan_.log_dir = base_.path() + "/logs";  // a --log_dir run sweeps too
  RunDir run_dir(plan_, proc_);
  EXPECT_EQ(left(), (std::set<std::string>{"acc-launch-job_cccccc", "logs"}));
  EXPECT_FALSE(fs::exists(run_dir.path() + "/owner")) << "--log_dir's: the user's, never swept";
  run_dir.finish([](const std::string&) {});
  EXPECT_TRUE(fs::exists(run_dir.path()));
}

}  // namespace
}  // namespace acc::launcher
