// The watchdog on real processes: what it kills when its launcher dies, and what it leaves.

#include "process/watchdog.h"

#include <gtest/gtest.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace acc::launcher {
namespace {

// A process in a group of its own that sleeps until killed.
pid_t sleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  ::setpgid(pid, pid);
  return pid;
}

bool alive(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == 0;
}

// Whether `pid` (not necessarily our child) is running: not gone, not a zombie.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

TEST(WatchdogTest, SharesTheLaunchersMemory) {
  Watchdog watchdog;
  ASSERT_GT(watchdog.pid(), 0);
  const long same = ::syscall(SYS_kcmp, ::getpid(), watchdog.pid(), KCMP_VM, 0, 0);
  if (same < 0 && (errno == ENOSYS || errno == EPERM)) GTEST_SKIP() << "no kcmp here";
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(same, 0) << "the watchdog has an address space of its own (a fork)";
#else
  EXPECT_NE(same, 0);
#endif
}

TEST(WatchdogTest, EndingItLeavesTheGroupsAlone) {
  const pid_t worker = sleeper();
  {
    Watchdog watchdog;
    ASSERT_GT(watchdog.pid(), 0);
    watchdog.watch(worker);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(alive(worker));
  ::kill(worker, SIGKILL);
  ::waitpid(worker, nullptr, 0);
}

TEST(WatchdogTest, DismissedItEndsAtOnceAndWatchesNoMore) {
  const pid_t worker = sleeper();
  Watchdog watchdog;
  ASSERT_GT(watchdog.pid(), 0);
  watchdog.watch(worker);
  watchdog.dismiss();
  // Gone without the destructor's wait: its exit is ours to reap.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(watchdog.pid()), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(info.si_code, CLD_KILLED);
  EXPECT_TRUE(alive(worker));
  ::kill(worker, SIGKILL);
  ::waitpid(worker, nullptr, 0);
}

// A launcher (a child of this test) with a watchdog and two workers' groups, one forgotten, is
// killed: the watched group dies, the forgotten one lives.
TEST(WatchdogTest, ALaunchersDeathKillsTheGroupsStillWatched) {
  int pids[2];
  ASSERT_EQ(::pipe(pids), 0);
  const pid_t launcher = ::fork();
  if (launcher == 0) {
    ::close(pids[0]);
    Watchdog watchdog;
    const pid_t watched = sleeper();
    const pid_t forgotten = sleeper();
    watchdog.watch(watched);
    watchdog.watch(forgotten);
    watchdog.forget(forgotten);
    const pid_t sent[2] = {watched, forgotten};
    (void)!::write(pids[1], sent, sizeof sent);
    for (;;) ::pause();
  }
  ::close(pids[1]);
  pid_t got[2] = {0, 0};
  ASSERT_EQ(::read(pids[0], got, sizeof got), static_cast<ssize_t>(sizeof got));
  ::close(pids[0]);
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  // Both are orphans now, reaped by whoever adopted them: look at them in /proc.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (running(got[0]) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(running(got[0])) << "the watched group outlived its launcher";
  EXPECT_TRUE(running(got[1])) << "the forgotten group was killed";
  ::kill(got[1], SIGKILL);
}

}  // namespace
}  // namespace acc::launcher
