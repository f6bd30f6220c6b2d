// Every config file of Accelerate's repository (shared/accelerate-configs, read in place) through
// `acc-launch --config_file X --dry_run --no_python /bin/true`: the processes, machines, rank,
// store address and port, and the worker variables `accelerate launch` gives for that file
// (reference/accelerate.md §3; accelerate/utils/launch.py at the commit it cites, and Accelerate
// 1.15.0 where they differ), on a machine without the GPUs the file names. Files Accelerate
// refuses fail with one clear line. against_accelerate_launch.py runs the same files under the
// real `accelerate launch` and compares the workers' environments with acc-launch's.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include <cstdio>

#include "acc/common/strings.h"
#include "launcher_harness.h"

namespace acc::config {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

struct Expected {
  int exit_code = 0;
  std::string error;   // exit 2: the stderr line after "acc-launch: error: <path>"
  std::string header;  // up to and including "store ADDR:"; the port follows
  std::string port;    // "" for a free port chosen at launch
  Env env;             // in rank 0's environment
  std::vector<std::string> absent;
};

const Env kDynamo = {{"ACCELERATE_DYNAMO_BACKEND", "NO"},
                     {"ACCELERATE_DYNAMO_MODE", "default"},
                     {"ACCELERATE_DYNAMO_USE_FULLGRAPH", "False"},
                     {"ACCELERATE_DYNAMO_USE_DYNAMIC", "False"},
                     {"ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "False"},
                     {"OMP_NUM_THREADS", "3"}};
const std::vector<std::string> kNoParadigm = {"ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED",
                                              "ACCELERATE_USE_MEGATRON_LM", "CUDA_VISIBLE_DEVICES",
                                              "ACCELERATE_USE_PARALLELISM_CONFIG"};

std::string one_node(int workers) {
  return "# acc-launch dry run: 1 node(s) x " + std::to_string(workers) +
         " worker(s), world size " + std::to_string(workers) + ", node rank 0, store 127.0.0.1:";
}

template <typename T>
std::vector<T> join(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
using Names = std::vector<std::string>;

Env fsdp1(const Env& extra) {
  return join({{"ACCELERATE_USE_FSDP", "true"},
               {"FSDP_VERSION", "1"},
               {"FSDP_SHARDING_STRATEGY", "FULL_SHARD"},
               {"FSDP_RESHARD_AFTER_FORWARD", "true"},
               {"FSDP_OFFLOAD_PARAMS", "false"},
               {"FSDP_MIN_NUM_PARAMS", "100000000"},
               {"FSDP_FORWARD_PREFETCH", "false"},
               {"FSDP_USE_ORIG_PARAMS", "true"},
               {"FSDP_CPU_RAM_EFFICIENT_LOADING", "true"},
               {"FSDP_SYNC_MODULE_STATES", "true"},
               {"FSDP_ACTIVATION_CHECKPOINTING", "false"},
               {"FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD", "false"}},
              extra);
}

Env deepspeed(const std::string& mixed_precision, const Env& extra) {
  return join(
      {{"ACCELERATE_USE_DEEPSPEED", "true"}, {"ACCELERATE_MIXED_PRECISION", mixed_precision}},
      extra);
}

std::map<std::string, Expected> expectations() {
  std::map<std::string, Expected> e;
  e["docs__source__basic_tutorials__launch.md__L197-L208.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      join({{"ACCELERATE_MIXED_PRECISION", "fp16"}}, kDynamo),
      join(kNoParadigm, Names{"ACCELERATE_USE_CPU"})};
  e["docs__source__basic_tutorials__troubleshooting.md__L84-L85.yaml"] = {
      2,
      ":1:1: distributed_type: missing; add distributed_type: NO (one process), MULTI_GPU, "
      "MULTI_CPU, FSDP, DEEPSPEED or MEGATRON_LM",
      "",
      "",
      {},
      {}};
  e["docs__source__concept_guides__sequence_parallelism.md__L128-L141.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      deepspeed("no", {{"ACCELERATE_CONFIG_DS_FIELDS", "deepspeed_config_file"},
                       {"ACCELERATE_DEEPSPEED_CONFIG_FILE", "path/to/ds_config.json"},
                       {"ACCELERATE_USE_PARALLELISM_CONFIG", "true"},
                       {"PARALLELISM_CONFIG_DP_REPLICATE_SIZE", "1"},
                       {"PARALLELISM_CONFIG_DP_SHARD_SIZE", "1"},
                       {"PARALLELISM_CONFIG_TP_SIZE", "1"},
                       {"PARALLELISM_CONFIG_CP_SIZE", "1"},
                       {"PARALLELISM_CONFIG_CP_BACKEND", "torch"},
                       {"PARALLELISM_CONFIG_SP_SIZE", "2"},
                       {"PARALLELISM_CONFIG_SP_BACKEND", "deepspeed"},
                       {"PARALLELISM_CONFIG_SP_SEQ_LENGTH", "None"},
                       {"PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE", "True"},
                       {"PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION", "sdpa"}}),
      {"ACCELERATE_DYNAMO_BACKEND", "PARALLELISM_CONFIG_CP_COMM_STRATEGY", "ACCELERATE_USE_CPU"}};
  e["docs__source__usage_guides__deepspeed.md__L102-L119.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      deepspeed("fp16", {{"ACCELERATE_CONFIG_DS_FIELDS",
                          "gradient_accumulation_steps,gradient_clipping,offload_optimizer_device,"
                          "offload_param_device,zero3_init_flag,zero_stage,mixed_precision"},
                         {"ACCELERATE_DEEPSPEED_ZERO_STAGE", "2"},
                         {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "1"},
                         {"ACCELERATE_GRADIENT_CLIPPING", "1.0"},
                         {"ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "none"},
                         {"ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "none"},
                         {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "true"}}),
      {"ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "ACCELERATE_DEEPSPEED_CONFIG_FILE",
       "ACCELERATE_DYNAMO_BACKEND"}};
  e["docs__source__usage_guides__deepspeed.md__L128-L146.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      deepspeed("fp16", {{"ACCELERATE_CONFIG_DS_FIELDS",
                          "gradient_accumulation_steps,gradient_clipping,offload_optimizer_device,"
                          "offload_param_device,zero3_init_flag,zero3_save_16bit_model,zero_stage,"
                          "mixed_precision"},
                         {"ACCELERATE_DEEPSPEED_ZERO_STAGE", "3"},
                         {"ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu"},
                         {"ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "cpu"},
                         {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "true"},
                         {"ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "true"}}),
      {"ACCELERATE_DEEPSPEED_CONFIG_FILE"}};
  e["docs__source__usage_guides__deepspeed.md__L195-L208.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      deepspeed(
          "fp16",
          {{"ACCELERATE_CONFIG_DS_FIELDS", "deepspeed_config_file,zero3_init_flag,mixed_precision"},
           {"ACCELERATE_DEEPSPEED_CONFIG_FILE",
            "/home/ubuntu/accelerate/examples/deepspeed_config_templates/zero_stage2_config.json"},
           {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "true"}}),
      {"ACCELERATE_DEEPSPEED_ZERO_STAGE"}};
  e["docs__source__usage_guides__deepspeed.md__L276-L289.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      deepspeed("fp16", {{"ACCELERATE_CONFIG_DS_FIELDS",
                          "deepspeed_config_file,zero3_init_flag,mixed_precision"},
                         {"ACCELERATE_DEEPSPEED_CONFIG_FILE",
                          "/home/ubuntu/accelerate/examples/deepspeed_config_templates/"
                          "zero_stage3_offload_config.json"}}),
      {}};
  e["docs__source__usage_guides__deepspeed.md__L467-L495.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      deepspeed("no", {{"ACCELERATE_CONFIG_DS_FIELDS",
                        "gradient_accumulation_steps,gradient_clipping,offload_optimizer_device,"
                        "offload_param_device,zero3_init_flag,zero3_save_16bit_model,zero_stage,"
                        "deepspeed_config_file"},
                       {"ACCELERATE_DEEPSPEED_CONFIG_FILE", "ds_config.json"},
                       {"ACCELERATE_DEEPSPEED_ZERO_STAGE", "3"}}),
      {"CUDA_VISIBLE_DEVICES"}};
  e["docs__source__usage_guides__deepspeed.md__L560-L575.yaml"] = {
      0,
      "",
      one_node(4),
      "",
      deepspeed("no", {{"ACCELERATE_CONFIG_DS_FIELDS", "deepspeed_config_file,zero3_init_flag"},
                       {"ACCELERATE_DEEPSPEED_CONFIG_FILE", "ds_config.json"},
                       {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "true"}}),
      {}};
  e["docs__source__usage_guides__fsdp.md__L42-L67.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      join(fsdp1({{"FSDP_AUTO_WRAP_POLICY", "TRANSFORMER_BASED_WRAP"},
                  {"FSDP_TRANSFORMER_CLS_TO_WRAP", "BertLayer"},
                  {"FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT"},
                  {"ACCELERATE_MIXED_PRECISION", "bf16"}}),
           kDynamo),
      // The old fsdp_backward_prefetch_policy key is ignored, as Accelerate ignores it.
      {"FSDP_BACKWARD_PREFETCH", "ACCELERATE_USE_CPU"}};
  e["docs__source__usage_guides__intel_cpu.md__L106-L123.yaml"] = {
      0,
      "",
      "# acc-launch dry run: 4 node(s) x 4 worker(s), world size 16, node rank 0, store "
      "36.112.23.24:",
      "29500",
      join({{"ACCELERATE_USE_CPU", "True"},
            {"ACCELERATE_MIXED_PRECISION", "bf16"},
            {"MASTER_ADDR", "36.112.23.24"},
            {"MASTER_PORT", "29500"},
            {"WORLD_SIZE", "16"}},
           kDynamo),
      kNoParadigm};
  e["docs__source__usage_guides__intel_cpu.md__L51-L64.yaml"] = {
      0, "", one_node(1), "",
      // The simple launcher's Intel OpenMP settings for a CPU run.
      join({{"ACCELERATE_USE_CPU", "True"},
            {"ACCELERATE_MIXED_PRECISION", "bf16"},
            {"KMP_AFFINITY", "granularity=fine,compact,1,0"},
            {"KMP_BLOCKTIME", "1"}},
           kDynamo),
      kNoParadigm};
  e["docs__source__usage_guides__megatron_lm.md__L168-L190.yaml"] = {
      0,
      "",
      one_node(4),
      "",
      join({{"ACCELERATE_MIXED_PRECISION", "bf16"},
            {"ACCELERATE_USE_MEGATRON_LM", "true"},
            {"MEGATRON_LM_TP_DEGREE", "2"},
            {"MEGATRON_LM_PP_DEGREE", "2"},
            {"MEGATRON_LM_NUM_MICRO_BATCHES", "2"},
            {"MEGATRON_LM_SEQUENCE_PARALLELISM", "True"},
            {"MEGATRON_LM_RECOMPUTE_ACTIVATIONS", "True"},
            {"MEGATRON_LM_USE_DISTRIBUTED_OPTIMIZER", "True"},
            {"MEGATRON_LM_GRADIENT_CLIPPING", "1.0"},
            {"MEGATRON_LM_USE_CUSTOM_FSDP", "False"},
            {"MEGATRON_LM_NO_LOAD_OPTIM", "False"},
            {"MEGATRON_LM_NO_SAVE_OPTIM", "False"}},
           kDynamo),
      {"ACCELERATE_USE_FSDP", "MEGATRON_LM_RECOMPUTE_GRANULARITY"}};
  e["docs__source__usage_guides__sagemaker.md__L139-L152.yaml"] = {
      2,
      ":2:22: compute_environment: AMAZON_SAGEMAKER jobs are not launched by acc-launch; use "
      "`accelerate launch` for SageMaker, or write compute_environment: LOCAL_MACHINE",
      "",
      "",
      {},
      {}};
  e["examples__alst_ulysses_sequence_parallelism__sp-alst.accelerate-config.yml"] = {
      0,
      "",
      one_node(4),
      "",
      deepspeed("no", {{"ACCELERATE_CONFIG_DS_FIELDS", "deepspeed_config_file,zero3_init_flag"},
                       {"ACCELERATE_DEEPSPEED_CONFIG_FILE", "sp-alst.ds-config.json"},
                       {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "false"}}),
      {}};
  e["examples__config_yaml_templates__deepspeed.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      deepspeed("no", {{"ACCELERATE_CONFIG_DS_FIELDS", "deepspeed_config_file,zero3_init_flag"},
                       {"ACCELERATE_DEEPSPEED_CONFIG_FILE",
                        "../deepspeed_config_templates/zero_stage1_config.json"},
                       {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "false"}}),
      {}};
  e["examples__config_yaml_templates__fp8.yaml"] = {
      0,
      "",
      one_node(1),
      "",
      join({{"ACCELERATE_USE_CPU", "False"},
            {"ACCELERATE_MIXED_PRECISION", "fp8"},
            {"ACCELERATE_FP8_BACKEND", "TE"},
            {"ACCELERATE_FP8_AMAX_HISTORY_LEN", "1024"},
            {"ACCELERATE_FP8_FORMAT", "E4M3"},
            {"ACCELERATE_FP8_INTERVAL", "1"},
            {"ACCELERATE_FP8_MARGIN", "0"},
            {"ACCELERATE_FP8_OVERRIDE_FPROP", "False"},
            {"ACCELERATE_FP8_OVERRIDE_DGRAD", "False"},
            {"ACCELERATE_FP8_OVERRIDE_WGRAD", "False"},
            {"ACCELERATE_FP8_USE_AUTOCAST_DURING_EVAL", "False"},
            {"ACCELERATE_FP8_OPT_LEVEL", "O2"},
            {"ACCELERATE_FP8_AMAX_COMPUTE_ALGO", "most_recent"},
            {"ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER", "1"},
            {"ACCELERATE_FP8_PAD_INNER_DIM", "1"}},
           kDynamo),
      kNoParadigm};
  e["examples__config_yaml_templates__fsdp.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      join(fsdp1({{"FSDP_AUTO_WRAP_POLICY", "TRANSFORMER_BASED_WRAP"},
                  {"FSDP_BACKWARD_PREFETCH", "BACKWARD_PRE"},
                  {"FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT"},
                  {"ACCELERATE_MIXED_PRECISION", "bf16"}}),
           kDynamo),
      {"FSDP_TRANSFORMER_CLS_TO_WRAP", "FSDP_IGNORED_MODULES"}};
  e["examples__config_yaml_templates__multi_gpu.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      join({{"ACCELERATE_MIXED_PRECISION", "bf16"}}, kDynamo),
      join(kNoParadigm, Names{"ACCELERATE_USE_CPU"})};
  e["examples__config_yaml_templates__multi_node.yaml"] = {
      0,
      "",
      "# acc-launch dry run: 2 node(s) x 4 worker(s), world size 8, node rank 0, store 1234:",
      "9999",
      join({{"ACCELERATE_MIXED_PRECISION", "no"},
            {"MASTER_ADDR", "1234"},
            {"MASTER_PORT", "9999"},
            {"WORLD_SIZE", "8"},
            {"LOCAL_WORLD_SIZE", "4"}},
           kDynamo),
      kNoParadigm};
  e["examples__config_yaml_templates__multi_xpu.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      join({{"ACCELERATE_MIXED_PRECISION", "bf16"}}, kDynamo),
      {"ZE_AFFINITY_MASK", "ACCELERATE_USE_CPU"}};
  e["examples__config_yaml_templates__single_accelerator.yaml"] = {
      0,
      "",
      one_node(1),
      "",
      join({{"ACCELERATE_USE_CPU", "False"}, {"ACCELERATE_MIXED_PRECISION", "bf16"}}, kDynamo),
      kNoParadigm};
  e["examples__slurm__fsdp_config.yaml"] = {
      2,
      ": num_processes: not set; pass --num_processes N, or add num_processes: N to the file (the "
      "total over all machines)",
      "",
      "",
      {},
      {}};
  const Env fsdp2_common = {{"ACCELERATE_USE_FSDP", "true"},
                            {"FSDP_VERSION", "2"},
                            {"FSDP_RESHARD_AFTER_FORWARD", "true"},
                            {"FSDP_CPU_RAM_EFFICIENT_LOADING", "false"},
                            {"FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD", "false"},
                            {"FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT"},
                            {"ACCELERATE_MIXED_PRECISION", "bf16"},
                            {"ACCELERATE_USE_PARALLELISM_CONFIG", "true"},
                            {"PARALLELISM_CONFIG_CP_BACKEND", "torch"},
                            {"PARALLELISM_CONFIG_SP_SIZE", "1"}};
  e["examples__torch_native_parallelism__configs__cp.yaml"] = {
      0,
      "",
      one_node(8),
      "",
      join(join(fsdp2_common, {{"FSDP_ACTIVATION_CHECKPOINTING", "true"},
                               {"PARALLELISM_CONFIG_CP_SIZE", "8"},
                               {"PARALLELISM_CONFIG_DP_SHARD_SIZE", "1"},
                               {"PARALLELISM_CONFIG_CP_COMM_STRATEGY", "allgather"}}),
           kDynamo),
      {"PARALLELISM_CONFIG_SP_SEQ_LENGTH"}};
  e["examples__torch_native_parallelism__configs__tp_hsdp.yaml"] = {
      0,
      "",
      one_node(8),
      "",
      join(join(fsdp2_common, {{"FSDP_ACTIVATION_CHECKPOINTING", "false"},
                               {"PARALLELISM_CONFIG_DP_REPLICATE_SIZE", "2"},
                               {"PARALLELISM_CONFIG_DP_SHARD_SIZE", "2"},
                               {"PARALLELISM_CONFIG_TP_SIZE", "2"},
                               {"PARALLELISM_CONFIG_CP_SIZE", "1"}}),
           kDynamo),
      {"PARALLELISM_CONFIG_CP_COMM_STRATEGY"}};
  const Expected single_no = {
      0,
      "",
      one_node(1),
      "",
      join({{"ACCELERATE_USE_CPU", "False"}, {"ACCELERATE_MIXED_PRECISION", "no"}}, kDynamo),
      join(kNoParadigm, Names{"KMP_AFFINITY", "KMP_BLOCKTIME"})};
  e["tests__test_configs__0_11_0.yaml"] = single_no;
  e["tests__test_configs__0_12_0.yaml"] = single_no;
  e["tests__test_configs__latest.yaml"] = single_no;
  e["tests__test_configs__0_28_0_mpi.yaml"] = {
      0,
      "",
      "# acc-launch dry run: 4 node(s) x 4 worker(s), world size 16, node rank 0, store "
      "127.0.0.1:",
      "29500",
      join({{"ACCELERATE_USE_CPU", "True"}, {"ACCELERATE_MIXED_PRECISION", "no"}}, kDynamo),
      kNoParadigm};
  e["tests__test_configs__0_30_0_sagemaker.yaml"] = {
      2,
      ":1:22: compute_environment: AMAZON_SAGEMAKER jobs are not launched by acc-launch; use "
      "`accelerate launch` for SageMaker, or write compute_environment: LOCAL_MACHINE",
      "",
      "",
      {},
      {}};
  e["tests__test_configs__0_34_0_fp8.yaml"] = {
      0,
      "",
      one_node(2),
      "",
      join({{"ACCELERATE_MIXED_PRECISION", "fp8"},
            {"ACCELERATE_FP8_BACKEND", "TE"},
            {"ACCELERATE_FP8_AMAX_COMPUTE_ALGO", "max"},
            {"ACCELERATE_FP8_FORMAT", "E4M3"},
            // Accelerate indexes the string "(false, false, false)" and exports "(", "f", "a";
            // acc-launch reads the tuple (docs/config.md, Divergences).
            {"ACCELERATE_FP8_OVERRIDE_FPROP", "False"},
            {"ACCELERATE_FP8_OVERRIDE_DGRAD", "False"},
            {"ACCELERATE_FP8_OVERRIDE_WGRAD", "False"}},
           kDynamo),
      join(kNoParadigm, Names{"ACCELERATE_USE_CPU"})};
  e["tests__test_configs__invalid_keys.yaml"] = {
      2,
      ":14:1: invalid_key: unknown key; remove it (docs/config.md lists every key)\n{path}:15:1: "
      "another_invalid_key: unknown key; remove it (docs/config.md lists every key)",
      "",
      "",
      {},
      {}};
  e["tests__test_configs__latest_fsdp.yaml"] = {
      0,
      "",
      one_node(1),
      "",
      join(fsdp1({{"FSDP_AUTO_WRAP_POLICY", "TRANSFORMER_BASED_WRAP"},
                  {"FSDP_BACKWARD_PREFETCH", "BACKWARD_PRE"},
                  {"FSDP_TRANSFORMER_CLS_TO_WRAP", "BertLayer"},
                  {"ACCELERATE_MIXED_PRECISION", "no"}}),
           kDynamo),
      {"FSDP_IGNORED_MODULES"}};
  e["tests__test_configs__validate_launch_cmd.yaml"] = {
      0,
      "",
      one_node(1),
      "",
      join({{"ACCELERATE_DEBUG_MODE", "true"}, {"ACCELERATE_USE_CPU", "False"}}, kDynamo),
      join(kNoParadigm, Names{"FSDP_SYNC_MODULE_STATES", "ACCELERATE_DEEPSPEED_CONFIG_FILE"})};
  e["tests__tp__fsdp2_tp_preparation_config.yaml"] = {
      0,
      "",
      one_node(4),
      "",
      join(fsdp1({{"ACCELERATE_MIXED_PRECISION", "no"}}), kDynamo),
      {"FSDP_AUTO_WRAP_POLICY"}};
  return e;
}

