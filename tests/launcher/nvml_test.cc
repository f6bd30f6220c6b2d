// The NVML client against fake_nvml.cc, a library with NVML's symbols and structures that the
// client loads with dlopen as it loads NVIDIA's: per-process SM utilization, a driver that is not
// loaded, a file that is no NVML.

#include "host/nvml.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "acc/common/error.h"

namespace acc::launcher {
namespace {

const std::string kFake = ACC_FAKE_NVML_LIBRARY;

struct Mode {
  explicit Mode(const char* mode) { ::setenv("ACC_FAKE_NVML", mode, 1); }
  ~Mode() { ::unsetenv("ACC_FAKE_NVML"); }
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
