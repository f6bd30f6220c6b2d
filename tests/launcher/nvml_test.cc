// The NVML client against fake_nvml.cc, a library with NVML's symbols and structures that the
// client loads with dlopen as it loads NVIDIA's: per-process SM utilization, a driver that is not
// loaded, a file that is no NVML, each GPU's health readings and the processes holding GPU memory.

#include "host/nvml.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "acc/common/error.h"
#include "host/gpu_health.h"

namespace acc::launcher {
namespace {

const std::string kFake = ACC_FAKE_NVML_LIBRARY;

struct Mode {
  explicit Mode(const char* mode) { ::setenv("ACC_FAKE_NVML", mode, 1); }
  ~Mode() { ::unsetenv("ACC_FAKE_NVML"); }
};

struct Variable {
  Variable(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~Variable() { ::unsetenv(name_); }
  const char* name_;
};

pid_t sleeping_child() {
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  return child;
}

void stop(pid_t child) {
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(NvmlTest, AChildThatRunsKernelsHasItsSmUtilization) {
  Mode mode("busy");
  Nvml nvml(kFake);
  EXPECT_EQ(nvml.device_count(), 1u);
  const pid_t child = sleeping_child();
  const auto utilization = nvml.sm_utilization();
  stop(child);
  ASSERT_EQ(utilization.count(child), 1u);
  EXPECT_EQ(utilization.at(child), 87u);
  EXPECT_GE(utilization.at(child), kBusyGpuPercent);
  EXPECT_EQ(utilization.count(::getpid()), 0u) << "the caller itself runs nothing";
}

TEST(NvmlTest, AnIdleGpuReportsNoProcess) {
  Mode mode("idle");
  Nvml nvml(kFake);
  const pid_t child = sleeping_child();
  const auto utilization = nvml.sm_utilization();
  stop(child);
  EXPECT_TRUE(utilization.empty());
}

TEST(NvmlTest, ADriverThatIsNotLoadedIsOneClearError) {
  Mode mode("no_driver");
  try {
    Nvml nvml(kFake);
    FAIL() << "initialised without a driver";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nvmlInit: Driver Not Loaded"), std::string::npos)
        << e.what();
  }
}

TEST(NvmlTest, AMissingLibraryOrOneWithoutNvmlIsRefused) {
  EXPECT_THROW(Nvml("/nonexistent/libnvidia-ml.so.1"), Error);
  try {
    Nvml nvml("libm.so.6");
    FAIL() << "libm taken for NVML";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no nvmlInit_v2"), std::string::npos) << e.what();
  }
}

TEST(NvmlTest, AHealthyGpuAnswersEveryHealthQuery) {
  Mode mode("healthy");
  Variable gpus("ACC_FAKE_NVML_GPUS", "2");
  Nvml nvml(kFake);
  ASSERT_EQ(nvml.device_count(), 2u);
  EXPECT_EQ(nvml.uuid(1), "GPU-00000001-fake-4000-8000-000000000000");
  const GpuHealthReadings readings = nvml.health(1);
  EXPECT_EQ(readings.uncorrected_ecc_errors, 0u);
  EXPECT_EQ(readings.retired_pages_pending, false);
  EXPECT_EQ(readings.remapped_rows_pending, false);
  EXPECT_EQ(readings.row_remapping_failed, false);
  EXPECT_EQ(readings.recovery_action, 0u);
  EXPECT_EQ(readings.lost, "");
  EXPECT_EQ(gpu_unfit_reason(readings), "");
}

struct Fault {
  const char* mode;
  const char* reason;  // what gpu_unfit_reason says of the faulty GPU
};

void PrintTo(const Fault& fault, std::ostream* out) {
  *out << fault.mode;
}

class NvmlFaultTest : public ::testing::TestWithParam<Fault> {};

TEST_P(NvmlFaultTest, IsReadOnItsGpuOnly) {
  Mode mode(GetParam().mode);
  Variable gpus("ACC_FAKE_NVML_GPUS", "2");
  Nvml nvml(kFake);
  EXPECT_EQ(gpu_unfit_reason(nvml.health(0)), "") << "GPU 0 is healthy";
  EXPECT_EQ(gpu_unfit_reason(nvml.health(1)), GetParam().reason);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, NvmlFaultTest,
    ::testing::Values(
        Fault{"ecc", "2 uncorrected ECC error(s) since the driver was loaded"},
        Fault{"retired_pending", "memory pages wait to be retired (a reset retires them)"},
        Fault{"remap_pending", "memory rows wait to be remapped (a reset remaps them)"},
        Fault{"remap_failed", "a row remapping failed"},
        Fault{"reset_required", "the driver asks for a GPU reset"},
        Fault{"lost", "NVML: the GPU has fallen off the bus"}),
    [](const auto& info) { return std::string(info.param.mode); });

TEST(NvmlTest, AGpuThatCannotSayIsNoFault) {
  Mode mode("not_supported");
  Nvml nvml(kFake);
  const GpuHealthReadings readings = nvml.health(0);
  EXPECT_FALSE(readings.uncorrected_ecc_errors.has_value());
  EXPECT_FALSE(readings.retired_pages_pending.has_value());
  EXPECT_FALSE(readings.remapped_rows_pending.has_value());
  EXPECT_FALSE(readings.row_remapping_failed.has_value());
  EXPECT_FALSE(readings.recovery_action.has_value());
  EXPECT_EQ(gpu_unfit_reason(readings), "");
}

// slow_release: the pids of a file hold 1 GiB each while they live and for a while after.
TEST(NvmlTest, AProcessHoldsGpuMemoryUntilTheDriverLetsGo) {
  Mode mode("slow_release");
  const std::string file =
      (std::filesystem::temp_directory_path() / ("nvml_pids_" + std::to_string(::getpid())))
          .string();
  Variable pids("ACC_FAKE_NVML_PIDS", file);
  Nvml nvml(kFake);
  const pid_t child = sleeping_child();
  std::ofstream(file) << child << "\n";
  EXPECT_EQ(nvml.compute_processes().at(child), 1ull << 30) << "alive";
  stop(child);
  {
    Variable release("ACC_FAKE_NVML_RELEASE_MS", "600000");
    EXPECT_EQ(nvml.compute_processes().count(child), 1u) << "gone, not yet let go";
  }
  EXPECT_TRUE(nvml.compute_processes().empty()) << "let go";
  std::filesystem::remove(file);
}

// This machine's library: null where there is no NVIDIA driver (CI), else one with a GPU.
TEST(NvmlTest, TheMachinesLibraryIsNullWithoutADriverOrHasAGpu) {
  if (std::getenv("ACC_NVML_LIBRARY")) GTEST_SKIP() << "ACC_NVML_LIBRARY is set";
  Nvml* nvml = Nvml::machine();
  if (nvml) {
    EXPECT_GE(nvml->device_count(), 1u);
  }
  EXPECT_EQ(Nvml::machine(), nvml) << "loaded once";
}

}  // namespace
}  // namespace acc::launcher
