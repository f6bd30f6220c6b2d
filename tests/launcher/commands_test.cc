// acc-launch config default|show|validate|update, env and test, driven as a user runs them.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include <cstdio>
#include "acc/config/cluster_config.h"
#include "acc/launcher/host/host.h"
#include "commands/commands.h"
#include "commands/subcommands.h"

#include "launcher_harness.h"

namespace acc::config {
namespace {

TEST(ConfigDefaultTest, WritesJsonForThisMachineAndNeverOverwrites) {
  testing::TempDir home;
  const testing::LaunchRun r =
      testing::run_launcher({"config", "default"}, {{"HF_HOME", home.path()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string path = home.path() + "/accelerate/default_config.yaml";
  EXPECT_EQ(r.out, "accelerate configuration saved at " + path + "\n");
  const std::string text = testing::read_text(path);
  EXPECT_EQ(text.substr(0, 2), "{\n");  // JSON, as write_basic_config writes, in the .yaml file
  const ClusterConfig c = load_config(path);
  const int gpus = acc::launcher::detect_host().gpu_count;
  EXPECT_EQ(c.num_processes(), gpus > 0 ? gpus : 1);
  EXPECT_EQ(c.distributed_type(), gpus > 1 ? "MULTI_GPU" : "NO");
  EXPECT_EQ(c.use_cpu(), gpus == 0);
  EXPECT_EQ(c.mixed_precision(), "no");
  EXPECT_FALSE(c.same_network());

  const testing::LaunchRun again = testing::run_launcher(
      {"config", "default", "--mixed_precision", "bf16"}, {{"HF_HOME", home.path()}});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_EQ(again.out, "Configuration already exists at " + path +
                           ", will not override. Run `acc-launch config` manually or pass a "
                           "different `--config_file`.\n");
  EXPECT_EQ(testing::read_text(path), text);
}

// The machine's GPUs as detect_host() counts them (a fake /proc under ACC_HOST_ROOT here), with
// CUDA_VISIBLE_DEVICES honoured as PyTorch honours it.
TEST(ConfigDefaultTest, CountsTheGpusThisProcessMaySee) {
  testing::TempDir root;
  for (const char* bus : {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0"}) {
    std::filesystem::create_directories(root.path() + "/proc/driver/nvidia/gpus/" + bus);
    root.file(std::string("proc/driver/nvidia/gpus/") + bus + "/information",
              std::string("Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-") + bus[6] + "aaa\n");
  }
  struct Case {
    const char* visible;  // nullptr: unset
    int gpus;
  };
  for (const Case& c : {Case{nullptr, 3}, Case{"0,2", 2}, Case{"GPU-2a,GPU-3", 2}, Case{"1,7,2", 1},
                        Case{"-1", 0}, Case{"0,0", 0}}) {
    testing::TempDir home;
    std::map<std::string, std::string> env = {{"HF_HOME", home.path()},
                                              {"ACC_HOST_ROOT", root.path()}};
    if (c.visible) env["CUDA_VISIBLE_DEVICES"] = c.visible;
    const testing::LaunchRun r = testing::run_launcher({"config", "default"}, env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const ClusterConfig config = load_config(home.path() + "/accelerate/default_config.yaml");
    const char* shown = c.visible ? c.visible : "(unset)";
    EXPECT_EQ(config.num_processes(), c.gpus > 0 ? c.gpus : 1) << shown;
    EXPECT_EQ(config.distributed_type(), c.gpus > 1 ? "MULTI_GPU" : "NO") << shown;
  }
}

// `acc-launch config default && acc-launch test` on this machine (and on a CPU-only one, where
// the file says distributed_type NO: one process without the torchrun variables).
TEST(ConfigDefaultTest, TheTestCommandPassesOnTheDefaultConfig) {
  testing::TempDir home;
  ASSERT_EQ(testing::run_launcher({"config", "default"}, {{"HF_HOME", home.path()}}).exit_code, 0);
  const testing::LaunchRun test = testing::run_launcher({"test"}, {{"HF_HOME", home.path()}});
  EXPECT_EQ(test.exit_code, 0) << test.out << test.err;
  EXPECT_NE(test.out.find("Test is a success!"), std::string::npos) << test.out;

  testing::TempDir cpu_home;
  ASSERT_EQ(testing::run_launcher({"config", "default"}, {{"HF_HOME", cpu_home.path()},
                                                          {"ACC_HOST_ROOT", cpu_home.path()}})
                .exit_code,
            0);
  const testing::LaunchRun cpu = testing::run_launcher({"test"}, {{"HF_HOME", cpu_home.path()}});
  EXPECT_EQ(cpu.exit_code, 0) << cpu.out << cpu.err;
  EXPECT_NE(cpu.out.find("ok: one process"), std::string::npos) << cpu.out;
}

TEST(ConfigDefaultTest, MixedPrecisionAndPathAreHonoured) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/sub/c.yaml";
  const testing::LaunchRun r = testing::run_launcher(
      {"config", "default", "--config_file", path, "--mixed_precision", "bf16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(load_config(path).mixed_precision(), "bf16");
  const testing::LaunchRun bad =
      testing::run_launcher({"config", "default", "--mixed_precision", "fp32"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "acc-launch: error: --mixed_precision fp32: expected no, fp16, bf16 or fp8\n");
}

TEST(ConfigShowTest, PrintsTheFileAsYaml) {
  testing::TempDir dir;
  const std::string path =
      dir.file("c.yaml", "num_processes: 2\ndistributed_type: MULTI_GPU\nmixed_precision: no\n");
  const testing::LaunchRun r = testing::run_launcher({"config", "show", "--config_file", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "# " + path +
                       "\ncompute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
                       "mixed_precision: 'no'\nnum_processes: 2\n");
}

TEST(ConfigValidateTest, SaysWhatAValidFileLaunches) {
  testing::TempDir dir;
  const std::string path = dir.file("c.yaml",
                                    "distributed_type: FSDP\nnum_processes: 8\n"
                                    "num_machines: 2\nmain_process_ip: 10.0.0.1\n");
  const testing::LaunchRun r = testing::run_launcher({"config", "validate", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, path +
                       ": valid: distributed_type FSDP, 8 process(es) on 2 machine(s), mixed "
                       "precision no\n");
}

TEST(ConfigUpdateTest, RewritesALegacyFileInTheCurrentFormat) {
  testing::TempDir dir;
  const std::string path = dir.file("old.yaml",
                                    "compute_environment: LOCAL_MACHINE\ndistributed_type: NO\n"
                                    "fp16: true\ndynamo_backend: INDUCTOR\nmain_process_ip: null\n"
                                    "fsdp_config: {}\n");
  const testing::LaunchRun r = testing::run_launcher({"config", "update", "--config_file", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Successfully updated the configuration file at " + path + ".\n");
  EXPECT_EQ(testing::read_text(path),
            "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\ndynamo_config:\n"
            "  dynamo_backend: INDUCTOR\nmixed_precision: fp16\nnum_processes: 1\n");
  const testing::LaunchRun missing =
      testing::run_launcher({"config", "update", "--config_file", dir.path() + "/none.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "acc-launch: error: The passed config file located at " + dir.path() +
                             "/none.yaml doesn't exist; pass an existing file to --config_file\n");
}

TEST(EnvCommandTest, ReportsTheMachineAndTheConfig) {
  testing::TempDir dir;
  const std::string path = dir.file("c.yaml", "distributed_type: MULTI_CPU\nnum_processes: 2\n");
  const testing::LaunchRun r = testing::run_launcher({"env", "--config_file", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"- `acc-launch` version: ", "- LibTorch: ", "- CUDA runtime: ",
                           "- NCCL: ", "- GPUs: ", "- CPU cores: ", "- System RAM: "})
    EXPECT_NE(r.out.find(line), std::string::npos) << line;
  EXPECT_NE(r.out.find("- `Accelerate` config passed: " + path + "\n"), std::string::npos);
  EXPECT_NE(r.out.find("\t- distributed_type: MULTI_CPU\n\t- num_processes: 2\n"),
            std::string::npos)
      << r.out;
  const testing::LaunchRun none = testing::run_launcher({"env"}, {{"HF_HOME", dir.path()}});
  EXPECT_NE(none.out.find("- `Accelerate` default config: Not found (" + dir.path() +
                          "/accelerate/default_config.yaml)"),
            std::string::npos)
      << none.out;
}

TEST(TestCommandTest, PassesOverTheConfiguredWorkers) {
  testing::TempDir dir;
  const std::string path = dir.file("c.yaml", "distributed_type: MULTI_CPU\nnum_processes: 3\n");
  const testing::LaunchRun r = testing::run_launcher({"test", "--config_file", path});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(r.out.find("ok: rank " + std::to_string(rank) + " of 3, local rank " +
                         std::to_string(rank) + " of 3"),
              std::string::npos)
        << r.out;
  EXPECT_NE(r.out.find("Test is a success! You are ready for your distributed training!\n"),
            std::string::npos);
}

TEST(TestCommandTest, AWorkerOutsideTheContractFails) {
  const testing::LaunchRun r = testing::run_launcher({acc::launcher::kTestWorkerCommand},
                                                     {{"RANK", "3"},
                                                      {"WORLD_SIZE", "2"},
                                                      {"LOCAL_RANK", "0"},
                                                      {"LOCAL_WORLD_SIZE", "1"},
                                                      {"GROUP_RANK", "3"},
                                                      {"MASTER_ADDR", "127.0.0.1"},
                                                      {"MASTER_PORT", "29500"},
                                                      {"ACCELERATE_MIXED_PRECISION", "no"},
                                                      {"TORCHELASTIC_USE_AGENT_STORE", "False"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "FAIL: RANK is not within [0, WORLD_SIZE)\n");
}

TEST(TestCommandTest, ABadConfigFailsTheTestWithItsLine) {
  testing::TempDir dir;
  const std::string path =
      dir.file("c.yaml", "distributed_type: MULTI_CPU\nnum_processes: 3\nfoo: 1\n");
  const testing::LaunchRun r = testing::run_launcher({"test", "--config_file", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(path + ":3:1: foo: unknown key"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("success"), std::string::npos);
}

}  // namespace
}  // namespace acc::config

namespace acc::launcher {
namespace {

// One row per subcommand: the listed ones in --help's order, each run by its function but
// `launch` and `help` (main's own); only a launch's and a test's process runs a job; a PROGRAM
// is no subcommand.
TEST(SubcommandTableTest, EachRowSaysHowItRunsAndWhetherItIsListed) {
  std::vector<std::string> listed;
  for (const SubcommandHelp& line : subcommand_help()) listed.push_back(line.name);
  EXPECT_EQ(listed, (std::vector<std::string>{"launch", "config", "env", "test", "stacks", "top",
                                              "rendezvous", "help"}));
  for (const Subcommand& command : subcommands()) {
    const std::string name = command.name;
    EXPECT_EQ(command.run == nullptr, name == "launch" || name == "help") << name;
    EXPECT_EQ(command.runs_a_job, name == "launch" || name == "test") << name;
    EXPECT_EQ(find_subcommand(name), &command);
  }
  EXPECT_EQ(find_subcommand(kTestWorkerCommand)->summary, nullptr) << "hidden";
  EXPECT_EQ(find_subcommand("train.py"), nullptr);
}

}  // namespace
}  // namespace acc::launcher
