// The merge of a config into LaunchOptions and the worker variables that come out of it
// (launcher/src/plan/config_merge.cc, launcher/src/plan/accelerate_env.cc).

#include "plan/config_merge.h"

#include <gtest/gtest.h>

#include <map>

#include "acc/common/error.h"
#include "acc/config/cluster_config.h"
#include "plan/accelerate_env.h"

namespace acc::launcher {
namespace {

using acc::config::parse_config;

MergeEnvironment fixed_environment() {
  MergeEnvironment env;
  env.physical_cores = 8;
  env.cwd = "/work/job";
  return env;
}

LaunchOptions merged(const std::string& yaml, std::set<std::string> given = {},
                     LaunchOptions options = {}, MergeEnvironment env = fixed_environment()) {
  for (const std::string& name : given) options.sources[name] = Source::kCommandLine;
  merge_config(parse_config(yaml, "c.yaml"), env, options);
  return options;
}

std::map<std::string, std::string> env_of(const LaunchOptions& o) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : accelerate_env(o)) out[k] = v;
  return out;
}

TEST(ConfigMergeTest, TheConfigFillsWhatTheCommandLineDidNotGive) {
  const LaunchOptions o = merged(
      "distributed_type: MULTI_GPU\nnum_processes: 8\nnum_machines: 2\nmachine_rank: 1\n"
      "main_process_ip: 10.0.0.1\nmain_process_port: 29555\ngpu_ids: 0,1,2,3\n"
      "mixed_precision: bf16\ndebug: true\n");
  EXPECT_EQ(o.num_processes, 8);
  EXPECT_EQ(o.num_machines, 2);
  EXPECT_EQ(o.machine_rank, 1);
  EXPECT_EQ(o.main_process_ip, "10.0.0.1");
  EXPECT_EQ(o.main_process_port, 29555);
  EXPECT_EQ(o.gpu_ids, "0,1,2,3");
  EXPECT_EQ(o.mixed_precision, "bf16");
  EXPECT_TRUE(o.debug);
  EXPECT_TRUE(o.multi_gpu);
  const auto env = env_of(o);
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "0,1,2,3");
  EXPECT_EQ(env.at("ACCELERATE_MIXED_PRECISION"), "bf16");
  EXPECT_EQ(env.at("ACCELERATE_DEBUG_MODE"), "true");
  EXPECT_EQ(env.count("ACCELERATE_USE_CPU"), 0u);  // not on the torchrun path
}

TEST(ConfigMergeTest, TheCommandLineWinsForEveryKey) {
  LaunchOptions cli;
  cli.num_processes = 2;
  cli.mixed_precision = "fp16";
  cli.gpu_ids = "5,6";
  cli.main_process_port = 4000;
  cli.machine_rank = 0;
  cli.num_machines = 1;
  cli.rdzv_backend = "static";
  const LaunchOptions o = merged(
      "distributed_type: MULTI_GPU\nnum_processes: 8\nnum_machines: 2\nmachine_rank: 1\n"
      "main_process_ip: 10.0.0.1\nmain_process_port: 29555\ngpu_ids: 0,1,2,3\n"
      "mixed_precision: bf16\nrdzv_backend: c10d\n",
      {"num_processes", "mixed_precision", "gpu_ids", "main_process_port", "machine_rank",
       "num_machines", "rdzv_backend"},
      cli);
  EXPECT_EQ(o.num_processes, 2);
  EXPECT_EQ(o.mixed_precision, "fp16");
  EXPECT_EQ(o.gpu_ids, "5,6");
  EXPECT_EQ(o.main_process_port, 4000);
  EXPECT_EQ(o.machine_rank, 0);
  EXPECT_EQ(o.num_machines, 1);
  EXPECT_EQ(o.rdzv_backend, "static");
}

TEST(ConfigMergeTest, TorchrunFlagsAlsoWinOverTheConfig) {
  const LaunchOptions o = merged("distributed_type: MULTI_GPU\nnum_processes: 8\nmachine_rank: 0\n",
                                 {"nproc_per_node", "node_rank"});
  EXPECT_FALSE(o.num_processes.has_value());
  EXPECT_FALSE(o.machine_rank.has_value());
}

