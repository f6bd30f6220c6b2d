// An operator's verdicts keep a node out of the job (docs/clusters.md, "Keeping a node out"),
// through the real binary: a node that --exclude_nodes_file names (by $ACC_NODE_ID: test nodes
// share one hostname), or whose --node_health_command fails, takes no rank, starts no worker and
// exits --no_restart_exit_code with one line saying why; in an elastic job the other node runs
// without it.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"

namespace acc::testing {
namespace {

std::vector<std::string> one_node(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--nproc_per_node", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return worker(args, {"env"});
}

TEST(NodeVerdictsTest, ANodeTheExclusionFileNamesTakesNoRankAndSaysWhy) {
  TempDir dir;
  const std::string file = dir.file("drain", "# drained by the operator\nnode-b   # bad NIC\n");
  const LaunchRun out =
      run_launcher(one_node({"--exclude_nodes_file", file}), {{"ACC_NODE_ID", "node-b"}});
  EXPECT_EQ(out.exit_code, 93) << out.err;
  EXPECT_EQ(out.out.find("RANK="), std::string::npos) << "a worker ran: " << out.out;
  EXPECT_NE(out.err.find("this node takes no part in the job: --exclude_nodes_file " + file +
                         " names this node (node-b); exit 93"),
            std::string::npos)
      << out.err;
  const LaunchRun in =
      run_launcher(one_node({"--exclude_nodes_file", file}), {{"ACC_NODE_ID", "node-a"}});
  EXPECT_EQ(in.exit_code, 0) << in.err;
  EXPECT_NE(in.out.find("RANK=0"), std::string::npos) << in.out;
  const LaunchRun missing = run_launcher(one_node({"--exclude_nodes_file", dir.path() + "/nope"}));
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_EQ(lines_of(missing.err).size(), 1u) << missing.err;
}

TEST(NodeVerdictsTest, AFailingHealthCommandKeepsTheNodeOutWithItsFirstLine) {
  const LaunchRun out =
      run_launcher(one_node({"--node_health_command", "echo 'GPU 3: uncorrectable ECC'; exit 3"}));
  EXPECT_EQ(out.exit_code, 93) << out.err;
  EXPECT_EQ(out.out.find("RANK="), std::string::npos) << "a worker ran: " << out.out;
  EXPECT_NE(out.err.find("exited 3: GPU 3: uncorrectable ECC"), std::string::npos) << out.err;
  const LaunchRun healthy = run_launcher(one_node({"--node_health_command", "true"}));
  EXPECT_EQ(healthy.exit_code, 0) << healthy.err;
}

// Elastic, 1 to 2 nodes: the excluded node never gets a rank; the other runs alone.
TEST(NodeVerdictsTest, AnElasticJobRunsOnTheNodesTheFileLeavesIn) {
  TempDir dir;
  const std::string file = dir.file("drain", "node-b\n");
  const int port = unused_port();
  const std::vector<std::string> node = {"--nnodes",
                                         "1:2",
                                         "--rdzv_backend",
                                         "c10d",
                                         "--rdzv_endpoint",
                                         "127.0.0.1:" + std::to_string(port),
                                         "--rdzv_conf",
                                         "last_call_timeout=1",
                                         "--exclude_nodes_file",
                                         file};
  const pid_t first =
      start_launcher(worker(node, {"env"}), dir.path(), {{"ACC_NODE_ID", "node-a"}});
  const LaunchRun b = run_launcher(worker(node, {"env"}), {{"ACC_NODE_ID", "node-b"}});
  EXPECT_EQ(b.exit_code, 93) << b.err;
  EXPECT_EQ(b.err.find("rendezvous round"), std::string::npos) << "it took a rank: " << b.err;
  EXPECT_NE(b.err.find("names this node (node-b)"), std::string::npos) << b.err;
  EXPECT_EQ(wait_launcher(first), 0) << read_text(dir.path() + "/launcher.err");
  EXPECT_NE(read_text(dir.path() + "/launcher.out").find("WORLD_SIZE=1"), std::string::npos);
}

}  // namespace
}  // namespace acc::testing
