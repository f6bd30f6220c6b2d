// An operator's verdicts keep a node out of the job (docs/clusters.md, "Keeping a node out"),
// through the real binary: a node that --exclude_nodes_file names (by $ACC_NODE_ID: test nodes
// share one hostname), or whose --node_health_command fails, takes no rank, starts no worker and
// exits --no_restart_exit_code with one line saying why; in an elastic job the other node runs
// without it. So does a node whose worker exits SUSPECT of --sdc_exit_codes (docs/errors.md,
// "Silent data corruption"); RESTART restarts the job once without using up --max_restarts.

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"
#include "loopback.h"

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

std::vector<std::string> shell_worker(std::vector<std::string> args, const std::string& script) {
  for (const char* word : {"--no_python", "/bin/sh", "-c"}) args.push_back(word);
  args.push_back(script);
  return args;
}

// Whether something listens on 127.0.0.1:`port` within `limit`.
bool port_listens(int port, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!loopback_listens(port)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST(SdcExitCodesTest, RestartIsNotCountedOnceAndSuspectEndsAStaticJob) {
  const std::vector<std::string> two = {"--nproc_per_node", "2", "--sdc_exit_codes", "16,17"};
  // Exit 16 on the first attempt: one restart, though --max_restarts is 0.
  const LaunchRun once = run_launcher(shell_worker(
      two, "[ $TORCHELASTIC_RESTART_COUNT = 0 ] && [ $RANK = 1 ] && exit 16; echo RANK=$RANK"));
  EXPECT_EQ(once.exit_code, 0) << once.err;
  EXPECT_NE(once.out.find("RANK=1"), std::string::npos) << once.out;
  EXPECT_NE(once.err.find("rank 1 exited with 16: silent data corruption suspected"),
            std::string::npos)
      << once.err;
  EXPECT_NE(once.err.find("which --max_restarts does not count"), std::string::npos) << once.err;
  // Twice in a row: the second counts (none left), and the job ends with the worker's 16.
  const LaunchRun twice = run_launcher(shell_worker(two, "[ $RANK = 1 ] && exit 16; sleep 5"));
  EXPECT_EQ(twice.exit_code, 16) << twice.err;
  // Without --sdc_exit_codes, 16 is an exit like any other.
  const LaunchRun plain = run_launcher(
      shell_worker({"--nproc_per_node", "2"}, "[ $TORCHELASTIC_RESTART_COUNT = 0 ] && exit 16; :"));
  EXPECT_EQ(plain.exit_code, 16) << plain.err;
  // Exit 17 in a static job: it cannot go on without the node, restarts or not.
  std::vector<std::string> restarts = two;
  restarts.insert(restarts.end(), {"--max_restarts", "3"});
  const LaunchRun suspect =
      run_launcher(shell_worker(restarts, "[ $RANK = 1 ] && exit 17; sleep 5"));
  EXPECT_EQ(suspect.exit_code, 93) << suspect.err;
  EXPECT_NE(suspect.err.find("cause     : its result failed validation"), std::string::npos)
      << suspect.err;
  EXPECT_NE(suspect.err.find("the job cannot go on without this node (a static job); exit 93"),
            std::string::npos)
      << suspect.err;
  const LaunchRun bad = run_launcher(shell_worker({"--sdc_exit_codes", "16"}, "true"));
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_EQ(lines_of(bad.err).size(), 1u) << bad.err;
}

// A static job of two nodes counts its RESTART restarts in its store: node 1's 16 on the first
// attempt, then node 0's ordinary failure on the second, with --max_restarts 1: node 0 restarts
// the job (one counted restart), so the third attempt runs and the job succeeds.
TEST(SdcExitCodesTest, AStaticJobsNodesAgreeOnTheRestartsNotCounted) {
  TempDir dir0, dir1;
  const std::string script = R"(case $TORCHELASTIC_RESTART_COUNT.$GROUP_RANK in
  0.1) exit 16 ;;
  1.0) sleep 0.5; exit 1 ;;
  0.0|1.1) sleep 30 ;;
