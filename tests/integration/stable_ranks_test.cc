// Stable node ranks in an elastic job (docs/migrating.md, "Node ranks"), through the real binary:
// two launchers meet at a c10d rendezvous on loopback; the one started with --node_rank 0 arrives
// last, after the other has taken the rendezvous store (which asks for rank 0 unless another node
// does), and its worker is RANK 0 in every run, as torchrun's arrival order would not make it.

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"
#include "loopback.h"

namespace acc::testing {
namespace {

std::vector<std::string> elastic_node(int port, int run, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--nnodes",         "2",
                                   "--nproc_per_node", "1",
                                   "--rdzv_backend",   "c10d",
                                   "--rdzv_endpoint",  "127.0.0.1:" + std::to_string(port),
                                   "--rdzv_id",        "stable" + std::to_string(run)};
  args.insert(args.end(), extra.begin(), extra.end());
  return worker(args, {"env"});
}

TEST(StableRanksTest, TheNodeStartedWithNodeRankZeroHoldsRankZeroWhenItArrivesLast) {
  constexpr int kRuns = 20;
  int kept = 0;
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    TempDir dir;
    const int port = unused_port();
    const pid_t first = start_launcher(elastic_node(port, run, {}), dir.path());
    for (int i = 0; i < 200 && !loopback_listens(port); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(loopback_listens(port)) << "the first launcher never served the rendezvous store";
    const LaunchRun last =
        run_launcher(elastic_node(port, run, {"--node_rank", "0"}), {}, std::chrono::seconds(60));
    ASSERT_EQ(last.exit_code, 0) << last.err;
    ASSERT_EQ(wait_launcher(first), 0) << read_text(dir.path() + "/launcher.err");
    const std::string other = read_text(dir.path() + "/launcher.out");
    if (last.out.find("RANK=0\n") != std::string::npos &&
        other.find("RANK=1\n") != std::string::npos)
      ++kept;
    else
      ADD_FAILURE() << "the --node_rank 0 node's worker: " << last.out
                    << "\nthe other's: " << other;
  }
  EXPECT_EQ(kept, kRuns);
}

}  // namespace
}  // namespace acc::testing
