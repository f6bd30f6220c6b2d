// Bad config files: each gives exactly one line per problem, naming file:line:col, the key and
// the fix; through acc-launch, exit code 2.

#include <gtest/gtest.h>

#include "acc/common/error.h"
#include "acc/common/strings.h"
#include "acc/config/cluster_config.h"
#include "launcher_harness.h"

namespace acc::config {
namespace {

struct BadInput {
  const char* name;
  const char* yaml;
  const char* message;  // every line, for a file named bad.yaml
};

const BadInput kBadInputs[] = {
    {"UnknownKeySuggestsTheNearest", "distributed_type: NO\nnum_process: 2\n",
     "bad.yaml:2:1: num_process: unknown key; did you mean num_processes? (or remove it)"},
    {"UnknownKeyWithoutNeighbour", "distributed_type: NO\nfoo: 1\n",
     "bad.yaml:2:1: foo: unknown key; remove it (docs/config.md lists every key)"},
    {"MisspelledMixedPrecision", "distributed_type: NO\nmixed_precison: fp16\n",
     "bad.yaml:2:1: mixed_precison: unknown key; did you mean mixed_precision? (or remove it)"},
    {"IntegerKeyGivenAWord", "distributed_type: MULTI_GPU\nnum_processes: two\n",
     "bad.yaml:2:16: num_processes: expected an integer, got 'two'; write a whole number such as "
     "2"},
    {"IntegerKeyGivenAQuotedNumber", "distributed_type: MULTI_GPU\nnum_processes: '2'\n",
     "bad.yaml:2:16: num_processes: expected an integer, got '2'; write the number without quotes"},
    {"IntegerKeyGivenABoolean", "distributed_type: MULTI_GPU\nnum_machines: yes\n",
     "bad.yaml:2:15: num_machines: expected an integer, got 'yes' (YAML reads it as a boolean); "
     "write a whole number such as 2"},
    {"IntegerKeyGivenAFraction", "distributed_type: NO\nmachine_rank: 1.5\n",
     "bad.yaml:2:15: machine_rank: expected an integer, got 1.5; write a whole number such as 2"},
    {"BooleanKeyGivenAWord", "distributed_type: NO\nuse_cpu: maybe\n",
     "bad.yaml:2:10: use_cpu: expected true or false, got 'maybe'; write use_cpu: true or "
     "use_cpu: false"},
    {"BooleanKeyGivenANumber", "distributed_type: NO\ndebug: 2\n",
     "bad.yaml:2:8: debug: expected true or false, got 2; write debug: true or debug: false"},
    {"DistributedTypeGivenABoolean", "distributed_type: yes\n",
     "bad.yaml:1:19: distributed_type: expected a string, got 'yes' (YAML reads it as a boolean); "
     "quote the value"},
    {"DistributedTypeMisspelled", "distributed_type: MULTI_GUP\nnum_processes: 2\n",
     "bad.yaml:1:19: distributed_type: 'MULTI_GUP' is not one of NO, MULTI_CPU, MULTI_GPU, "
     "MULTI_NPU, MULTI_MLU, MULTI_SDAA, MULTI_MUSA, MULTI_XPU, MULTI_HPU, MULTI_NEURON, DEEPSPEED, "
     "FSDP, MEGATRON_LM, XLA (did you mean MULTI_GPU?)"},
    {"MixedPrecisionOutsideItsChoices", "distributed_type: NO\nmixed_precision: fp32\n",
     "bad.yaml:2:18: mixed_precision: 'fp32' is not one of no, fp16, bf16, fp8"},
    {"ComputeEnvironmentUnknown", "compute_environment: CLOUD\ndistributed_type: NO\n",
     "bad.yaml:1:22: compute_environment: 'CLOUD' is not one of LOCAL_MACHINE, AMAZON_SAGEMAKER"},
    {"DistributedTypeMissing", "num_processes: 2\n",
     "bad.yaml:1:1: distributed_type: missing; add distributed_type: NO (one process), MULTI_GPU, "
     "MULTI_CPU, FSDP, DEEPSPEED or MEGATRON_LM"},
    {"TpuIsRefused", "distributed_type: XLA\n",
     "bad.yaml:1:19: distributed_type: XLA (TPU) runs are not launched by acc-launch; use "
     "`accelerate launch` on the TPU VM, or pick NO, MULTI_GPU or MULTI_CPU"},
    {"SageMakerIsRefused", "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: NO\n",
     "bad.yaml:1:22: compute_environment: AMAZON_SAGEMAKER jobs are not launched by acc-launch; "
     "use "
     "`accelerate launch` for SageMaker, or write compute_environment: LOCAL_MACHINE"},
    {"ProcessesNotDivisibleByMachines",
     "distributed_type: MULTI_GPU\nnum_processes: 6\nnum_machines: 4\nmain_process_ip: 10.0.0.1\n",
     "bad.yaml:2:16: num_processes: 6 is not divisible by num_machines 4; num_processes counts "
     "every machine's workers, so use a multiple of 4"},
    {"MachineRankTooLarge",
     "distributed_type: MULTI_GPU\nnum_processes: 4\nnum_machines: 2\nmachine_rank: 2\n"
     "main_process_ip: 10.0.0.1\n",
     "bad.yaml:4:15: machine_rank: 2 is out of range for num_machines 2; use 0 to 1, a different "
     "rank on each machine"},
    {"MachineRankNegative", "distributed_type: NO\nmachine_rank: -1\n",
     "bad.yaml:2:15: machine_rank: -1 is out of range for num_machines 1; use 0 to 0, a different "
     "rank on each machine"},
    {"SeveralMachinesWithoutAnAddress",
     "distributed_type: MULTI_GPU\nnum_processes: 4\nnum_machines: 2\n",
     "bad.yaml:3:15: main_process_ip: missing; with num_machines 2 every machine needs the address "
     "of machine 0, e.g. main_process_ip: 10.0.0.1"},
    {"SeveralMachinesWithANullAddress",
     "distributed_type: MULTI_GPU\nnum_processes: 4\nnum_machines: 2\nmain_process_ip: null\n",
     "bad.yaml:4:18: main_process_ip: missing; with num_machines 2 every machine needs the "
     "address of machine 0, e.g. main_process_ip: 10.0.0.1"},
    {"PortTooLarge", "distributed_type: NO\nmain_process_port: 70000\n",
     "bad.yaml:2:20: main_process_port: 70000 is not a TCP port; use 1 to 65535 (or 0 for a free "
     "port on one machine)"},
    {"PortNegative", "distributed_type: NO\nmain_process_port: -1\n",
     "bad.yaml:2:20: main_process_port: -1 is not a TCP port; use 1 to 65535 (or 0 for a free port "
     "on one machine)"},
    {"FreePortOnSeveralMachines",
     "distributed_type: MULTI_GPU\nnum_processes: 4\nnum_machines: 2\nmain_process_ip: 10.0.0.1\n"
     "main_process_port: 0\n",
     "bad.yaml:5:20: main_process_port: 0 (a free port) works on one machine only; give the port "
     "every machine will use, e.g. 29500"},
    {"FewerGpuIdsThanProcesses", "distributed_type: MULTI_GPU\nnum_processes: 4\ngpu_ids: 0,1\n",
     "bad.yaml:3:10: gpu_ids: lists 2 GPU(s) but each machine runs 4 processes (num_processes / "
     "num_machines); list 4 ids or use all"},
    {"GpuIdsNotAList", "distributed_type: NO\ngpu_ids: first\n",
     "bad.yaml:2:10: gpu_ids: 'first' is not a GPU list; use all or ids such as 0,1"},
    {"ZeroProcesses", "distributed_type: MULTI_GPU\nnum_processes: 0\n",
     "bad.yaml:2:16: num_processes: 0 is not a number of processes; use 1 or more"},
    {"ZeroMachines", "distributed_type: NO\nnum_machines: 0\n",
     "bad.yaml:2:15: num_machines: 0 is not a number of machines; use 1 or more"},
    {"SectionNotAMapping", "distributed_type: FSDP\nnum_processes: 2\nfsdp_config: FULL_SHARD\n",
     "bad.yaml:3:14: fsdp_config: expected a mapping of keys to values, got 'FULL_SHARD'; write "
     "fsdp_config: {} or indent its keys below it"},
    {"FsdpStrategyOutsideItsChoices",
     "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_sharding_strategy: FULL\n",
     "bad.yaml:4:27: fsdp_config.fsdp_sharding_strategy: 'FULL' is not one of FULL_SHARD, "
     "SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2, 1, 2, 3, 4, 5"},
    {"ZeroStageOutOfRange",
     "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 4\n",
     "bad.yaml:4:15: deepspeed_config.zero_stage: '4' is not one of 0, 1, 2, 3"},
    {"OffloadDeviceUnknown",
     "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  "
     "offload_optimizer_device: "
     "gpu\n",
     "bad.yaml:4:29: deepspeed_config.offload_optimizer_device: 'gpu' is not one of none, cpu, "
     "nvme (did you mean cpu?)"},
    {"DynamoBackendMisspelled", "distributed_type: NO\ndynamo_config:\n  dynamo_backend: inductr\n",
     "bad.yaml:3:19: dynamo_config.dynamo_backend: 'inductr' is not one of NO, EAGER, AOT_EAGER, "
     "INDUCTOR, AOT_TS_NVFUSER, NVPRIMS_NVFUSER, CUDAGRAPHS, OFI, FX2TRT, ONNXRT, TENSORRT, "
     "AOT_TORCHXLA_TRACE_ONCE, TORCHXLA_TRACE_ONCE, TVM, HPU_BACKEND, NEURON (did you mean "
     "INDUCTOR?)"},
    {"RamEfficientLoadingWithoutSync",
     "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_sync_module_states: false\n",
     "bad.yaml:4:28: fsdp_config.fsdp_sync_module_states: must be true when "
     "fsdp_cpu_ram_efficient_loading is true (Accelerate refuses this at launch); set it to true "
     "or turn the loading off"},
    {"NumberWithExponentIsAStringInYaml",
     "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_min_num_params: 1e8\n",
     "bad.yaml:4:24: fsdp_config.fsdp_min_num_params: expected an integer, got '1e8'; write a "
     "whole number such as 2"},
    {"ListKeyGivenAWord", "distributed_type: NO\ntpu_env: abc\n",
     "bad.yaml:2:10: tpu_env: expected a list, got 'abc'; write [] or a list of strings"},
    {"EmptyFile", "",
     "bad.yaml:1:1: config: the file is empty; write one with `acc-launch config`"},
    {"NotAMapping", "- distributed_type\n",
     "bad.yaml:1:1: config: expected a mapping of keys such as `distributed_type: MULTI_GPU`, got "
     "a list"},
    {"EveryProblemOnItsOwnLine",
     "distributed_type: MULTI_GPU\nnum_processes: 3\nnum_machines: 2\nfoo: 1\n",
     "bad.yaml:4:1: foo: unknown key; remove it (docs/config.md lists every key)\n"
     "bad.yaml:2:16: num_processes: 3 is not divisible by num_machines 2; num_processes counts "
     "every machine's workers, so use a multiple of 2\n"
     "bad.yaml:3:15: main_process_ip: missing; with num_machines 2 every machine needs the address "
     "of machine 0, e.g. main_process_ip: 10.0.0.1"},
};

class BadConfigTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadConfigTest, FailsWithOneLinePerProblem) {
  const BadInput& input = GetParam();
  try {
    parse_config(input.yaml, "bad.yaml");
    FAIL() << "accepted: " << input.yaml;
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), input.message);
  }
}