TEST(ConfigMergeTest, ConfigKeysAccelerateIgnoresAreHonoured) {
  const LaunchOptions o = merged(
      "distributed_type: MULTI_GPU\nnum_processes: 2\nrdzv_backend: c10d\nenable_cpu_affinity: "
      "true\n");
  EXPECT_EQ(o.rdzv_backend, "c10d");
  EXPECT_EQ(env_of(o).at("ACCELERATE_CPU_AFFINITY"), "1");
}

TEST(ConfigMergeTest, CpuFlagRunsOneSimpleProcessWithTheConfigsSettings) {
  LaunchOptions cli;
  cli.cpu = true;
  const LaunchOptions o =
      merged("distributed_type: FSDP\nnum_processes: 4\nmixed_precision: bf16\nfsdp_config: {}\n",
             {"cpu"}, cli);
  EXPECT_EQ(o.num_processes, 1);
  EXPECT_FALSE(o.multi_gpu);
  const auto env = env_of(o);
  EXPECT_EQ(env.at("ACCELERATE_USE_CPU"), "True");
  EXPECT_EQ(env.at("ACCELERATE_MIXED_PRECISION"), "bf16");
  EXPECT_EQ(env.count("ACCELERATE_USE_FSDP"), 0u);
}

TEST(ConfigMergeTest, MultiGpuFlagOverridesTheDistributedType) {
  LaunchOptions cli;
  cli.multi_gpu = true;
  const LaunchOptions o = merged("distributed_type: FSDP\nnum_processes: 4\n", {"multi_gpu"}, cli);
  EXPECT_EQ(o.num_processes, 4);
  EXPECT_EQ(env_of(o).count("ACCELERATE_USE_FSDP"), 0u);
}

TEST(ConfigMergeTest, CpuAndMultiGpuTogetherAreRefused) {
  LaunchOptions cli;
  cli.cpu = true;
  cli.multi_gpu = true;
  EXPECT_THROW(merged("distributed_type: NO\n", {"cpu", "multi_gpu"}, cli), ConfigError);
}

TEST(ConfigMergeTest, MissingNumProcessesNamesTheFileAndTheFix) {
  try {
    merged("distributed_type: FSDP\n");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "c.yaml: num_processes: not set; pass --num_processes N, or add num_processes: N to "
              "the file (the total over all machines)");
  }
  LaunchOptions cli;
  cli.num_processes = 8;
  EXPECT_EQ(merged("distributed_type: FSDP\n", {"num_processes"}, cli).num_processes, 8);
}

TEST(ConfigMergeTest, SingleMachineIgnoresTheMainProcessAddress) {
  // torchrun keeps 127.0.0.1 on one machine whatever main_process_ip says.
  EXPECT_FALSE(merged("distributed_type: MULTI_GPU\nnum_processes: 2\nmain_process_ip: 10.1.1.1\n")
                   .main_process_ip.has_value());
}

