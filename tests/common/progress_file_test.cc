#include "acc/common/progress_file.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "acc/common/error.h"

namespace acc {
namespace {

namespace pf = progress_file;

class ProgressFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("acc_progress_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "progress").string();
    pf::create(path_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string bytes() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(ProgressFileTest, ANewFileHasNoWriterAndNoCalls) {
  EXPECT_EQ(bytes().size(), pf::kFileSize);
  const pf::Snapshot s = pf::Reader(path_).snapshot();
  EXPECT_EQ(s.writer_pid, 0);
  EXPECT_EQ(s.started, 0u);
  EXPECT_TRUE(s.calls.empty());
  EXPECT_TRUE(s.section.empty());
}

// The writer runs in another process, as a worker does; the reader sees what it wrote.
TEST_F(ProgressFileTest, TheLauncherSeesWhatAWorkerProcessWrote) {
  pf::Reader reader(path_);
  const pid_t child = ::fork();
  if (child == 0) {
    pf::Writer writer(path_);
    writer.beat();
    const auto first = writer.begin("default", 1, "all_reduce", 1024, "float32", 4, -1, "a.py:7");
    writer.end(first);
    writer.begin("default", 2, "broadcast", 8, "int64", 4, -1, "a.py:9");
    writer.open_section("checkpoint", 5'000'000'000);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const pf::Snapshot s = reader.snapshot();
  EXPECT_EQ(s.writer_pid, child);
  EXPECT_EQ(s.beats, 1u);
  EXPECT_EQ(s.started, 2u);
  EXPECT_EQ(s.completed, 1u);
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].op, "all_reduce");
  EXPECT_EQ(s.calls[0].seq, 1u);
  EXPECT_FALSE(s.calls[0].in_flight());
  EXPECT_EQ(s.calls[0].numel, 1024u);
  EXPECT_EQ(s.calls[0].where, "a.py:7");
  EXPECT_EQ(s.calls[1].op, "broadcast");
  EXPECT_EQ(s.calls[1].dtype, "int64");
  EXPECT_TRUE(s.calls[1].in_flight());
  EXPECT_EQ(s.in_collective_ns, s.calls[0].end_ns - s.calls[0].start_ns);
  EXPECT_EQ(s.section, "checkpoint");
  EXPECT_EQ(s.section_deadline_ns - s.section_started_ns, 5'000'000'000);
  EXPECT_LE(s.last_progress_ns, pf::now_ns());
}

// A program that gives its step and total (Writer::beat(step, total), the Python hook's
// beat(step=, total=)); one that does not leaves both zero: "not given".
TEST_F(ProgressFileTest, ABeatWithAStepAndATotalIsReadBackAndAPlainBeatLeavesThemUnset) {
  pf::Writer writer(path_);
  writer.beat();
  pf::Snapshot s = pf::Reader(path_).snapshot(0);
  EXPECT_EQ(s.step, 0u);
  EXPECT_EQ(s.total_steps, 0u);
  writer.beat(1200, 5000);
  s = pf::Reader(path_).snapshot(0);
  EXPECT_EQ(s.beats, 2u);
  EXPECT_EQ(s.step, 1200u);
  EXPECT_EQ(s.total_steps, 5000u);
  // The words' places are the layout's (progress_file.h), which the Python writer mirrors.
  const std::string file = bytes();
  std::uint64_t step = 0, total = 0;
  std::memcpy(&step, file.data() + 128, 8);
  std::memcpy(&total, file.data() + 136, 8);
  EXPECT_EQ(step, 1200u);
  EXPECT_EQ(total, 5000u);
}

TEST_F(ProgressFileTest, TheRingKeepsTheLastCallsOldestFirst) {
  pf::Writer writer(path_);
  for (std::uint64_t seq = 1; seq <= pf::kCapacity + 10; ++seq)
    writer.end(writer.begin("default", seq, "all_reduce", 1, "float32", 2, -1, ""));
  const pf::Snapshot s = pf::Reader(path_).snapshot();
  ASSERT_EQ(s.calls.size(), pf::kCapacity);
  EXPECT_EQ(s.calls.front().seq, 11u);
  EXPECT_EQ(s.calls.back().seq, pf::kCapacity + 10);
  EXPECT_EQ(s.completed, pf::kCapacity + 10);
}

// The layout is a protocol with the Python writer: the offsets of the header comment.
TEST_F(ProgressFileTest, FieldsSitAtTheDocumentedOffsets) {
  {
    pf::Writer writer(path_);
    writer.beat();
    writer.begin("grp", 57, "send", 3, "bf16", 2, 5, "x.py:1");
    writer.open_section("eval", 0);
  }
  const std::string b = bytes();
  auto u64 = [&](std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, b.data() + at, 8);
    return v;
  };
  auto i32 = [&](std::size_t at) {
    std::int32_t v;
    std::memcpy(&v, b.data() + at, 4);
    return v;
  };
  EXPECT_EQ(b.substr(0, 8), "ACCPROG1");
  EXPECT_EQ(i32(8), 1);
  EXPECT_EQ(i32(12), static_cast<int>(pf::kCapacity));
  EXPECT_EQ(u64(16), static_cast<std::uint64_t>(::getpid()));
  EXPECT_EQ(u64(24), 1u);  // beats
  EXPECT_EQ(u64(32), 1u);  // started
  EXPECT_EQ(u64(64), 0u);  // no deadline
  EXPECT_EQ(std::string(b.data() + 80), "eval");
  const std::size_t r = pf::kHeaderSize;
  EXPECT_EQ(u64(r), 57u);
  EXPECT_EQ(u64(r + 16), 0u);  // in flight
  EXPECT_EQ(u64(r + 24), 3u);
  EXPECT_EQ(i32(r + 32), 2);
  EXPECT_EQ(i32(r + 36), 5);
  EXPECT_EQ(std::string(b.data() + r + 40), "grp");
  EXPECT_EQ(std::string(b.data() + r + 64), "send");
  EXPECT_EQ(std::string(b.data() + r + 80), "bf16");
  EXPECT_EQ(std::string(b.data() + r + 88), "x.py:1");
}

TEST_F(ProgressFileTest, AFileOfAnotherKindIsRefusedByName) {
  std::ofstream(path_, std::ios::trunc) << std::string(pf::kFileSize, 'x');
  try {
    pf::Reader reader(path_);
    FAIL() << "read a file that is not a progress file";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find(path_), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace acc
