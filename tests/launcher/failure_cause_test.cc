// Why a worker failed, in one line: the OOM killer's counters (cgroup v1 and v2 files as the
// kernel writes them, in a directory the test makes), the lines a worker's stderr ends with, and
// signals by name and sender.

#include "agent/failure_cause.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace acc::launcher {
namespace {

namespace fs = std::filesystem;

OomCounters counters(std::int64_t cgroup_kills, std::int64_t machine_kills,
                     std::optional<std::int64_t> limit) {
  OomCounters c;
  c.cgroup = "/jobs/a";
  c.cgroup_oom_kills = cgroup_kills;
  c.machine_oom_kills = machine_kills;
  c.limit_bytes = limit;
  return c;
}

FailureFacts killed(int sig) {
  FailureFacts f;
  f.signal = sig;
  f.before = counters(0, 5, 150 << 20);
  f.after = counters(0, 5, 150 << 20);
  return f;
}

TEST(FailureCauseTest, ASigkillThatMovedTheCgroupsOomCounterNamesTheOomKillerLimitAndPeakRss) {
  FailureFacts f = killed(SIGKILL);
  f.after.cgroup_oom_kills = 1;
  f.after.machine_oom_kills = 6;
  f.peak_rss_kib = 149 << 10;
  EXPECT_EQ(explain_failure(f),
            "killed by the kernel's OOM killer: the memory cgroup /jobs/a reached its limit "
            "(150 MiB); its peak RSS 149 MiB");
}

TEST(FailureCauseTest, AMachineWideOomKillIsNamedWhenTheCgroupHasNoCounter) {
  FailureFacts f = killed(SIGKILL);
  f.before.cgroup_oom_kills.reset();
  f.after.cgroup_oom_kills.reset();
  f.after.machine_oom_kills = 6;
  EXPECT_EQ(explain_failure(f), "killed by the kernel's OOM killer: the machine ran out of memory");
}

TEST(FailureCauseTest, ASigkillWithTheCountersStillIsFromOutsideNotTheOomKiller) {
  EXPECT_EQ(explain_failure(killed(SIGKILL)),
            "SIGKILL from outside the launcher (not the OOM killer: its counters did not move)");
}

TEST(FailureCauseTest, ASignalTheLauncherSentNamesTheLauncher) {
  FailureFacts f = killed(SIGTERM);
  f.sent_by = "the launcher: its workers stopped making progress";
  EXPECT_EQ(explain_failure(f), "SIGTERM from the launcher: its workers stopped making progress");
  EXPECT_EQ(explain_failure(killed(SIGTERM)),
            "SIGTERM from outside the launcher (the user, a scheduler, another program)");
  EXPECT_EQ(explain_failure(killed(SIGSEGV)), "SIGSEGV: a crash (invalid memory access)");
}

TEST(FailureCauseTest, CudaOutOfMemoryNcclAndPythonExceptionsAreNamedFromTheStderrTail) {
  FailureFacts f;
  f.exit_code = 1;
  f.stderr_tail = {"Traceback (most recent call last):", "  File \"t.py\", line 3, in <module>",
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"};
  EXPECT_EQ(explain_failure(f),
            "CUDA out of memory: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            "2.00 GiB");
  f.stderr_tail = {
      "[rank1]: torch.distributed.DistBackendError: NCCL error in: "
      "ProcessGroupNCCL.cpp:1970, unhandled system error"};
  EXPECT_EQ(explain_failure(f),
            "NCCL error: [rank1]: torch.distributed.DistBackendError: NCCL error in: "
            "ProcessGroupNCCL.cpp:1970, unhandled system error");
  f.stderr_tail = {"Traceback (most recent call last):", "ValueError: bad learning rate",
                   "some later line"};
  EXPECT_EQ(explain_failure(f), "Python exception: ValueError: bad learning rate");
  f.stderr_tail = {"exiting"};
  EXPECT_EQ(explain_failure(f), "") << "an exit code alone says nothing more";
}

TEST(FailureCauseTest, TheMemoryCgroupIsReadFromV1OrV2Lines) {
  auto v1 = memory_cgroup("9:name=systemd:/\n4:memory:/process_api/x\n0::/\n");
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->path, "/process_api/x");
  EXPECT_FALSE(v1->v2);
  auto v2 = memory_cgroup("0::/user.slice/job\n");
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->path, "/user.slice/job");
  EXPECT_TRUE(v2->v2);
  EXPECT_FALSE(memory_cgroup("3:cpu:/\n"));
  EXPECT_EQ(parse_oom_kill("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 3);
  EXPECT_EQ(parse_oom_kill("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n"), 2);
}

TEST(FailureCauseTest, CountersAreReadFromTheFilesOfV1AndV2) {
  const fs::path root = fs::temp_directory_path() / ("failure_cause_" + std::to_string(::getpid()));
  fs::create_directories(root / "proc/self");
  fs::create_directories(root / "sys/fs/cgroup/memory/jobs/a");
  std::ofstream(root / "proc/vmstat") << "pgfault 10\noom_kill 4\n";
  std::ofstream(root / "proc/self/cgroup") << "4:memory:/jobs/a\n0::/\n";
  std::ofstream(root / "sys/fs/cgroup/memory/jobs/a/memory.oom_control")
      << "oom_kill_disable 0\noom_kill 1\n";
  std::ofstream(root / "sys/fs/cgroup/memory/jobs/a/memory.limit_in_bytes") << "157286400\n";
  OomCounters v1 = read_oom_counters(MachineFiles(root));
  EXPECT_EQ(v1.cgroup, "/jobs/a");
  EXPECT_EQ(v1.cgroup_oom_kills, 1);
  EXPECT_EQ(v1.limit_bytes, 157286400);
  EXPECT_EQ(v1.machine_oom_kills, 4);
  // v2: "max" is no limit.
  std::ofstream(root / "proc/self/cgroup") << "0::/jobs/b\n";
  fs::create_directories(root / "sys/fs/cgroup/jobs/b");
  std::ofstream(root / "sys/fs/cgroup/jobs/b/memory.events") << "oom 1\noom_kill 2\n";
  std::ofstream(root / "sys/fs/cgroup/jobs/b/memory.max") << "max\n";
  OomCounters v2 = read_oom_counters(MachineFiles(root));
  EXPECT_EQ(v2.cgroup, "/jobs/b");
  EXPECT_EQ(v2.cgroup_oom_kills, 2);
  EXPECT_FALSE(v2.limit_bytes);
  fs::remove_all(root);
}

}  // namespace
}  // namespace acc::launcher
