#include "agent/worker_environment.h"

#include <gtest/gtest.h>

#include "acc/launcher/host/host.h"

namespace acc::launcher {
namespace {

// A two-worker static plan on one node, as the dry run and the spawn see it.
LaunchPlan two_workers() {
  LaunchPlan plan;
  plan.nnodes = 1;
  plan.nproc_per_node = 2;
  plan.world_size = 2;
  plan.master_addr = "127.0.0.1";
  for (int rank = 0; rank < 2; ++rank) {
    WorkerSpec worker;
    worker.local_rank = rank;
    worker.argv = {"python3", "-u", "train.py"};
    plan.workers.push_back(worker);
  }
  return plan;
}

const WorkerPlace kPlace{"/run", "/run/attempt_0/1", "/run/python"};

TEST(WorkerEnvironmentTest, TheContractOutranksTheLaunchersOwnVariables) {
  LaunchPlan plan = two_workers();
  Round round = static_round(plan, 29500, 0);
  round.agent_store = true;
  const auto env = worker_environment(plan, plan.workers[1], round,
                                      {{"RANK", "7"}, {"HOME", "/home/u"}}, kPlace);
  EXPECT_EQ(env.at("RANK"), "1");
  EXPECT_EQ(env.at("HOME"), "/home/u");
  EXPECT_EQ(env.at("TORCHELASTIC_USE_AGENT_STORE"), "True");
  EXPECT_EQ(env.at("TORCHELASTIC_ERROR_FILE"), "/run/attempt_0/1/error.json");
  EXPECT_EQ(env.at("TORCHELASTIC_TIMER_FILE"), "/run/timer_fifo");
  EXPECT_EQ(env.at("ACC_PROGRESS_FILE"), "/run/attempt_0/1/progress");
}

TEST(WorkerEnvironmentTest, TheHookGoesFirstOnTheUsersPythonpath) {
  LaunchPlan plan = two_workers();
  const auto env = worker_environment(plan, plan.workers[1], static_round(plan, 29500, 0),
                                      {{"PYTHONPATH", "/src"}}, kPlace);
  EXPECT_EQ(env.at("PYTHONPATH"), "/run/python:/src");
  EXPECT_EQ(env.at("ACC_STACK_DIR"), "/run/attempt_0/1");
  EXPECT_EQ(env.at("PYTHONFAULTHANDLER"), "1");
}

TEST(WorkerEnvironmentTest, WithTheHookOffNoneOfItsVariablesIsSet) {
  LaunchPlan plan = two_workers();
  const WorkerPlace no_hook{"/run", "/run/attempt_0/1", ""};
  const auto with_path = worker_environment(plan, plan.workers[0], static_round(plan, 1, 0),
                                            {{"PYTHONPATH", "/src"}}, no_hook);
  EXPECT_EQ(with_path.at("PYTHONPATH"), "/src");
  const auto env = worker_environment(plan, plan.workers[0], static_round(plan, 1, 0), {}, no_hook);
  for (const char* key : {"PYTHONPATH", "ACC_STACK_DIR", "ACC_STACK_SIGNAL", "PYTHONFAULTHANDLER"})
    EXPECT_EQ(env.count(key), 0u) << key;
  EXPECT_EQ(env.at("ACC_PROGRESS_FILE"), "/run/attempt_0/1/progress");  // C++ workers beat too
}

TEST(WorkerEnvironmentTest, DefaultsYieldToTheLaunchersSetting) {
  LaunchPlan plan = two_workers();
  plan.env_defaults = {{"OMP_NUM_THREADS", "1"}};
  plan.worker_cpus = {{0, 1, 2}, {3, 4, 5}};
  const auto bound =
      worker_environment(plan, plan.workers[1], static_round(plan, 1, 0), {}, kPlace);
  EXPECT_EQ(bound.at("OMP_NUM_THREADS"), "3");  // the worker's CPUs first
  const auto given = worker_environment(
      plan, plan.workers[1], static_round(plan, 1, 0),
      {{"OMP_NUM_THREADS", "8"}, {"TORCHELASTIC_TIMER_FILE", "/my/fifo"}}, kPlace);
  EXPECT_EQ(given.at("OMP_NUM_THREADS"), "8");
  EXPECT_EQ(given.at("TORCHELASTIC_TIMER_FILE"), "/my/fifo");
}

// The table is the rule: one variable set by every source that can set it takes the value of the
// source latest in kEnvPrecedence.
TEST(WorkerEnvironmentTest, EachSourceOutranksTheSourcesBeforeIt) {
  LaunchPlan plan = two_workers();
  plan.worker_cpus = {{0, 1, 2}, {3, 4, 5}};  // default: OMP_NUM_THREADS=3
  const Round round = static_round(plan, 29500, 0);
  const std::map<std::string, std::string> users = {{"OMP_NUM_THREADS", "8"},
                                                    {"CUDA_VISIBLE_DEVICES", "0,1"}};
  EXPECT_EQ(worker_environment(plan, plan.workers[1], round, {}, kPlace).at("OMP_NUM_THREADS"),
            "3");
  auto env = worker_environment(plan, plan.workers[1], round, users, kPlace);
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "8") << "the launcher's environment over a default";
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "0,1");
  plan.env = {{"OMP_NUM_THREADS", "4"}, {"CUDA_VISIBLE_DEVICES", "1"}, {"RANK", "9"}};
  env = worker_environment(plan, plan.workers[1], round, users, kPlace);
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "4") << "the options over the launcher's environment";
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(env.at("RANK"), "9") << "the options over the contract";
  plan.virtual_local_rank = true;
  plan.workers[1].virtual_device = "GPU-5";
  env = worker_environment(plan, plan.workers[1], round, users, kPlace);
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "GPU-5") << "acc-launch's own over the options";
  EXPECT_EQ(env.at("LOCAL_RANK"), "0");
}

TEST(WorkerEnvironmentTest, ADefaultYieldsToTheUsersSettingUnderAnotherNameAndTheSecretStays) {
  LaunchPlan plan = two_workers();  // no Python: a native program gets the Flight Recorder's
  plan.env_defaults = {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"}};
  const Round round = static_round(plan, 29500, 0);
  const auto env = worker_environment(
      plan, plan.workers[0], round,
      {{"NCCL_ASYNC_ERROR_HANDLING", "0"}, {kJobSecretFileVar, "/secret"}}, kPlace);
  EXPECT_EQ(env.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"), 0u) << "set under its old name";
  EXPECT_EQ(env.at("NCCL_ASYNC_ERROR_HANDLING"), "0");
  EXPECT_EQ(env.count(kJobSecretFileVar), 0u);
  EXPECT_EQ(env.count("TORCH_NCCL_DUMP_ON_TIMEOUT"), 1u);
}

}  // namespace
}  // namespace acc::launcher
