#include "acc/launcher/host/topology.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace acc::launcher {
namespace {
namespace fs = std::filesystem;

class TopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("acc-topology-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const std::string& path, const std::string& text) {
    const fs::path file = root_ / path;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text << "\n";
  }
  void cpu(int id, int package, int core, const std::string& l3) {
    const std::string dir = "sys/devices/system/cpu/cpu" + std::to_string(id);
    write(dir + "/topology/physical_package_id", std::to_string(package));
    write(dir + "/topology/core_id", std::to_string(core));
    if (!l3.empty()) write(dir + "/cache/index3/shared_cpu_list", l3);
  }
  void pci(const std::string& address, const std::string& vendor, const std::string& pci_class,
           int node) {
    const std::string dir = "sys/bus/pci/devices/" + address;
    write(dir + "/vendor", vendor);
    write(dir + "/class", pci_class);
    write(dir + "/numa_node", std::to_string(node));
  }
  fs::path root_;
};

TEST_F(TopologyTest, ReadsCpusNodesCachesAndNvidiaGpusUnderTheRoot) {
  write("sys/devices/system/cpu/online", "0-3");
  cpu(0, 0, 0, "0-1");
  cpu(1, 0, 1, "0-1");
  cpu(2, 1, 0, "2-3");
  cpu(3, 1, 1, "");
  write("sys/devices/system/node/node0/cpulist", "0-1");
  write("sys/devices/system/node/node1/cpulist", "2-3,8");  // CPU 8 is not online
  write("sys/devices/system/node/possible", "0-1");
  pci("0000:81:00.0", "0x10de", "0x030200", 1);
  pci("0000:01:00.0", "0x10de", "0x030000", -1);  // one node: sysfs says -1
  pci("0000:02:00.0", "0x10de", "0x040300", 0);   // the GPU's audio function: not a GPU
  pci("0000:03:00.0", "0x8086", "0x030000", 1);   // not NVIDIA

  const CpuTopology t = read_cpu_topology(root_.string());
  ASSERT_EQ(t.cpus.size(), 4u);
  EXPECT_EQ(t.cpus[2].package, 1);
  EXPECT_EQ(t.cpus[1].core, 1);
  EXPECT_EQ(t.cpus[1].l3_group, 0);
  EXPECT_EQ(t.cpus[2].l3_group, 2);
  EXPECT_EQ(t.cpus[3].l3_group, -1);
  EXPECT_EQ(t.numa_nodes, (std::map<int, std::vector<int>>{{0, {0, 1}}, {1, {2, 3}}}));
  EXPECT_EQ(t.gpu_numa_nodes, (std::vector<int>{0, 1})) << "in PCI address order";
  EXPECT_TRUE(t.allowed_cpus.empty());
}

TEST_F(TopologyTest, AMissingSysfsGivesAnEmptyTopology) {
  const CpuTopology t = read_cpu_topology(root_.string());
  EXPECT_TRUE(t.cpus.empty());
  EXPECT_TRUE(t.numa_nodes.empty());
  EXPECT_TRUE(t.gpu_numa_nodes.empty());
}

TEST(AllowedCpusTest, ThisProcessMayRunSomewhere) {
  EXPECT_FALSE(allowed_cpus_of_this_process().empty());
}

}  // namespace
}  // namespace acc::launcher
