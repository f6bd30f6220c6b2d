#include "hangs/python_stack_hook.h"

#include <gtest/gtest.h>

#include <signal.h>

namespace acc::launcher {
namespace {

std::string value_of(const EnvList& env, const std::string& key) {
  for (const auto& [k, v] : env)
    if (k == key) return v;
  return "<unset>";
}

TEST(PythonStackHookTest, PutsTheHookFirstAndKeepsTheWorkersPythonpath) {
  const EnvList env = python_stack_hook_env("/run/python", "/run/attempt_0/1", "/a:/b", false);
  EXPECT_EQ(value_of(env, "PYTHONPATH"), "/run/python:/a:/b");
  EXPECT_EQ(value_of(env, "ACC_STACK_DIR"), "/run/attempt_0/1");
  EXPECT_EQ(value_of(env, "ACC_STACK_SIGNAL"), std::to_string(SIGRTMIN + 7));
  EXPECT_EQ(value_of(env, "PYTHONFAULTHANDLER"), "1");
}

TEST(PythonStackHookTest, LeavesTheUsersFaulthandlerSettingAlone) {
  const EnvList env = python_stack_hook_env("/run/python", "/w", "", true);
  EXPECT_EQ(value_of(env, "PYTHONPATH"), "/run/python");
  EXPECT_EQ(value_of(env, "PYTHONFAULTHANDLER"), "<unset>");
}

TEST(PythonStackHookTest, TheSignalIsNoneOfTheUsersOrTheFirstRealTimeOnes) {
  const int signal = stack_dump_signal();
  EXPECT_GT(signal, SIGRTMIN + 3);
  EXPECT_LE(signal, SIGRTMAX);
  EXPECT_EQ(python_stack_file("/w", 42), "/w/python_stacks.42.txt");
}

}  // namespace
}  // namespace acc::launcher
