// The Supervisor (launcher/src/process/supervisor.cc) over the fake Os (fake_os.h), whose clock
// jumps: each exit reaped and told to the owner the moment it happens, a taken signal passed on,
// the stop in two steps (the owner's signal, SIGKILL at the deadline with the owner's reason), a
// child that SIGKILL does not end given up on after the kill bound.

#include "process/supervisor.h"

#include <signal.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "fake_os.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;
using testing::FakeOs;
using testing::Script;

struct Owner : Supervisor::Listener {
  std::vector<pid_t> exits;
  std::vector<int> signals;
  std::vector<std::string> notices;
  void on_signal(int sig) override { signals.push_back(sig); }
  void on_exit(Child& child) override { exits.push_back(child.pid); }
  void notice(const std::string& message) override { notices.push_back(message); }
};

constexpr milliseconds kKillBound{2000};

class SupervisorTest : public ::testing::Test {
 protected:
  // Starts one child per script, in order.
  void start(const std::vector<Script>& scripts) {
    os_.program = [scripts](const SpawnRequest&, int index) { return scripts.at(index); };
    children_.resize(scripts.size());
    for (Child& child : children_) {
      SpawnRequest request;
      request.executable = "/bin/worker";
      request.argv = {"worker"};
      SpawnedProcess spawned = supervisor_.spawn(child, request, "");
      os_.await_exec(spawned);
    }
  }
  // Waits until no child runs, at most `limit` of the fake clock.
  void wait_for_all(milliseconds limit) {
    const auto deadline = os_.now() + limit;
    while (supervisor_.running() && os_.now() < deadline) supervisor_.wait_once(deadline);
  }
  const FakeOs::Process& process(size_t i) const { return *os_.processes().at(i); }

  FakeOs os_;
  Owner owner_;
  Supervisor supervisor_{os_, owner_, "workers", kKillBound};
  std::vector<Child> children_;
};

Script exits(milliseconds after, int code) {
  Script script;
  script.exit_after = after;
  script.exit_code = code;
  return script;
}

TEST_F(SupervisorTest, EachExitIsReapedAndToldTheMomentItHappens) {
  start({exits(milliseconds(30), 3), exits(milliseconds(10), 0)});
  EXPECT_TRUE(supervisor_.running());
  while (owner_.exits.empty()) supervisor_.wait_once(std::nullopt);
  EXPECT_EQ(os_.elapsed(), milliseconds(10));
  EXPECT_EQ(owner_.exits, std::vector<pid_t>{children_[1].pid});
  EXPECT_FALSE(children_[1].running);
  EXPECT_TRUE(children_[0].running);
  wait_for_all(milliseconds(1000));
  EXPECT_EQ(os_.elapsed(), milliseconds(30));
  EXPECT_EQ(owner_.exits, (std::vector<pid_t>{children_[1].pid, children_[0].pid}));
  EXPECT_TRUE(WIFEXITED(children_[0].status));
  EXPECT_EQ(WEXITSTATUS(children_[0].status), 3);
  EXPECT_TRUE(process(0).reaped);
  EXPECT_TRUE(owner_.notices.empty());
}

TEST_F(SupervisorTest, ATakenSignalGoesToTheOwner) {
  os_.take_signals({SIGINT});
  os_.signal_launcher(milliseconds(5), SIGINT);
  start({Script{}});  // runs until a signal ends it
  while (owner_.signals.empty()) supervisor_.wait_once(os_.now() + milliseconds(100));
  EXPECT_EQ(owner_.signals, std::vector<int>{SIGINT});
  EXPECT_TRUE(supervisor_.running()) << "the owner decides what a signal does";
  supervisor_.end_now();
  EXPECT_FALSE(supervisor_.running());
}

// The owner's first step (SIGTERM here), then SIGKILL at the deadline, with the owner's reason.
TEST_F(SupervisorTest, AStopIsTheOwnersSignalThenSigkillAtTheDeadline) {
  Script stubborn;
  stubborn.ignores_sigterm = true;
  start({Script{}, stubborn});
  supervisor_.signal_all(SIGTERM);
  supervisor_.kill_at(os_.now() + milliseconds(500), "the workers outlived SIGTERM by 0.5 s");
  EXPECT_TRUE(supervisor_.stopping());
  wait_for_all(milliseconds(5000));
  EXPECT_FALSE(supervisor_.running());
  EXPECT_TRUE(process(0).got(SIGTERM));
  EXPECT_FALSE(process(0).got(SIGKILL)) << "it ended at SIGTERM, before the deadline";
  ASSERT_TRUE(process(1).when(SIGKILL).has_value());
  EXPECT_EQ(*process(1).when(SIGKILL) - os_.start(), milliseconds(500));
  EXPECT_EQ(owner_.notices, std::vector<std::string>{"the workers outlived SIGTERM by 0.5 s"});
  EXPECT_FALSE(children_[1].unkillable);
}

TEST_F(SupervisorTest, AChildThatSigkillDoesNotEndIsGivenUpOnAfterTheKillBound) {
  Script stuck;
  stuck.survives_sigkill = true;
  start({stuck});
  supervisor_.kill();
  wait_for_all(milliseconds(60'000));
  EXPECT_FALSE(supervisor_.running());
  EXPECT_TRUE(children_[0].unkillable);
  EXPECT_EQ(os_.elapsed(), kKillBound);
  EXPECT_TRUE(owner_.exits.empty()) << "never reaped";
}

}  // namespace
}  // namespace acc::launcher
