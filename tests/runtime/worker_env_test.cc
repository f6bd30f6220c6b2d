#include "acc/runtime/worker_env.h"

#include <gtest/gtest.h>

#include <map>

#include "acc/common/error.h"

namespace {

acc::WorkerEnv parse(const std::map<std::string, std::string>& vars) {
  return acc::parse_worker_env([&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

TEST(WorkerEnvTest, NoVariablesIsAWorldOfOneOutsideALauncher) {
  auto env = parse({});
  EXPECT_FALSE(env.launched);
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(env.mixed_precision, "no");
}

TEST(WorkerEnvTest, ReadsTheTorchrunContract) {
  auto env = parse({{"RANK", "3"},
                    {"LOCAL_RANK", "1"},
                    {"WORLD_SIZE", "4"},
                    {"LOCAL_WORLD_SIZE", "2"},
                    {"MASTER_ADDR", "10.0.0.7"},
                    {"MASTER_PORT", "41000"},
                    {"TORCHELASTIC_RESTART_COUNT", "2"},
                    {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                    {"OMP_NUM_THREADS", "1"}});
  EXPECT_TRUE(env.launched);
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "10.0.0.7");
  EXPECT_EQ(env.master_port, 41000);
  EXPECT_EQ(env.restart_count, 2);
  EXPECT_TRUE(env.use_agent_store);
  EXPECT_EQ(env.omp_num_threads, 1);
}

TEST(WorkerEnvTest, OnlyTheLiteralTrueSelectsTheAgentStoreAsInTorch) {
  EXPECT_FALSE(parse({{"TORCHELASTIC_USE_AGENT_STORE", "False"}}).use_agent_store);
  EXPECT_FALSE(parse({{"TORCHELASTIC_USE_AGENT_STORE", "true"}}).use_agent_store);
}

TEST(WorkerEnvTest, FallsBackToOpenMpiThenPmiThenSlurm) {
  auto ompi = parse({{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(ompi.rank, 1);
  EXPECT_EQ(ompi.world_size, 2);
  EXPECT_EQ(ompi.local_rank, 1);
  auto pmi = parse({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "0"}});
  EXPECT_EQ(pmi.rank, 2) << "PMI_RANK comes before OMPI_COMM_WORLD_RANK, as in Accelerate";
  auto slurm = parse({{"SLURM_PROCID", "5"},
                      {"SLURM_NTASKS", "8"},
                      {"SLURM_LOCALID", "1"},
                      {"SLURM_NTASKS_PER_NODE", "4(x2)"}});
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.world_size, 8);
  EXPECT_EQ(slurm.local_rank, 1);
  EXPECT_EQ(slurm.local_world_size, 4);
}

TEST(WorkerEnvTest, ReadsTheAccelerateSwitches) {
  auto env = parse({{"ACCELERATE_MIXED_PRECISION", "bf16"},
                    {"ACCELERATE_USE_CPU", "Yes"},
                    {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4"}});
  EXPECT_EQ(env.mixed_precision, "bf16");
  EXPECT_TRUE(env.use_cpu);
  EXPECT_EQ(env.gradient_accumulation_steps, 4);
}

TEST(WorkerEnvTest, AMalformedOrInconsistentValueIsAConfigErrorNamingTheVariable) {
  try {
    parse({{"RANK", "two"}, {"WORLD_SIZE", "4"}});
    FAIL() << "no error";
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse({{"RANK", "4"}, {"WORLD_SIZE", "4"}}), acc::ConfigError);
  EXPECT_THROW(parse({{"MASTER_PORT", "70000"}}), acc::ConfigError);
  EXPECT_THROW(parse({{"ACCELERATE_USE_CPU", "maybe"}}), acc::ConfigError);
}

}  // namespace
