// GPU health verdicts over readings, the workers' GPUs among NVML's, and the pre-flight check over
// fake_nvml.cc (which Nvml loads with dlopen as it loads NVIDIA's library).

#include "host/gpu_health.h"

#include <stdlib.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/common/exit_code.h"
#include "host/nvml.h"

namespace acc::launcher {
namespace {

const std::string kFake = ACC_FAKE_NVML_LIBRARY;

struct Variable {
  Variable(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~Variable() { ::unsetenv(name_); }
  const char* name_;
};

TEST(GpuHealthTest, EveryFaultIsAReasonAndWhatCannotBeSaidIsNone) {
  EXPECT_EQ(gpu_unfit_reason({}), "") << "NVML could say nothing";
  GpuHealthReadings readings;
  readings.uncorrected_ecc_errors = 0;
  readings.retired_pages_pending = false;
  readings.recovery_action = 0;
  EXPECT_EQ(gpu_unfit_reason(readings), "");
  readings.uncorrected_ecc_errors = 3;
  readings.row_remapping_failed = true;
  readings.recovery_action = 2;
  EXPECT_EQ(gpu_unfit_reason(readings),
            "3 uncorrected ECC error(s) since the driver was loaded; a row remapping failed; the "
            "driver asks for a node reboot");
}

TEST(GpuHealthTest, TheWorkersGpusAreFoundByIndexOrUuidPrefix) {
  const std::vector<std::string> uuids = {"GPU-1111-aa", "GPU-1112-bb", "GPU-2222-cc"};
  using Indices = std::vector<unsigned>;
  EXPECT_EQ(nvml_indices_of({"0", "2"}, uuids), (Indices{0, 2}));
  EXPECT_EQ(nvml_indices_of({"GPU-2222", "GPU-1112-bb"}, uuids), (Indices{2, 1}));
  EXPECT_EQ(nvml_indices_of({"GPU-111"}, uuids), Indices{}) << "a prefix of two names neither";
  EXPECT_EQ(nvml_indices_of({"3", "GPU-9", "MIG-1111", "", "-1", "99999999999"}, uuids), Indices{})
      << "names no GPU, or a MIG instance: cannot say";
}

TEST(GpuHealthTest, AnUnfitGpuOfTheWorkersRefusesTheStartWithOneLineAndExit8) {
  Variable mode("ACC_FAKE_NVML", "ecc");
  Variable gpus("ACC_FAKE_NVML_GPUS", "2");
  Nvml nvml(kFake);
  try {
    check_gpu_health({"0", "1"}, &nvml);
    FAIL() << "GPU 1 has uncorrected ECC errors";
  } catch (const GpuError& e) {
    EXPECT_EQ(std::string(e.what()),
              "GPU 1 (GPU-00000001-fake-4000-8000-000000000000): 2 uncorrected ECC error(s) since "
              "the driver was loaded; not starting the workers on this node (another node may run "
              "the job)");
    EXPECT_EQ(exit_code_for(e), 8);
    EXPECT_TRUE(is_retryable_launcher_exit(exit_code_for(e)));
  }
  EXPECT_THROW(check_gpu_health({"GPU-00000001"}, &nvml), GpuError);
  EXPECT_NO_THROW(check_gpu_health({"0"}, &nvml)) << "the workers do not use GPU 1";
  EXPECT_NO_THROW(check_gpu_health({}, &nvml)) << "the workers use no GPU";
  EXPECT_NO_THROW(check_gpu_health({"1"}, nullptr)) << "no NVML: nothing to say";
}

TEST(GpuHealthTest, HealthyOrSilentGpusPass) {
  Variable gpus("ACC_FAKE_NVML_GPUS", "2");
  for (const char* mode : {"healthy", "not_supported", "busy"}) {
    Variable variable("ACC_FAKE_NVML", mode);
    Nvml nvml(kFake);
    EXPECT_NO_THROW(check_gpu_health({"0", "1"}, &nvml)) << mode;
  }
}

TEST(GpuHealthTest, OnlyThePreviousWorkersCountAsHoldingMemory) {
  const std::map<int, unsigned long long> processes = {{10, 1ull << 30}, {11, 0}, {99, 5}};
  EXPECT_EQ(gpu_memory_held_by(processes, {10, 11, 12}),
            (std::map<int, unsigned long long>{{10, 1ull << 30}, {11, 0}}));
  EXPECT_TRUE(gpu_memory_held_by(processes, {12}).empty()) << "99 is another job's";
  EXPECT_EQ(describe_gpu_memory_held({{10, 3ull << 29}}, std::chrono::milliseconds(5000)),
            "the previous attempt's pid 10 still holds 1.5 GiB of GPU memory after 5.0 s; "
            "restarting anyway");
  EXPECT_EQ(
      describe_gpu_memory_held({{10, 0}, {11, 0}}, std::chrono::milliseconds(5100)),
      "the previous attempt's pids 10, 11 still hold GPU memory after 5.1 s; restarting anyway");
}

}  // namespace
}  // namespace acc::launcher
