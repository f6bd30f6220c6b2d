// The launcher's Python hook records every torch.distributed call of an unmodified script into
// the worker's progress file: a real 2-rank Gloo job under PyTorch 1.13 and 2.x, its files read
// with the C++ Reader, as the stall watch and the hang report read them.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "acc/common/progress_file.h"
#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;

const std::string kScript = std::string(ACC_PYTORCH_DIR) + "/collectives.py";

// "collectives.py:N" for the script's line that ends in "# <marker>".
std::string line_of(const std::string& marker) {
  const std::vector<std::string> lines = lines_of(read_text(kScript));
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].ends_with("# " + marker)) return "collectives.py:" + std::to_string(i + 1);
  ADD_FAILURE() << "no line ends in # " << marker;
  return "";
}

std::vector<std::string> progress_files(const std::string& log_dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(log_dir))
    if (entry.path().filename() == "progress") files.push_back(entry.path());
  std::sort(files.begin(), files.end());  // .../attempt_0/0/progress, .../attempt_0/1/progress
  return files;
}

class PythonRecorderTest : public ::testing::TestWithParam<TorchPython> {};

TEST_P(PythonRecorderTest, EveryCallOfTheWorkerItselfIsInTheRanksProgressFile) {
  const std::string python = GetParam().python;
  if (!python_has_torch(python)) GTEST_SKIP() << "'" << python << "' cannot import torch";
  const std::string dir = make_temp_dir();
  LaunchRun run = run_launcher(
      {"--nproc_per_node", "2", "--python", python, "--log_dir", dir + "/logs", kScript}, {},
      std::chrono::seconds(200));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> files = progress_files(dir + "/logs");
  ASSERT_EQ(files.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const progress_file::Snapshot s = progress_file::Reader(files[rank]).snapshot();
    EXPECT_GT(s.writer_pid, 0);
    // init_process_group's return moves the progress time but is no beat (no work done yet);
    // the children write nothing.
    EXPECT_EQ(s.beats, 0u);
    ASSERT_EQ(s.calls.size(), 6u);
    EXPECT_EQ(s.started, 6u);
    EXPECT_EQ(s.completed, 6u);
    EXPECT_GT(s.in_collective_ns, 0);
    struct Expected {
      std::uint64_t seq;
      std::string group, op, dtype, where;
      std::uint64_t numel;
      int peer;
    };
    const std::string p2p = rank == 0 ? "send" : "recv";
    const std::vector<Expected> expected = {
        {1, "default", "all_reduce", "float32", line_of("all_reduce"), 10, -1},
        {2, "default", "broadcast", "float32", line_of("broadcast"), 10, -1},
        {3, "default", "barrier", "", line_of("barrier"), 0, -1},
        // Point-to-point calls are numbered per peer: rank 0's first send to 1 is rank 1's
        // first receive from 0.
        {1, "default", p2p, "int64", line_of(p2p), 3, 1 - rank},
        {4, "default", "all_reduce", "float32", line_of("async all_reduce"), 10, -1},
        // A call in another group is numbered from 1 there (new_group waits through the store,
        // not through a collective).
        {1, "1", "all_gather", "float32", line_of("all_gather"), 12, -1},
    };
    for (size_t i = 0; i < expected.size(); ++i) {
      const progress_file::Call& c = s.calls[i];
      const Expected& e = expected[i];
      SCOPED_TRACE("call " + std::to_string(i) + ": " + c.op + " #" + std::to_string(c.seq));
      EXPECT_EQ(c.seq, e.seq);
      EXPECT_EQ(c.group, e.group);
      EXPECT_EQ(c.op, e.op);
      EXPECT_EQ(c.dtype, e.dtype);
      if (!e.where.empty()) {
        EXPECT_EQ(c.where, e.where);
      }
      EXPECT_EQ(c.numel, e.numel);
      EXPECT_EQ(c.peer, e.peer);
      EXPECT_EQ(c.group_size, 2);
      EXPECT_FALSE(c.in_flight());
      EXPECT_GE(c.end_ns, c.start_ns);
    }
  }
  fs::remove_all(dir);
}

// DDP's gradient all_reduces run in its C++ Reducer, past every wrapped call: they are counted
// from DDP's own timing, one finished record per synced backward (`top`'s collective share).
TEST_P(PythonRecorderTest, DdpGradientAllReducesCountInTheRanksTimeInCollectives) {
  const std::string python = GetParam().python;
  if (!python_has_torch(python)) GTEST_SKIP() << "'" << python << "' cannot import torch";
  const std::string dir = make_temp_dir();
  const std::string script = std::string(ACC_PYTORCH_DIR) + "/ddp_steps.py";
  LaunchRun run = run_launcher(
      {"--nproc_per_node", "2", "--python", python, "--log_dir", dir + "/logs", script}, {},
      std::chrono::seconds(200));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string forward = [&] {
    const std::vector<std::string> lines = lines_of(read_text(script));
    for (size_t i = 0; i < lines.size(); ++i)
      if (lines[i].ends_with("# forward")) return "ddp_steps.py:" + std::to_string(i + 1);
    return std::string();
  }();
  const std::vector<std::string> files = progress_files(dir + "/logs");
  ASSERT_EQ(files.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const progress_file::Snapshot s = progress_file::Reader(files[rank]).snapshot();
    // Six synced backwards; the forwards of steps 2-5 and 7 publish steps 1-5 (step 6 ran under
    // no_sync, the last backward has no forward after it, the no_grad forward publishes none).
    ASSERT_EQ(s.calls.size(), 5u);
    std::int64_t timed = 0;
    for (size_t i = 0; i < s.calls.size(); ++i) {
      const progress_file::Call& c = s.calls[i];
      EXPECT_EQ(c.seq, i + 1);
      EXPECT_EQ(c.group, "ddp");
      EXPECT_EQ(c.op, "ddp_all_reduce");
      EXPECT_EQ(c.numel, 256u * 256 + 256 + 256 * 10 + 10);
      EXPECT_EQ(c.dtype, "float32");
      EXPECT_EQ(c.where, forward);
      EXPECT_EQ(c.group_size, 2);
      EXPECT_FALSE(c.in_flight());
      EXPECT_GT(c.end_ns, c.start_ns);
      timed += c.end_ns - c.start_ns;
    }
    EXPECT_EQ(s.in_collective_ns, timed);
    // At least one bucket's all_reduce per synced step.
    EXPECT_GE(s.completed, 5u);
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Peers, PythonRecorderTest, ::testing::ValuesIn(torch_pythons()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace acc::testing