INSTANTIATE_TEST_SUITE_P(Inputs, BadConfigTest, ::testing::ValuesIn(kBadInputs),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(BadConfigTest, YamlSyntaxErrorNamesThePlace) {
  try {
    parse_config("distributed_type: NO\nnum_processes: [1\n", "bad.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("bad.yaml:", 0), 0u) << message;
    EXPECT_NE(message.find(": YAML syntax error: "), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// The same mistakes through the real binary: exit code 2 and exactly the lines on stderr.
TEST(BadConfigTest, AccLaunchExitsWithCodeTwoAndTheLines) {
  testing::TempDir dir;
  for (const char* name :
       {"UnknownKeySuggestsTheNearest", "IntegerKeyGivenAWord", "ProcessesNotDivisibleByMachines",
        "SeveralMachinesWithoutAnAddress", "PortTooLarge", "FewerGpuIdsThanProcesses",
        "EveryProblemOnItsOwnLine", "SageMakerIsRefused"}) {
    const BadInput* input = nullptr;
    for (const BadInput& candidate : kBadInputs)
      if (std::string(candidate.name) == name) input = &candidate;
    ASSERT_NE(input, nullptr) << name;
    const std::string path = dir.file(std::string(name) + ".yaml", input->yaml);
    const testing::LaunchRun r =
        testing::run_launcher({"--config_file", path, "--dry_run", "--no_python", "/bin/true"});
    EXPECT_EQ(r.exit_code, 2) << name;
    EXPECT_EQ(r.err, "acc-launch: error: " + replace_all(input->message, "bad.yaml", path) + "\n")
        << name;
    EXPECT_EQ(r.out, "") << name;
  }
}

TEST(BadConfigTest, AMissingConfigFileIsOneLine) {
  const testing::LaunchRun r = testing::run_launcher(
      {"--config_file", "/nonexistent/acc.yaml", "--dry_run", "--no_python", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(
      r.err,
      "acc-launch: error: the config file /nonexistent/acc.yaml does not exist or cannot be "
      "read; pass an existing file to --config_file, or write one with `acc-launch config`\n");
}

TEST(BadConfigTest, ConfigValidateReportsTheSameLines) {
  testing::TempDir dir;
  const std::string path = dir.file("v.yaml", "distributed_type: NO\nnum_process: 2\n");
  const testing::LaunchRun r = testing::run_launcher({"config", "validate", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "acc-launch: error: " + path +
                       ":2:1: num_process: unknown key; did you mean num_processes? (or remove "
                       "it)\n");
}

}  // namespace
}  // namespace acc::config
