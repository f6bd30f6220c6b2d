// detect_host() against fake /proc and /sys trees (the host-facts seam), and PyTorch's rules for
// the device visibility variables.

#include "acc/launcher/host/host.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace acc::launcher {
namespace {
namespace fs = std::filesystem;

class FakeRoot {
 public:
  FakeRoot() {
    std::string pattern = (fs::temp_directory_path() / "acc-host-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~FakeRoot() { fs::remove_all(path_); }
  void file(const std::string& name, const std::string& text) const {
    fs::create_directories(fs::path(path_ + "/" + name).parent_path());
    std::ofstream(path_ + "/" + name) << text;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Sets a variable for one test and puts the old value back.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedVariable() { old_.empty() ? ::unsetenv(name_) : ::setenv(name_, old_.c_str(), 1); }

 private:
  const char* name_;
  std::string old_;
};

const std::vector<std::vector<std::string>> kFour = {
    {"0", "GPU-1111-aa"}, {"1", "GPU-2222-bb"}, {"2", "GPU-2223-cc"}, {"3", "GPU-4444-dd"}};

TEST(CountVisibleTest, ReadsIndicesUpToTheFirstThatNamesNoDevice) {
  EXPECT_EQ(count_visible(kFour, "0,1,2,3"), 4);
  EXPECT_EQ(count_visible(kFour, "3, 1"), 2);
  EXPECT_EQ(count_visible(kFour, "1,9,2"), 1);   // 9 is out of range: the list stops there
  EXPECT_EQ(count_visible(kFour, "2,-1,3"), 1);  // so does a negative entry
  EXPECT_EQ(count_visible(kFour, "1abc,2"), 2);  // leading digits, as strtoul
  EXPECT_EQ(count_visible(kFour, "x"), 0);
}

TEST(CountVisibleTest, AnEmptyValueOrARepeatedDeviceHidesThemAll) {
  EXPECT_EQ(count_visible(kFour, ""), 0);
  EXPECT_EQ(count_visible(kFour, "0,1,0"), 0);
  EXPECT_EQ(count_visible(kFour, "GPU-1111,GPU-1111"), 0);
}

TEST(CountVisibleTest, MatchesUuidPrefixesAndRefusesAmbiguousOnes) {
  EXPECT_EQ(count_visible(kFour, "GPU-4444-dd,GPU-1111"), 2);
  EXPECT_EQ(count_visible(kFour, "GPU-1111,GPU-9999,GPU-4444"), 1);
  EXPECT_EQ(count_visible(kFour, "GPU-222"), 0);  // two devices start so: PyTorch sees none
  EXPECT_EQ(count_visible(kFour, "GPU-1111,0"), 1);
}

TEST(DetectHostTest, ReadsCpusMemoryAndNvidiaGpusUnderTheRoot) {
  FakeRoot root;
  root.file("proc/cpuinfo",
            "processor\t: 0\nphysical id\t: 0\ncore id\t: 0\n\nprocessor\t: 1\nphysical id\t: "
            "0\ncore id\t: 0\n\nprocessor\t: 2\nphysical id\t: 1\ncore id\t: 0\n\nprocessor\t: "
            "3\nphysical id\t: 1\ncore id\t: 0\n");
  root.file("sys/devices/system/cpu/online", "0-3\n");
  root.file("proc/meminfo", "MemTotal:       16777216 kB\nMemFree: 1 kB\n");
  root.file("proc/driver/nvidia/gpus/0000:17:00.0/information",
            "Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t GPU-1111-aa\n");
  root.file("proc/driver/nvidia/gpus/0000:65:00.0/information",
            "Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t GPU-2222-bb\n");
  ScopedVariable cuda("CUDA_VISIBLE_DEVICES", nullptr);
  const HostInfo host = detect_host(root.path());
  EXPECT_EQ(host.cpu_count.get(), 4);
  EXPECT_EQ(host.physical_cores.get(), 2);
  EXPECT_DOUBLE_EQ(host.memory_gb.get(), 16.0);
  EXPECT_EQ(host.gpu_vendor, "nvidia");
  EXPECT_EQ(host.gpu_count, 2);
  EXPECT_EQ(host.gpu_names.at(1), "NVIDIA H100 80GB HBM3");
  EXPECT_FALSE(host.cwd.empty());
  {
    ScopedVariable one("CUDA_VISIBLE_DEVICES", "GPU-2222");
    EXPECT_EQ(detect_host(root.path()).gpu_count, 1);
  }
}

TEST(DetectHostTest, CountsNvidiaDeviceNodesButNotTheControlNodesWithoutTheDriverEntries) {
  FakeRoot root;
  root.file("proc/cpuinfo", "processor\t: 0\n");
  root.file("proc/meminfo", "MemTotal:       1024 kB\n");
  for (const char* node : {"nvidia0", "nvidia1", "nvidia10", "nvidiactl", "nvidia-uvm", "nvidia",
                           "nvidia-caps", "nvidia2x"})
    root.file(std::string("dev/") + node, "");
  ScopedVariable cuda("CUDA_VISIBLE_DEVICES", nullptr);
  const HostInfo host = detect_host(root.path());
  EXPECT_EQ(host.gpu_vendor, "nvidia");
  EXPECT_EQ(host.gpu_count, 3);
}

TEST(DetectHostTest, NvidiaDeviceNodesWithoutTheControlNodeAreNoGpus) {
  FakeRoot root;
  root.file("proc/cpuinfo", "processor\t: 0\n");
  root.file("proc/meminfo", "MemTotal:       1024 kB\n");
  for (const char* node : {"nvidia0", "nvidia1"}) root.file(std::string("dev/") + node, "");
  ScopedVariable cuda("CUDA_VISIBLE_DEVICES", nullptr);
  const HostInfo host = detect_host(root.path());
  EXPECT_EQ(host.gpu_vendor, "");
  EXPECT_EQ(host.gpu_count, 0);
}

TEST(DetectHostTest, ReadsTheCpuTopologyOnlyWhenAskedAndThenFromItsRoot) {
  FakeRoot root;
  root.file("proc/cpuinfo", "processor\t: 0\n");
  root.file("proc/meminfo", "MemTotal:       1024 kB\n");
  const HostInfo host = detect_host(root.path());
  EXPECT_TRUE(host.topology.cpus.empty());  // nothing read yet
  // Written after detect_host: the files are read at the asking.
  root.file("sys/devices/system/cpu/online", "0-1\n");
  root.file("sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n");
  root.file("sys/devices/system/cpu/cpu0/topology/core_id", "0\n");
  root.file("sys/devices/system/cpu/cpu1/topology/physical_package_id", "0\n");
  root.file("sys/devices/system/cpu/cpu1/topology/core_id", "1\n");
  root.file("sys/devices/system/node/node0/cpulist", "0-1\n");
  const CpuTopology topology = host.cpu_topology();
  ASSERT_EQ(topology.cpus.size(), 2u);
  EXPECT_EQ(topology.numa_nodes.at(0), (std::vector<int>{0, 1}));
}

TEST(DetectHostTest, ReadsTheCpusAndTheMemoryOnlyWhenAsked) {
  FakeRoot root;
  const HostInfo host = detect_host(root.path());
  // Written after detect_host: a launch that never asks never reads /proc/cpuinfo or meminfo.
  root.file("proc/cpuinfo",
            "processor\t: 0\nphysical id\t: 0\ncore id\t: 0\n\nprocessor\t: 1\nphysical id\t: "
            "0\ncore id\t: 1\n");
  root.file("sys/devices/system/cpu/online", "0-1\n");
  root.file("proc/meminfo", "MemTotal:       2097152 kB\n");
  EXPECT_EQ(host.cpu_count.get(), 2);
  EXPECT_EQ(host.physical_cores.get(), 2);
  EXPECT_DOUBLE_EQ(host.memory_gb.get(), 2.0);
  // Read once: a later change is not seen.
  root.file("sys/devices/system/cpu/online", "0-3\n");
  EXPECT_EQ(host.cpu_count.get(), 2);
}

TEST(DetectHostTest, CountsAmdGpusFromTheKfdTopologyWithTheRocmVariables) {
  FakeRoot root;
  root.file("dev/kfd", "");
  root.file("sys/class/kfd/kfd/topology/nodes/0/properties", "cpu_cores_count 64\nsimd_count 0\n");
  for (int node = 1; node <= 4; ++node)
    root.file("sys/class/kfd/kfd/topology/nodes/" + std::to_string(node) + "/properties",
              "simd_count 304\nunique_id " + std::to_string(1000 + node) + "\n");
  ScopedVariable hip("HIP_VISIBLE_DEVICES", nullptr);
  ScopedVariable rocr("ROCR_VISIBLE_DEVICES", nullptr);
  ScopedVariable cuda("CUDA_VISIBLE_DEVICES", nullptr);
  HostInfo host = detect_host(root.path());
  EXPECT_EQ(host.gpu_vendor, "amd");
  EXPECT_EQ(host.gpu_count, 4);  // the CPU node (no SIMD units) is not a GPU
  {
    ScopedVariable only("ROCR_VISIBLE_DEVICES", "0,1,2");
    ScopedVariable then("HIP_VISIBLE_DEVICES", "2,0");
    EXPECT_EQ(detect_host(root.path()).gpu_count, 2);
  }
  root.file("proc/driver/nvidia/gpus/0000:01:00.0/information", "Model: X\n");
  EXPECT_EQ(detect_host(root.path()).gpu_vendor, "nvidia");  // NVIDIA first, as PyTorch's CUDA
}

TEST(DetectHostTest, CountsIntelGpusDrivenByXeOrI915) {
  FakeRoot root;
  for (const char* node : {"renderD128", "renderD129", "renderD130"}) {
    root.file(std::string("sys/class/drm/") + node + "/device/vendor",
              std::string(node) == "renderD130" ? "0x1002\n" : "0x8086\n");
    fs::create_directories(root.path() + "/drivers/xe");
    fs::create_symlink(root.path() + "/drivers/xe",
                       root.path() + "/sys/class/drm/" + node + "/device/driver");
  }
  ScopedVariable mask("ZE_AFFINITY_MASK", nullptr);
  const HostInfo host = detect_host(root.path());
  EXPECT_EQ(host.gpu_vendor, "intel");
  EXPECT_EQ(host.gpu_count, 2);  // renderD130 is not Intel's
  ScopedVariable one("ZE_AFFINITY_MASK", "1");
  EXPECT_EQ(detect_host(root.path()).gpu_count, 1);
}

TEST(DetectHostTest, AnEmptyRootMeansNoGpusAndStillSomeCpus) {
  FakeRoot root;
  const HostInfo host = detect_host(root.path());
  EXPECT_EQ(host.gpu_count, 0);
  EXPECT_EQ(host.gpu_vendor, "");
  EXPECT_GE(host.cpu_count.get(), 1);
}

}  // namespace
}  // namespace acc::launcher
