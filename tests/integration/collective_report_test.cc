// The hang report names the stuck collective, the straggler is named while the job runs, and the
// report shows a rank's DataLoader worker: 4-rank Gloo jobs of real PyTorch scripts
// (pytorch/collective_faults.py, pytorch/straggler.py) under the real binary, recorded by the
// launcher's Python hook into the workers' progress files.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;
using std::chrono::seconds;

const std::string kFaults = std::string(ACC_PYTORCH_DIR) + "/collective_faults.py";
const std::string kStraggler = std::string(ACC_PYTORCH_DIR) + "/straggler.py";

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
  if (!python_has_torch("/usr/bin/python3"))
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
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
  if (!python_has_torch("/usr/bin/python3"))
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
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
  if (!python_has_torch("/usr/bin/python3"))
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
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
  if (!python_has_torch("/usr/bin/python3"))
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
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
  if (!python_has_torch("/usr/bin/python3"))
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed";
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

// A virtual environment whose torch/version.py says `version`, as pip leaves one: enough for the
// launcher, which reads the file and never starts the interpreter on a dry run.
void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string fake_venv(const std::string& dir, const std::string& version) {
  fs::create_directories(dir + "/bin");
  fs::create_directories(dir + "/lib/python3.11/site-packages/torch");
  write_text(dir + "/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n");
  write_text(dir + "/bin/python", "");
  write_text(dir + "/lib/python3.11/site-packages/torch/version.py",
             "from typing import Optional\n__version__ = '" + version + "'\ndebug = False\n");
  return dir + "/bin/python";
}

size_t lines_starting(const std::string& text, const std::string& prefix) {
  size_t n = 0;
  for (const std::string& line : lines_of(text)) n += line.rfind(prefix, 0) == 0;
  return n;
}

// Each worker gets the names its PyTorch reads, and only those: an old name beside a new one
// makes PyTorch >= 2.2 warn "... is deprecated" on every rank. A Python script on a node without
// GPUs gets no Flight Recorder variable (it serves NCCL; PyTorch 2.8+'s Gloo one races at exit).
TEST(CollectiveReportTest, DryRunShowsTheVariablesUnderTheNamesTheWorkersPyTorchReads) {
  const std::string dir = make_temp_dir();
  const LaunchRun v211 = run_launcher({"--dry_run", "--nproc_per_node", "2", "--python",
                                       fake_venv(dir + "/v211", "2.11.0+cu130"), "train.py"});
  EXPECT_EQ(v211.exit_code, 0) << v211.err;
  EXPECT_EQ(lines_starting(v211.out, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1"), 2u) << v211.out;
  for (const char* name :
       {"NCCL_ASYNC_ERROR_HANDLING=", "TORCH_NCCL_TRACE_BUFFER_SIZE=",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=", "TORCH_FR_BUFFER_SIZE=", "TORCH_NCCL_DUMP_ON_TIMEOUT=",
        "TORCH_FR_DUMP_TEMP_FILE=", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE="})
    EXPECT_EQ(lines_starting(v211.out, name), 0u) << name << "\n" << v211.out;

  const LaunchRun v24 =
      run_launcher({"--dry_run", "--python", fake_venv(dir + "/v24", "2.4.1"), "train.py"});
  EXPECT_EQ(lines_starting(v24.out, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1"), 1u) << v24.out;
  for (const char* name :
       {"NCCL_ASYNC_ERROR_HANDLING=", "TORCH_NCCL_TRACE_BUFFER_SIZE=", "TORCH_FR_BUFFER_SIZE="})
    EXPECT_EQ(lines_starting(v24.out, name), 0u) << name << "\n" << v24.out;

  // A program that is no Python script: the launcher cannot tell, every name (libacc keeps the
  // ones its LibTorch reads).
  const LaunchRun native = run_launcher({"--dry_run", "--no_python", "/bin/true"});
  for (const char* line : {"NCCL_ASYNC_ERROR_HANDLING=1", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
                           "TORCH_NCCL_TRACE_BUFFER_SIZE=2000", "TORCH_FR_BUFFER_SIZE=2000"})
    EXPECT_EQ(lines_starting(native.out, line), 1u) << line << "\n" << native.out;

  // The user's own value wins, under either name of its setting.
  const LaunchRun mine =
      run_launcher({"--dry_run", "--python", fake_venv(dir + "/mine", "2.11.0"), "train.py"},
                   {{"TORCH_NCCL_TRACE_BUFFER_SIZE", "10"}, {"NCCL_ASYNC_ERROR_HANDLING", "0"}});
  for (const char* name : {"TORCH_FR_BUFFER_SIZE=", "TORCH_NCCL_TRACE_BUFFER_SIZE=",
                           "TORCH_NCCL_ASYNC_ERROR_HANDLING=", "NCCL_ASYNC_ERROR_HANDLING="})
    EXPECT_EQ(lines_starting(mine.out, name), 0u) << name << "\n" << mine.out;
  fs::remove_all(dir);
}

// Debian's PyTorch 1.13 (/usr/bin/python3) reads the old name of async error handling, and has
// no Flight Recorder.
TEST(CollectiveReportTest, DryRunGivesPyTorch113WorkersTheOldName) {
  if (!fs::exists("/usr/lib/python3/dist-packages/torch/version.py"))
    GTEST_SKIP() << "Debian's python3-torch is not installed";
  const LaunchRun run = run_launcher({"--dry_run", "--python", "/usr/bin/python3", "train.py"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(lines_starting(run.out, "NCCL_ASYNC_ERROR_HANDLING=1"), 1u) << run.out;
  for (const char* name : {"TORCH_NCCL_ASYNC_ERROR_HANDLING=", "TORCH_FR_BUFFER_SIZE=",
                           "TORCH_NCCL_TRACE_BUFFER_SIZE=", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE="})
    EXPECT_EQ(lines_starting(run.out, name), 0u) << name << "\n" << run.out;
}

// At a stall the launcher pokes each rank's dump pipe; PyTorch answers within its heartbeat
// (a second) and writes the dump in place. With --stall_action stop the launcher must wait for
// the whole dump before it stops the workers: here each rank takes 1.5 s to write its dump.
TEST(CollectiveReportTest, AStallStopsTheWorkersOnlyOnceTheirFlightRecorderDumpsAreWhole) {
  const std::string dir = make_temp_dir();
  const LaunchRun run = run_launcher(
      {"--nproc_per_node", "2", "--stall_timeout", "1", "--stall_init_timeout", "1", "--log_dir",
       dir + "/logs", "--no_python", worker_binary(), "flight-recorder", "1500"},
      {}, seconds(60));
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(run.err.find("asked ranks 0, 1 to dump through their pipes"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("  dumps of ranks 0, 1 in "), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("no complete dump"), std::string::npos) << run.err;
  std::string gathered;
  for (const auto& entry : fs::recursive_directory_iterator(dir + "/logs"))
    if (entry.path().filename() == "flight_recorder") gathered = entry.path().string();
  ASSERT_NE(gathered, "") << run.err;
  EXPECT_NE(run.err.find("torchfrtrace " + gathered + " --prefix flight_recorder_rank_\n"),
            std::string::npos)
      << run.err;
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_EQ(
        read_text(gathered + "/flight_recorder_rank_" + std::to_string(rank)),
        "flight recorder of rank " + std::to_string(rank) + ", first half\nsecond half, end\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace acc::testing