TEST(RealConfigsTest, EveryAccelerateConfigLaunchesAsAccelerateWouldLaunchIt) {
  const std::string dir = testing::shared_configs();
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no " << dir << " on this machine";
  const auto expected = expectations();
  testing::TempDir home;  // an empty HF_HOME: no default config file interferes
  const std::string cwd = std::filesystem::current_path().string();
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string path = entry.path().string();
    SCOPED_TRACE(name);
    auto it = expected.find(name);
    ASSERT_NE(it, expected.end()) << "a new config file: add what Accelerate gives for it";
    const Expected& want = it->second;
    const testing::LaunchRun r = testing::run_launcher(
        {"--config_file", path, "--dry_run", "--no_python", "/bin/true"},
        {{"OMP_NUM_THREADS", "3"}, {"HF_HOME", home.path()}, {"PYTHONPATH", ""}});
    ++checked;
    ASSERT_EQ(r.exit_code, want.exit_code) << r.err;
    if (want.exit_code != 0) {
      EXPECT_EQ(r.err,
                "acc-launch: error: " + path + replace_all(want.error, "{path}", path) + "\n");
      continue;
    }
    const testing::DryRun run = testing::parse_dry_run(r.out);
    ASSERT_EQ(run.header.rfind(want.header, 0), 0u) << run.header;
    if (!want.port.empty()) {
      EXPECT_EQ(run.header.substr(want.header.size()), want.port);
    }
    const int workers = std::stoi(want.header.substr(want.header.find(" x ") + 3));
    ASSERT_EQ(static_cast<int>(run.workers.size()), workers);
    // Accelerate's simple launcher (the path that exports ACCELERATE_USE_CPU) runs its one
    // process without torchrun's variables; every other path gives the torchrun contract.
    const bool simple = workers == 1 && std::any_of(want.env.begin(), want.env.end(), [](auto& kv) {
                          return kv.first == "ACCELERATE_USE_CPU";
                        });
    for (int i = 0; i < workers; ++i) {
      if (simple) {
        EXPECT_EQ(run.workers[i].count("LOCAL_RANK"), 0u);
        EXPECT_EQ(run.workers[i].count("RANK"), 0u);
      } else {
        EXPECT_EQ(run.workers[i].at("LOCAL_RANK"), std::to_string(i));
        EXPECT_EQ(run.workers[i].at("RANK"), std::to_string(i));  // node rank 0
      }
      EXPECT_EQ(run.commands[i], "command: /bin/true");
    }
    const auto& env = run.workers[0];
    for (const auto& [key, value] : want.env) {
      auto found = env.find(key);
      if (found == env.end()) {
        ADD_FAILURE() << key << " is not set; expected " << value;
        continue;
      }
      EXPECT_EQ(found->second, value) << key;
    }
    for (const std::string& key : want.absent) EXPECT_EQ(env.count(key), 0u) << key << " is set";
    if (env.count("ACCELERATE_USE_DEEPSPEED")) {
      EXPECT_EQ(env.at("PYTHONPATH"), "<run dir>/python:" + cwd);  // the Python hook first
    }
  }
  EXPECT_EQ(checked, static_cast<int>(expected.size())) << "a file of the table is missing";
}

