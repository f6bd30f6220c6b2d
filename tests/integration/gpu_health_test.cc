// GPU health with the real acc-launch on a machine without a GPU: the launcher sees NVIDIA GPUs in
// a fake /proc (ACC_HOST_ROOT, as it reads the real one) and asks fake_nvml.cc about them
// (ACC_NVML_LIBRARY, loaded as NVIDIA's library is). An unfit GPU of the workers refuses the
// start (one line, exit 8); a restart waits for the failed workers' GPU memory.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;

// A host root whose driver lists `gpus` NVIDIA GPUs, with fake_nvml.cc's UUIDs.
std::string fake_gpu_host(int gpus) {
  const std::string root = make_temp_dir();
  for (int i = 0; i < gpus; ++i) {
    const fs::path dir =
        fs::path(root) / "proc/driver/nvidia/gpus" / ("0000:0" + std::to_string(i + 1) + ":00.0");
    fs::create_directories(dir);
    std::ofstream(dir / "information") << "Model: \t\t Fake GPU\nGPU UUID: \t GPU-0000000" << i
                                       << "-fake-4000-8000-000000000000\n";
  }
  fs::create_directories(fs::path(root) / "sys/devices/system/cpu");
  std::ofstream(fs::path(root) / "sys/devices/system/cpu/online") << "0-1\n";
  return root;
}

std::map<std::string, std::string> gpu_node(int gpus, const std::string& mode) {
  return {{"ACC_HOST_ROOT", fake_gpu_host(gpus)},
          {"ACC_NVML_LIBRARY", ACC_FAKE_NVML_LIBRARY},
          {"ACC_FAKE_NVML", mode},
          {"ACC_FAKE_NVML_GPUS", std::to_string(gpus)},
          {"CUDA_VISIBLE_DEVICES", ""},
          {"OMP_NUM_THREADS", "1"}};  // no notice about it: a healthy start prints nothing
}

TEST(GpuHealthLaunchTest, AnUnfitGpuOfTheWorkersRefusesTheStartWithOneLineAndExit8) {
  const std::map<std::string, std::string> reasons = {
      {"ecc", "2 uncorrected ECC error(s) since the driver was loaded"},
      {"retired_pending", "memory pages wait to be retired (a reset retires them)"},
      {"remap_failed", "a row remapping failed"},
      {"reset_required", "the driver asks for a GPU reset"}};
  for (const auto& [mode, reason] : reasons) {
    LaunchRun run = run_launcher(worker({"--nproc_per_node", "2"}, {"env"}), gpu_node(2, mode));
    EXPECT_EQ(run.exit_code, 8) << mode << ": " << run.err;
    EXPECT_EQ(run.err,
              "acc-launch: error: GPU 1 (GPU-00000001-fake-4000-8000-000000000000): " + reason +
                  "; not starting the workers on this node (another node may run the "
                  "job)\n");
    EXPECT_TRUE(run.out.empty()) << "no worker ran: " << run.out;
  }
  // --retryable_exit_code applies: a bad GPU here is the launcher's failure, not the job's.
  LaunchRun retryable =
      run_launcher(worker({"--nproc_per_node", "2", "--retryable_exit_code", "138"}, {"env"}),
                   gpu_node(2, "ecc"));
  EXPECT_EQ(retryable.exit_code, 138) << retryable.err;
}

TEST(GpuHealthLaunchTest, OnlyTheGpusTheWorkersUseAreChecked) {
  LaunchRun one = run_launcher(worker({"--nproc_per_node", "1"}, {"env"}), gpu_node(2, "ecc"));
  EXPECT_EQ(one.exit_code, 0) << "local rank 0 uses GPU 0 only: " << one.err;
  EXPECT_EQ(one.err, "");

  std::map<std::string, std::string> env = gpu_node(2, "ecc");
  env["CUDA_VISIBLE_DEVICES"] = "GPU-00000000";
  LaunchRun visible = run_launcher(worker({"--nproc_per_node", "2"}, {"env"}), env);
  EXPECT_EQ(visible.exit_code, 0) << "GPU 1 is not visible to the workers: " << visible.err;

  LaunchRun cpu =
      run_launcher(worker({"--nproc_per_node", "2", "--cpu"}, {"env"}), gpu_node(2, "ecc"));
  EXPECT_EQ(cpu.exit_code, 0) << "--cpu: the workers use no GPU: " << cpu.err;
}

