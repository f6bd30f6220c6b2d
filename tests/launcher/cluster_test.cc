#include "acc/launcher/nodes/cluster.h"

#include <gtest/gtest.h>

#include "acc/common/error.h"

namespace acc::launcher {
namespace {

using Strings = std::vector<std::string>;

TEST(ClusterTest, SlurmHostListsExpandAsScontrolDoes) {
  EXPECT_EQ(expand_slurm_hostlist("n[1-2]"), (Strings{"n1", "n2"}));
  EXPECT_EQ(expand_slurm_hostlist("gpu[08-10,7],login1"),
            (Strings{"gpu08", "gpu09", "gpu10", "gpu7", "login1"}));
  EXPECT_EQ(expand_slurm_hostlist("a,b[1,3],c"), (Strings{"a", "b1", "b3", "c"}));
  EXPECT_THROW(expand_slurm_hostlist("n[1-"), ConfigError);
  EXPECT_THROW(expand_slurm_hostlist("n[3-1]"), ConfigError);
  // Found by the slurm_nodelist fuzzer: millions of names, or a range that ends at INT_MAX.
  EXPECT_THROW(expand_slurm_hostlist("[1-24444335,]"), ConfigError);
  EXPECT_EQ(expand_slurm_hostlist("n[0-65535]").size(), 65536u);  // far more nodes than any job
  EXPECT_THROW(expand_slurm_hostlist("n[0-65536]"), ConfigError);
  EXPECT_EQ(expand_slurm_hostlist("n[2147483646-2147483647]"),
            (Strings{"n2147483646", "n2147483647"}));
}

TEST(ClusterTest, AnSrunStepGivesNodesRankAddressPortAndWorkers) {
  std::map<std::string, std::string> env = {{"SLURM_JOB_ID", "4711"},
                                            {"SLURM_STEP_ID", "0"},
                                            {"SLURM_STEP_NUM_NODES", "2"},
                                            {"SLURM_NNODES", "4"},
                                            {"SLURM_NODEID", "1"},
                                            {"SLURM_STEP_NODELIST", "gpu[3-4]"},
                                            {"SLURM_JOB_NODELIST", "gpu[1-4]"},
                                            {"SLURM_GPUS_ON_NODE", "8"},
                                            {"SLURM_CPUS_ON_NODE", "64"}};
  ClusterFacts facts = detect_cluster(env);
  EXPECT_EQ(facts.scheduler, "slurm");
  EXPECT_EQ(facts.nnodes, "2") << "the step's nodes, not the job's";
  EXPECT_EQ(facts.node_rank, 1);
  EXPECT_EQ(facts.master_addr, "gpu3");
  EXPECT_EQ(facts.master_port, port_for_job("4711"));
  EXPECT_EQ(facts.rdzv_id, "4711");
  EXPECT_EQ(facts.nproc_per_node, "8") << "one worker per GPU";
  env.erase("SLURM_GPUS_ON_NODE");
  EXPECT_EQ(detect_cluster(env).nproc_per_node, "64") << "else one per CPU";
}

TEST(ClusterTest, ABatchScriptOutsideAnSrunStepIsNotAMultiNodeLaunch) {
  std::map<std::string, std::string> env = {
      {"SLURM_JOB_ID", "4711"}, {"SLURM_NODEID", "0"}, {"SLURM_NNODES", "4"}};
  EXPECT_EQ(detect_cluster(env).scheduler, "");
}

TEST(ClusterTest, EveryNodeDerivesTheSamePortInRange) {
  EXPECT_EQ(port_for_job("123"), port_for_job("123"));
  EXPECT_NE(port_for_job("123"), port_for_job("124"));
  for (const char* job : {"1", "99999", "abc"}) {
    EXPECT_GE(port_for_job(job), 20000);
    EXPECT_LT(port_for_job(job), 29000);
  }
}

TEST(ClusterTest, MpirunRanksAreNodes) {
  ClusterFacts facts = detect_cluster(
      {{"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"MASTER_ADDR", "head"}});
  EXPECT_EQ(facts.scheduler, "mpi");
  EXPECT_EQ(facts.nnodes, "3");
  EXPECT_EQ(facts.node_rank, 2);
  EXPECT_EQ(facts.master_addr, "head");
}

TEST(ClusterTest, KubeflowPyTorchJobNamesTheMasterAndTheReplica) {
  // Exactly what the training-operator injects into replica 1 of a job "mnist".
  ClusterFacts facts = detect_cluster({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                       {"MASTER_ADDR", "mnist-master-0"},
                                       {"MASTER_PORT", "23456"},
                                       {"WORLD_SIZE", "3"},
                                       {"RANK", "1"},
                                       {"PYTHONUNBUFFERED", "1"}});
  EXPECT_EQ(facts.scheduler, "kubernetes");
  EXPECT_EQ(facts.master_addr, "mnist-master-0");
  EXPECT_EQ(facts.master_port, 23456);
  EXPECT_EQ(facts.node_rank, 1);
}

TEST(ClusterTest, SkyPilotNamesNodesRankTheFirstIpPortAndGpus) {
  // What SkyPilot gives the run section of node 1 of a 2-node task on GPUs, inside a pod.
  std::map<std::string, std::string> env = {
      {"SKYPILOT_NODE_RANK", "1"},
      {"SKYPILOT_NODE_IPS", "10.0.0.7\n10.0.0.9\n"},
      {"SKYPILOT_NUM_NODES", "2"},
      {"SKYPILOT_NUM_GPUS_PER_NODE", "8"},
      {"SKYPILOT_TASK_ID", "sky-2026-12-07-01-02-03-456789_mycluster_3"},
      {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}};
  ClusterFacts facts = detect_cluster(env);
  EXPECT_EQ(facts.scheduler, "skypilot");
  EXPECT_EQ(facts.nnodes, "2");
  EXPECT_EQ(facts.node_rank, 1);
  EXPECT_EQ(facts.master_addr, "10.0.0.7");
  EXPECT_EQ(facts.master_port, port_for_job(env["SKYPILOT_TASK_ID"]));
  EXPECT_EQ(facts.rdzv_id, env["SKYPILOT_TASK_ID"]);
  EXPECT_EQ(facts.nproc_per_node, "8");
  env.erase("SKYPILOT_NUM_NODES");
  env["SKYPILOT_NUM_GPUS_PER_NODE"] = "0";
  facts = detect_cluster(env);
  EXPECT_EQ(facts.nnodes, "2") << "counted from the node IPs";
  EXPECT_FALSE(facts.nproc_per_node) << "a CPU cluster keeps the default";
}

TEST(ClusterTest, HostfilesReadSlotsAndFilters) {
  auto hosts = parse_hostfile("# cluster\nw1 slots=4\nw2 slots=4  # spare\n\nw3 slots=4\n", "hf");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[1].host, "w2");
  EXPECT_EQ(hosts[1].slots, 4);
  auto kept = select_hosts(hosts, "", "w1");
  ClusterFacts facts = hostfile_facts(kept, "w3", std::nullopt);
  EXPECT_EQ(facts.nnodes, "2");
  EXPECT_EQ(facts.node_rank, 1);
  EXPECT_EQ(facts.master_addr, "w2");
  EXPECT_EQ(facts.nproc_per_node, "4");
  EXPECT_FALSE(facts.gpu_ids);  // the whole host: its own CUDA_VISIBLE_DEVICES
  EXPECT_THROW(parse_hostfile("w1 slots=x\n", "hf"), ConfigError);
  EXPECT_THROW(hostfile_facts(kept, "elsewhere", std::nullopt), ConfigError);
  EXPECT_THROW(select_hosts(hosts, "nope", ""), ConfigError);
}

// One node of a hostfile job started by hand: the slots --include picks are its GPUs, as the
// fan-out gives them to each node it starts.
TEST(ClusterTest, PickedSlotsOfAHostfileBecomeThisNodesGpus) {
  auto hosts = parse_hostfile("w1 slots=4\nw2 slots=4\n", "hf");
  ClusterFacts facts = hostfile_facts(select_hosts(hosts, "w1:0,2@w2:1,3", ""), "w2", std::nullopt);
  EXPECT_EQ(facts.node_rank, 1);
  EXPECT_EQ(facts.nproc_per_node, "2");
  EXPECT_EQ(facts.gpu_ids, "1,3");
  LaunchOptions options;
  apply_proposals(scheduler_proposals(facts), options);
  EXPECT_EQ(options.gpu_ids, "1,3");
  EXPECT_EQ(options.source_of("gpu_ids"), Source::kScheduler);
}

TEST(ClusterTest, AnExplicitFlagWinsOverTheScheduler) {
  LaunchOptions options;
  options.nnodes = "1";
  options.sources["nnodes"] = Source::kCommandLine;
  ClusterFacts facts;
  facts.nnodes = "4";
  facts.node_rank = 3;
  apply_proposals(scheduler_proposals(facts), options);
  EXPECT_EQ(options.nnodes, "1");
  EXPECT_EQ(options.source_of("nnodes"), Source::kCommandLine);
  EXPECT_EQ(options.node_rank, 3);
  EXPECT_EQ(options.source_of("node_rank"), Source::kScheduler);
}

}  // namespace
}  // namespace acc::launcher