TEST(ConfigMergeTest, OmpThreadsFollowAccelerate) {
  MergeEnvironment env = fixed_environment();
  EXPECT_EQ(merged("distributed_type: MULTI_GPU\nnum_processes: 2\n").num_cpu_threads_per_process,
            1);
  env.omp_num_threads = 6;
  EXPECT_EQ(merged("distributed_type: MULTI_GPU\nnum_processes: 2\n", {}, {}, env)
                .num_cpu_threads_per_process,
            6);
  // On CPU, the physical cores shared by this machine's processes.
  EXPECT_EQ(merged("distributed_type: MULTI_CPU\nnum_processes: 2\n").num_cpu_threads_per_process,
            4);
  env = fixed_environment();
  env.mpi_local_size = 8;
  EXPECT_EQ(merged("distributed_type: MULTI_CPU\nnum_processes: 2\n", {}, {}, env)
                .num_cpu_threads_per_process,
            1);
  // Accelerate's DeepSpeed path does not set OMP_NUM_THREADS: torchrun's 1 for several workers,
  // unless the launching environment has it.
  const LaunchOptions ds = merged("distributed_type: DEEPSPEED\nnum_processes: 2\n");
  EXPECT_FALSE(ds.num_cpu_threads_per_process.has_value());
  EXPECT_EQ(env_of(ds).at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(env_of(ds).count("ACCELERATE_DYNAMO_BACKEND"), 0u);
  env.omp_num_threads = 6;
  EXPECT_EQ(env_of(merged("distributed_type: DEEPSPEED\nnum_processes: 2\n", {}, {}, env))
                .count("OMP_NUM_THREADS"),
            0u);
  EXPECT_EQ(
      env_of(merged("distributed_type: DEEPSPEED\nnum_processes: 1\n")).count("OMP_NUM_THREADS"),
      0u);
}

TEST(ConfigMergeTest, DeepSpeedFieldsListMixedPrecisionOnlyWhenItCameFromTheFile) {
  const char* yaml =
      "distributed_type: DEEPSPEED\nnum_processes: 2\nmixed_precision: fp16\ndeepspeed_config:\n"
      "  zero_stage: 2\n";
  EXPECT_EQ(env_of(merged(yaml)).at("ACCELERATE_CONFIG_DS_FIELDS"), "zero_stage,mixed_precision");
  LaunchOptions cli;
  cli.mixed_precision = "bf16";
  const auto env = env_of(merged(yaml, {"mixed_precision"}, cli));
  EXPECT_EQ(env.at("ACCELERATE_CONFIG_DS_FIELDS"), "zero_stage");
  EXPECT_EQ(env.at("ACCELERATE_MIXED_PRECISION"), "bf16");
  EXPECT_EQ(env.at("PYTHONPATH"), "/work/job");
}

TEST(ConfigMergeTest, OtherDevicesGetTheirVisibleDevicesVariable) {
  const LaunchOptions o = merged("distributed_type: MULTI_XPU\nnum_processes: 2\ngpu_ids: 2,3\n");
  EXPECT_FALSE(o.gpu_ids.has_value());
  const auto env = env_of(o);
  EXPECT_EQ(env.at("ZE_AFFINITY_MASK"), "2,3");
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST(ConfigMergeTest, DynamoSettingsReachTheWorkers) {
  const auto env = env_of(
      merged("distributed_type: NO\ndynamo_config:\n  dynamo_backend: inductor\n  dynamo_mode: "
             "max-autotune\n  dynamo_use_fullgraph: true\n"));
  EXPECT_EQ(env.at("ACCELERATE_DYNAMO_BACKEND"), "INDUCTOR");
  EXPECT_EQ(env.at("ACCELERATE_DYNAMO_MODE"), "max-autotune");
  EXPECT_EQ(env.at("ACCELERATE_DYNAMO_USE_FULLGRAPH"), "True");
  EXPECT_EQ(env.at("ACCELERATE_DYNAMO_USE_DYNAMIC"), "False");
  EXPECT_EQ(env.at("ACCELERATE_USE_CPU"), "False");
}

TEST(ConfigMergeTest, Fp8OverrideAsAStringIsReadAsTheTupleMeant) {
  const auto env =
      env_of(merged("distributed_type: NO\nmixed_precision: fp8\nfp8_config:\n  backend: TE\n"
                    "  override_linear_precision: (true, false, true)\n"));
  EXPECT_EQ(env.at("ACCELERATE_FP8_OVERRIDE_FPROP"), "True");
  EXPECT_EQ(env.at("ACCELERATE_FP8_OVERRIDE_DGRAD"), "False");
  EXPECT_EQ(env.at("ACCELERATE_FP8_OVERRIDE_WGRAD"), "True");
  EXPECT_EQ(env.at("ACCELERATE_FP8_BACKEND"), "TE");
}

TEST(ConfigMergeTest, WithoutAConfigTheDefaultsOfAccelerateLaunchApply) {
  LaunchOptions o;
  const auto env = env_of(o);
  EXPECT_EQ(env.at("ACCELERATE_MIXED_PRECISION"), "no");
  EXPECT_EQ(env.at("ACCELERATE_USE_CPU"), "False");
  EXPECT_EQ(env.at("ACCELERATE_DYNAMO_BACKEND"), "NO");
}

}  // namespace
}  // namespace acc::launcher