TEST(GpuHealthLaunchTest, HealthyGpusOrOnesThatCannotSayStartTheJobSilently) {
  for (const char* mode : {"healthy", "not_supported"}) {
    LaunchRun run = run_launcher(worker({"--nproc_per_node", "2"}, {"env"}), gpu_node(2, mode));
    EXPECT_EQ(run.exit_code, 0) << mode << ": " << run.err;
    EXPECT_EQ(run.err, "") << mode;
    EXPECT_NE(run.out.find("[rank1]: RANK=1"), std::string::npos) << run.out;
  }
}

// --- before a restart: the failed attempt's GPU memory ---------------------------------------

// One worker a try that appends its pid to `file` and fails, restarted once: the file shows, in
// order, each worker's pid and each answer the fake NVML gave the launcher between them.
std::vector<std::string> failing_twice(const std::string& file) {
  return {"--nproc_per_node",
          "1",
          "--max_restarts",
          "1",
          "--no_python",
          "/bin/sh",
          "-c",
          "echo $$ >> " + file + "; exit 3"};
}

TEST(GpuHealthLaunchTest, ARestartWaitsUntilTheFailedWorkersLetGoOfTheirGpuMemory) {
  const std::string file = make_temp_dir() + "/pids";
  std::map<std::string, std::string> env = gpu_node(1, "slow_release");
  env["ACC_FAKE_NVML_PIDS"] = file;
  env["ACC_FAKE_NVML_RELEASE_MS"] = "300";
  LaunchRun run = run_launcher(failing_twice(file), env);
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_EQ(run.err.find("GPU memory"), std::string::npos)
      << "let go within the bound: " << run.err;
  const std::vector<std::string> lines = lines_of(read_text(file));
  ASSERT_GE(lines.size(), 4u) << read_text(file);
  const std::string first = lines.front();
  EXPECT_EQ(lines[1], "nvml: held " + first) << read_text(file);
  EXPECT_EQ(lines[lines.size() - 2], "nvml: free") << "the restart came after: " << read_text(file);
  EXPECT_NE(lines.back(), first) << "a new worker";
  EXPECT_EQ(lines.back().find_first_not_of("0123456789"), std::string::npos) << read_text(file);
}

TEST(GpuHealthLaunchTest, ARestartStopsWaitingAfterTheBoundWithOneLine) {
  const std::string file = make_temp_dir() + "/pids";
  std::map<std::string, std::string> env = gpu_node(1, "slow_release");
  env["ACC_FAKE_NVML_PIDS"] = file;
  env["ACC_FAKE_NVML_RELEASE_MS"] = "600000";
  LaunchRun run = run_launcher(failing_twice(file), env);
  EXPECT_EQ(run.exit_code, 3) << run.err;
  const std::vector<std::string> lines = lines_of(read_text(file));
  ASSERT_GE(lines.size(), 3u) << read_text(file);
  const std::string first = lines.front();
  const std::string warning = "acc-launch: warning: the previous attempt's pid " + first +
                              " still holds 1.0 GiB of GPU memory after 5.";
  ASSERT_NE(run.err.find(warning), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(" s; restarting anyway\n", run.err.find(warning)), std::string::npos)
      << run.err;
  EXPECT_EQ(lines[lines.size() - 2], "nvml: held " + first) << read_text(file);
  EXPECT_NE(lines.back(), first) << "restarted anyway: " << read_text(file);
}

}  // namespace
}  // namespace acc::testing