esac
echo NODE=$GROUP_RANK ATTEMPT=$TORCHELASTIC_RESTART_COUNT)";
  const std::string port = std::to_string(unused_port());
  const auto node = [&](const char* rank) {
    return shell_worker({"--nnodes", "2", "--node_rank", rank, "--master_addr", "127.0.0.1",
                         "--master_port", port, "--max_restarts", "1", "--sdc_exit_codes", "16,17"},
                        script);
  };
  const pid_t first = start_launcher(node("0"), dir0.path());
  const pid_t second = start_launcher(node("1"), dir1.path());
  EXPECT_EQ(wait_launcher(first), 0) << read_text(dir0.path() + "/launcher.err");
  EXPECT_EQ(wait_launcher(second), 0) << read_text(dir1.path() + "/launcher.err");
  EXPECT_NE(read_text(dir0.path() + "/launcher.out").find("NODE=0 ATTEMPT=2"), std::string::npos);
  EXPECT_NE(read_text(dir1.path() + "/launcher.out").find("NODE=1 ATTEMPT=2"), std::string::npos);
  EXPECT_NE(read_text(dir0.path() + "/launcher.err").find("restarting (1 of 1)"), std::string::npos)
      << read_text(dir0.path() + "/launcher.err");
}

// Elastic, 2 nodes and a spare: node-b's worker exits 17 once the spare waits; node-b leaves
// with one line and exit 93, and the next round runs on node-a and the spare.
TEST(SdcExitCodesTest, ASuspectNodeOfAnElasticJobIsReplacedByTheSpare) {
  TempDir marks, a_dir, b_dir, c_dir;
  const std::string m = marks.path();
  // $MARKS: started.<node> once a worker runs; spare-waits, b-failed.
  const std::string script = R"(touch $MARKS/started.$ACC_NODE_ID
if [ $ACC_NODE_ID = node-b ] && [ ! -e $MARKS/b-failed ]; then
  while [ ! -e $MARKS/spare-waits ]; do sleep 0.05; done
  touch $MARKS/b-failed; exit 17
fi
[ -e $MARKS/b-failed ] || sleep 30
echo NODE=$ACC_NODE_ID WORLD_SIZE=$WORLD_SIZE)";
  const int port = unused_port();
  const std::vector<std::string> node =
      shell_worker({"--nnodes", "2:2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                    "127.0.0.1:" + std::to_string(port), "--rdzv_conf", "last_call_timeout=1",
                    "--sdc_exit_codes", "16,17"},
                   script);
  const pid_t a = start_launcher(node, a_dir.path(), {{"ACC_NODE_ID", "node-a"}, {"MARKS", m}});
  // node-a first, so that it serves the rendezvous store (a suspect host ends the job instead).
  ASSERT_TRUE(port_listens(port, std::chrono::seconds(30)));
  const pid_t b = start_launcher(node, b_dir.path(), {{"ACC_NODE_ID", "node-b"}, {"MARKS", m}});
  ASSERT_TRUE(wait_for_file(m + "/started.node-a", std::chrono::seconds(30)));
  ASSERT_TRUE(wait_for_file(m + "/started.node-b", std::chrono::seconds(30)));
  const pid_t c = start_launcher(node, c_dir.path(), {{"ACC_NODE_ID", "node-c"}, {"MARKS", m}});
  for (int i = 0;
       i < 100 && read_text(c_dir.path() + "/launcher.err").find("as a spare") == std::string::npos;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(read_text(c_dir.path() + "/launcher.err").find("as a spare"), std::string::npos);
  marks.file("spare-waits", "");
  EXPECT_EQ(wait_launcher(b), 93) << read_text(b_dir.path() + "/launcher.err");
  const std::string b_err = read_text(b_dir.path() + "/launcher.err");
  EXPECT_NE(b_err.find("this node takes no part in the job: rank"), std::string::npos) << b_err;
  EXPECT_NE(b_err.find("exited with 17: its result failed validation"), std::string::npos) << b_err;
  EXPECT_EQ(wait_launcher(a), 0) << read_text(a_dir.path() + "/launcher.err");
  EXPECT_EQ(wait_launcher(c), 0) << read_text(c_dir.path() + "/launcher.err");
  EXPECT_NE(read_text(a_dir.path() + "/launcher.out").find("NODE=node-a WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(read_text(c_dir.path() + "/launcher.out").find("NODE=node-c WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_EQ(read_text(b_dir.path() + "/launcher.out").find("NODE=node-b"), std::string::npos);
}

}  // namespace
}  // namespace acc::testing
