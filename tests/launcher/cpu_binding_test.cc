#include "acc/launcher/host/cpu_binding.h"

#include <gtest/gtest.h>

#include "acc/common/error.h"
#include "acc/common/int_ranges.h"
#include "plan/cpu_binding_choice.h"

namespace acc::launcher {
namespace {

// A machine numbered as Linux numbers x86 ones: the first thread of every core, then the second.
// `ccx_per_node` L3 groups split each node's cores evenly.
CpuTopology machine(int sockets, int nodes_per_socket, int cores_per_node, int threads,
                    std::vector<int> gpu_nodes = {}, int ccx_per_node = 1) {
  CpuTopology t;
  const int cores = sockets * nodes_per_socket * cores_per_node;
  const int cores_per_ccx = cores_per_node / ccx_per_node;
  for (int thread = 0; thread < threads; ++thread) {
    for (int core = 0; core < cores; ++core) {
      const int id = thread * cores + core;
      const int node = core / cores_per_node;
      t.cpus.push_back({id, node / nodes_per_socket, core, core / cores_per_ccx * cores_per_ccx});
      t.numa_nodes[node].push_back(id);
    }
  }
  std::sort(t.cpus.begin(), t.cpus.end(),
            [](const CpuInfo& a, const CpuInfo& b) { return a.id < b.id; });
  t.gpu_numa_nodes = std::move(gpu_nodes);
  return t;
}

std::vector<std::string> plan(const CpuTopology& t, CpuBindingMode mode, int ranks,
                              std::vector<int> core_list = {}) {
  std::vector<std::string> sets;
  for (const auto& cpus : plan_cpu_binding(t, {mode, "--flag", std::move(core_list)}, ranks))
    sets.push_back(format_int_ranges(cpus));
  return sets;
}

using V = std::vector<std::string>;

TEST(CpuBindingTest, NodeGivesEveryCpuOfTheGpusNumaNode) {
  const CpuTopology t = machine(2, 1, 4, 2, {0, 0, 1, 1});
  EXPECT_EQ(plan(t, CpuBindingMode::kNode, 4),
            (V{"0-3,8-11", "0-3,8-11", "4-7,12-15", "4-7,12-15"}));
}

TEST(CpuBindingTest, TheGpuNotTheRankPicksTheNode) {
  const CpuTopology t = machine(2, 1, 2, 1, {1, 0});
  EXPECT_EQ(plan(t, CpuBindingMode::kNode, 2), (V{"2-3", "0-1"}));
}

TEST(CpuBindingTest, SocketGivesEveryNodeOfTheGpusSocket) {
  const CpuTopology t = machine(2, 2, 2, 1, {1, 2});
  EXPECT_EQ(plan(t, CpuBindingMode::kSocket, 2), (V{"0-3", "4-7"}));
}

TEST(CpuBindingTest, ExclusiveSplitsWholeCoresAndTheFirstRanksGetTheRest) {
  const CpuTopology t = machine(1, 1, 5, 2, {0, 0});
  EXPECT_EQ(plan(t, CpuBindingMode::kExclusive, 2), (V{"0-2,5-7", "3-4,8-9"}));
}

TEST(CpuBindingTest, ExclusiveSplitsPerNodeAmongTheGpusOnIt) {
  const CpuTopology t = machine(2, 1, 4, 1, {0, 1, 0, 1});
  EXPECT_EQ(plan(t, CpuBindingMode::kExclusive, 4), (V{"0-1", "4-5", "2-3", "6-7"}));
}

TEST(CpuBindingTest, ExclusiveWithMoreWorkersThanCoresIsOneClearError) {
  const CpuTopology t = machine(1, 1, 2, 2, {0, 0, 0});
  try {
    plan_cpu_binding(t, {CpuBindingMode::kExclusive, "--numa-binding exclusive", {}}, 3);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "--numa-binding exclusive: NUMA node 0 has 2 physical core(s) that acc-launch may "
                 "use for 3 workers; use --numa-binding node or fewer workers");
  }
}

TEST(CpuBindingTest, CoreComplexTakesTheLargestL3GroupFirstThenTurns) {
  CpuTopology t = machine(1, 1, 8, 1, {0, 0, 0}, 2);
  t.allowed_cpus = {1, 2, 3, 4, 5, 6, 7};  // CPU 0 taken away: the second group is larger
  EXPECT_EQ(plan(t, CpuBindingMode::kCoreComplex, 3), (V{"4-7", "1-3", "4-7"}));
}

TEST(CpuBindingTest, CoreListIsSplitEvenlyAndTheRestLeftUnused) {
  const CpuTopology t = machine(2, 1, 8, 2);
  EXPECT_EQ(plan(t, CpuBindingMode::kCoreList, 4, *parse_int_ranges("0-7,16-23")),
            (V{"0-3", "4-7", "16-19", "20-23"}));
  EXPECT_EQ(plan(t, CpuBindingMode::kCoreList, 3, *parse_int_ranges("0-7")),
            (V{"0-1", "2-3", "4-5"}));
}

TEST(CpuBindingTest, WithoutACoreListOneCpuOfEachPhysicalCoreIsSplit) {
  const CpuTopology t = machine(1, 1, 8, 2);
  EXPECT_EQ(plan(t, CpuBindingMode::kCoreList, 2), (V{"0-3", "4-7"}));
}

TEST(CpuBindingTest, ACoreListNamingACpuThatCannotBeUsedIsOneClearError) {
  CpuTopology t = machine(1, 1, 4, 1);
  t.allowed_cpus = {0, 1};
  EXPECT_THROW(plan(t, CpuBindingMode::kCoreList, 2, {0, 1, 2, 3}), ConfigError);
  EXPECT_THROW(plan(t, CpuBindingMode::kCoreList, 3, {0, 1}), ConfigError);
}

TEST(CpuBindingTest, OnlyCpusTheLauncherMayUseAreHandedOut) {
  CpuTopology t;
  for (int id = 0; id < 4; ++id) t.cpus.push_back({id, id % 2, id / 2, -1});
  t.numa_nodes = {{0, {0, 2}}, {1, {1, 3}}};
  t.gpu_numa_nodes = {0, 1};
  t.allowed_cpus = {0, 1};
  EXPECT_EQ(plan(t, CpuBindingMode::kNode, 2), (V{"0", "1"}));
}

TEST(CpuBindingTest, WithoutGpusTheWorkersAreSpreadOverTheNodesInBlocks) {
  const CpuTopology t = machine(2, 1, 4, 1);
  EXPECT_EQ(plan(t, CpuBindingMode::kNode, 4), (V{"0-3", "0-3", "4-7", "4-7"}));
  EXPECT_EQ(plan(t, CpuBindingMode::kExclusive, 4), (V{"0-1", "2-3", "4-5", "6-7"}));
}

TEST(CpuBindingTest, AMachineWithoutSysfsSplitsTheAllowedCpus) {
  CpuTopology t;
  t.allowed_cpus = {0, 1, 2, 3};
  EXPECT_EQ(plan(t, CpuBindingMode::kExclusive, 2), (V{"0-1", "2-3"}));
}

TEST(CpuBindingTest, NoBindingPlansNothing) {
  EXPECT_TRUE(plan(machine(1, 1, 4, 1), CpuBindingMode::kNone, 4).empty());
}

TEST(CpuBindingTest, TheFlagsChooseTheBinding) {
  LaunchOptions o;
  EXPECT_EQ(choose_cpu_binding(o).mode, CpuBindingMode::kNone);
  o.numa_binding = "core-complex";
  EXPECT_EQ(choose_cpu_binding(o).mode, CpuBindingMode::kCoreComplex);
  o.extra_env = {{"ACCELERATE_CPU_AFFINITY", "1"}};  // a config file gives way to the flag
  EXPECT_EQ(choose_cpu_binding(o).mode, CpuBindingMode::kCoreComplex);
  o.numa_binding.clear();
  EXPECT_EQ(choose_cpu_binding(o).mode, CpuBindingMode::kNode);
  o.bind_core_list = "0-3";
  const CpuBindingChoice list = choose_cpu_binding(o);
  EXPECT_EQ(list.mode, CpuBindingMode::kCoreList);
  EXPECT_EQ(list.core_list, (std::vector<int>{0, 1, 2, 3}));
}

TEST(CpuBindingTest, TwoBindingFlagsOrABadListAreOneClearError) {
  LaunchOptions o;
  o.numa_binding = "node";
  o.bind_cores_to_rank = true;
  try {
    choose_cpu_binding(o);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(
        e.what(),
        "--numa-binding node and --bind_cores_to_rank both bind the workers' CPUs; give one");
  }
  LaunchOptions bad;
  bad.bind_core_list = "0-x";
  EXPECT_THROW(choose_cpu_binding(bad), ConfigError);
}

TEST(CpuBindingTest, CudaVisibleDevicesPicksWhichGpuEachRankHas) {
  const CpuTopology t = machine(2, 1, 2, 1, {0, 0, 1, 1});
  EXPECT_EQ(with_visible_gpus(t, "2,0").gpu_numa_nodes, (std::vector<int>{1, 0}));
  EXPECT_EQ(with_visible_gpus(t, "GPU-5d1c,GPU-77aa").gpu_numa_nodes, t.gpu_numa_nodes);
  LaunchOptions o;
  o.numa_binding = "node";
  HostInfo host;
  host.topology = t;
  host.environment["CUDA_VISIBLE_DEVICES"] = "3";
  EXPECT_EQ(resolve_cpu_binding(choose_cpu_binding(o), host, "3", 1),
            (std::vector<std::vector<int>>{{2, 3}}));
  EXPECT_EQ(resolve_cpu_binding(choose_cpu_binding(o), host, "0", 1),
            (std::vector<std::vector<int>>{{0, 1}}));
}

TEST(CpuBindingTest, EnableCpuAffinityBindsEachWorkerToItsGpusNode) {
  LaunchOptions o;
  o.enable_cpu_affinity = true;
  HostInfo host;
  host.topology = machine(1, 1, 2, 1, {0, 0});
  EXPECT_EQ(resolve_cpu_binding(choose_cpu_binding(o), host, "", 2),
            (std::vector<std::vector<int>>{{0, 1}, {0, 1}}));
}

}  // namespace
}  // namespace acc::launcher
