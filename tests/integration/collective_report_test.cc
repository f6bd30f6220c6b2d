// The hang report names the stuck collective, the straggler is named while the job runs, and the
// report shows a rank's DataLoader worker: 4-rank Gloo jobs of real PyTorch scripts
// (pytorch/collective_faults.py, pytorch/straggler.py) under the real binary, recorded by the
// launcher's Python hook into the workers' progress files.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;
using std::chrono::seconds;

const std::string kFaults = std::string(ACC_PYTORCH_DIR) + "/collective_faults.py";
const std::string kStraggler = std::string(ACC_PYTORCH_DIR) + "/straggler.py";

bool python_has_torch() {
  return std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;
}

std::string first_line_with(const std::string& text, const std::string& prefix) {
  for (const std::string& line : lines_of(text))
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

// collective_faults.py FAULT RANK 4 on 4 ranks: the hang, its report, exit 4. The release file
// never comes; its name marks the run's processes. The stall timeout leaves room for Python's
// start on a loaded machine (the report, not the start-up limit, is under test here).
LaunchRun run_fault(const std::string& fault, int rank, const std::string& dir) {
  return run_launcher(
      {"--nproc_per_node", "4", "--python", "/usr/bin/python3", "--stall_timeout", "10",
       "--log_dir", dir + "/logs", kFaults, fault, std::to_string(rank), "4", dir + "/never"},
      {}, seconds(110));
}

TEST(CollectiveReportTest, ARankAsleepBeforeItsFirstAllReduceNeverIssuedIt) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
  const std::string dir = make_temp_dir();
  const LaunchRun run = run_fault("sleep_first", 2, dir);
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(first_line_with(run.err, "acc-launch: hang")
                .find("; stuck collective: rank 2 never issued all_reduce #1 (group default, 4 "
                      "ranks); ranks 0, 1, 3 have waited in it for "),
            std::string::npos)
      << run.err;
  // The waiting ranks' side, at the script's all_reduce line.
  EXPECT_NE(run.err.find("    ranks 0, 1, 3: all_reduce #1 at collective_faults.py:"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("    rank 2: no call in group default yet"), std::string::npos);
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(CollectiveReportTest, ARankThatSkipsAnAllReduceNeverIssuedTheLastOne) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
  const std::string dir = make_temp_dir();
  const LaunchRun run = run_fault("skip", 1, dir);
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(first_line_with(run.err, "acc-launch: hang")
                .find("; stuck collective: rank 1 never issued all_reduce #4 (group default, 4 "
                      "ranks); ranks 0, 2, 3 have waited in it for "),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("    rank 1, its last call in group default: all_reduce #3 at "
                         "collective_faults.py:"),
            std::string::npos)
      << run.err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(CollectiveReportTest, MismatchedCollectivesNameTheRankBothOpsAndTheSequenceNumber) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
  const std::string dir = make_temp_dir();
  const LaunchRun run = run_fault("mismatch", 1, dir);
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(first_line_with(run.err, "acc-launch: hang")
                .find("; stuck collective: rank 1 issued broadcast #3 where ranks 0, 2, 3 issued "
                      "all_reduce #3 (group default, 4 ranks)"),
            std::string::npos)
      << run.err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(CollectiveReportTest, ADataLoaderWorkerAsleepIsShownUnderItsRank) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
  const std::string dir = make_temp_dir();
  const LaunchRun run = run_fault("loader", 3, dir);
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(first_line_with(run.err, "acc-launch: hang").find("rank 3 never issued all_reduce #1"),
            std::string::npos)
      << run.err;
  // The grandchild's line in the table and its own stack, down to the dataset's sleep.
  EXPECT_NE(run.err.find(" (child)\n"), std::string::npos) << run.err;
  const size_t child = run.err.find("\nrank 3, its child pid ");
  ASSERT_NE(child, std::string::npos) << run.err;
  EXPECT_NE(run.err.find("collective_faults.py\", line ", child), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("in __getitem__", child), std::string::npos) << run.err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(CollectiveReportTest, TheSlowRankIsNamedWhileTheJobRunsAndTheJobEndsZero) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
  const std::string dir = make_temp_dir();
  const LaunchRun run =
      run_launcher({"--nproc_per_node", "4", "--python", "/usr/bin/python3", "--straggler_window",
                    "5", "--log_dir", dir + "/logs", kStraggler, "60", "3", "0.3"},
                   {}, seconds(110));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::string line = first_line_with(run.err, "acc-launch: rank 3 is a straggler: ");
  EXPECT_NE(line, "") << run.err;
  EXPECT_NE(line.find(" s of compute per step against a median of "), std::string::npos) << line;
  EXPECT_NE(line.find("; the other ranks wait "), std::string::npos) << line;
  // Named by a window while the job ran, before the end-of-attempt table.
  EXPECT_LT(run.err.find("acc-launch: rank 3 is a straggler"),
            run.err.find("acc-launch: stragglers over the attempt"))
      << run.err;
  EXPECT_NE(run.err.find("  <- straggler\n"), std::string::npos) << run.err;
  fs::remove_all(dir);
}

TEST(CollectiveReportTest, DryRunShowsTheFlightRecorderVariables) {
  const LaunchRun run = run_launcher({"--dry_run", "--nproc_per_node", "2", "train.py"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  for (const char* line :
       {"TORCH_NCCL_TRACE_BUFFER_SIZE=2000\n", "TORCH_FR_BUFFER_SIZE=2000\n",
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1\n",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=<log dir>/flight_recorder_rank_\n",
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE=<log dir>/flight_recorder_pipe_rank_\n"})
    EXPECT_NE(run.out.find(line), std::string::npos) << line << run.out;
  // The user's own value wins.
  const LaunchRun mine =
      run_launcher({"--dry_run", "train.py"}, {{"TORCH_NCCL_TRACE_BUFFER_SIZE", "10"}});
  EXPECT_EQ(mine.out.find("TORCH_NCCL_TRACE_BUFFER_SIZE=2000"), std::string::npos) << mine.out;
}

}  // namespace
}  // namespace acc::testing