TEST(RealConfigsTest, TheCommandLineOverridesARealConfig) {
  const std::string path =
      testing::shared_configs() + "/examples__config_yaml_templates__multi_node.yaml";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  // Machine 1 of the 2-node template, as its second node would start it.
  const testing::LaunchRun r =
      testing::run_launcher({"--config_file", path, "--machine_rank", "1", "--mixed_precision",
                             "bf16", "--dry_run", "--no_python", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const testing::DryRun run = testing::parse_dry_run(r.out);
  EXPECT_EQ(run.header,
            "# acc-launch dry run: 2 node(s) x 4 worker(s), world size 8, node rank 1, store "
            "1234:9999");
  ASSERT_EQ(run.workers.size(), 4u);
  EXPECT_EQ(run.workers[0].at("RANK"), "4");
  EXPECT_EQ(run.workers[3].at("RANK"), "7");
  EXPECT_EQ(run.workers[0].at("ACCELERATE_MIXED_PRECISION"), "bf16");
}

TEST(RealConfigsTest, TheSlurmTemplateLaunchesWithNumProcessesOnTheCommandLine) {
  const std::string path = testing::shared_configs() + "/examples__slurm__fsdp_config.yaml";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  const testing::LaunchRun r = testing::run_launcher(
      {"--config_file", path, "--num_processes", "4", "--dry_run", "--no_python", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const testing::DryRun run = testing::parse_dry_run(r.out);
  ASSERT_EQ(run.workers.size(), 4u);
  EXPECT_EQ(run.workers[0].at("ACCELERATE_USE_FSDP"), "true");
  EXPECT_EQ(run.workers[0].at("FSDP_BACKWARD_PREFETCH"), "BACKWARD_PRE");
}

TEST(RealConfigsTest, TheDefaultConfigFileIsUsedWithoutConfigFile) {
  testing::TempDir home;
  std::filesystem::create_directories(home.path() + "/accelerate");
  home.file("accelerate/default_config.yaml",
            "distributed_type: MULTI_CPU\nnum_processes: 3\nmixed_precision: bf16\n");
  const testing::LaunchRun r =
      testing::run_launcher({"--dry_run", "--no_python", "/bin/true"},
                            {{"HF_HOME", home.path()}, {"OMP_NUM_THREADS", "2"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "acc-launch: using the config file " + home.path() +
                       "/accelerate/default_config.yaml (pass --config_file to choose another)\n");
  const testing::DryRun run = testing::parse_dry_run(r.out);
  ASSERT_EQ(run.workers.size(), 3u);
  EXPECT_EQ(run.workers[2].at("ACCELERATE_MIXED_PRECISION"), "bf16");
  EXPECT_EQ(run.workers[2].at("ACCELERATE_USE_CPU"), "True");
  // --cpu does not skip the default file (Accelerate's quirk, fixed): its settings still apply.
  const testing::LaunchRun cpu = testing::run_launcher(
      {"--cpu", "--dry_run", "--no_python", "/bin/true"}, {{"HF_HOME", home.path()}});
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(testing::parse_dry_run(cpu.out).workers.at(0).at("ACCELERATE_MIXED_PRECISION"), "bf16");
}

}  // namespace
}  // namespace acc::config
