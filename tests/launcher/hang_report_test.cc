#include "hangs/hang_report.h"

#include <gtest/gtest.h>

#include "hangs/stack_dump.h"

namespace acc::launcher {
namespace {

WorkerSnapshot worker(int rank, std::vector<std::string> frames, long progress = 5) {
  WorkerSnapshot w;
  w.rank = rank;
  w.local_rank = rank;
  w.pid = 1000 + rank;
  w.state = "S";
  w.progress_count = progress;
  w.stack.source = "python faulthandler";
  w.stack.lines.push_back("main thread:");
  for (const std::string& f : frames) w.stack.lines.push_back("  " + f);
  w.stack.main_thread = frames;
  return w;
}

const std::string kAllReduce =
    "File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1541 in "
    "all_reduce";
const std::string kStepLine = "File \"train.py\", line 12 in step";
const std::string kSleepLine = "File \"train.py\", line 20 in main";
const std::string kMain = "File \"train.py\", line 30 in <module>";

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

TEST(HangReportTest, NamesTheRankWhoseStackDiffersFromTheMajority) {
  HangReport report;
  report.host = "node1";
  report.stalled_for = 3.2;
  report.workers = {worker(0, {kAllReduce, kStepLine, kMain}), worker(1, {kSleepLine, kMain}),
                    worker(2, {kAllReduce, kStepLine, kMain}),
                    worker(3, {kAllReduce, kStepLine, kMain})};
  const std::string text = format_hang_report(report);
  EXPECT_EQ(first_line(text),
            "acc-launch: hang: no worker on node1 made progress for 3.2 s; odd one out: rank 1 "
            "(its stack differs from ranks 0, 2, 3's)");
}

TEST(HangReportTest, PrintsEqualStacksOnceAndTheFramesAllRanksShareOnce) {
  HangReport report;
  report.workers = {worker(0, {kAllReduce, kStepLine, kMain}), worker(1, {kSleepLine, kMain}),
                    worker(2, {kAllReduce, kStepLine, kMain})};
  const std::string text = format_hang_report(report);
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count(kAllReduce), 1u) << text;
  EXPECT_EQ(count(kMain), 1u) << text;
  EXPECT_NE(text.find("ranks 0, 2:\n    main thread:\n      " + kAllReduce), std::string::npos)
      << text;
  EXPECT_NE(text.find("common to all ranks (outermost):\n      " + kMain), std::string::npos)
      << text;
}

TEST(HangReportTest, WithoutAMajorityTheRankOutsideTheCollectiveIsTheOddOne) {
  const OddOneOut odd =
      find_odd_one_out({worker(0, {kAllReduce, kStepLine, kMain}), worker(1, {kSleepLine, kMain})});
  EXPECT_EQ(odd.ranks, std::vector<int>{1});
  EXPECT_EQ(odd.reason, "not in a collective, while rank 0 waits in one");
}

TEST(HangReportTest, APythonFrameIsInACollectiveByItsFileNotItsName) {
  EXPECT_TRUE(is_collective_frame(kAllReduce));
  EXPECT_FALSE(is_collective_frame("File \"/src/all_reduce_test.py\", line 3 in barrier"));
  EXPECT_TRUE(
      is_collective_frame("c10d::ProcessGroupGloo::AsyncWork::wait() from libtorch_cpu.so"));
}

TEST(HangReportTest, WhenStacksAgreeARankThatMadeNoProgressIsTheOddOne) {
  EXPECT_EQ(find_odd_one_out({worker(0, {kMain}, 40), worker(1, {kMain}, 0)}).ranks,
            std::vector<int>{1});
  // More or fewer lines is no sign: chatty and quiet ranks differ for no reason.
  EXPECT_TRUE(find_odd_one_out({worker(0, {kMain}, 40), worker(1, {kMain}, 12)}).ranks.empty());
}

TEST(HangReportTest, SaysSoWhenAllRanksLookAlike) {
  HangReport report;
  report.stalled_for = 5;
  report.nnodes = 2;
  report.workers = {worker(0, {kAllReduce, kMain}), worker(1, {kAllReduce, kMain})};
  EXPECT_NE(
      first_line(format_hang_report(report))
          .find("no odd one out on this node: its ranks look alike (look at the other nodes)"),
      std::string::npos);
}

// A job of one node has no other nodes to look at.
TEST(HangReportTest, OneNodeReportsPointNowhereElse) {
  HangReport report;
  report.stalled_for = 5;
  report.workers = {worker(0, {kAllReduce, kMain}), worker(1, {kAllReduce, kMain})};
  const std::string text = format_hang_report(report);
  EXPECT_NE(first_line(text).find("; no odd one out: the ranks look alike"), std::string::npos);
  EXPECT_EQ(text.find("other nodes"), std::string::npos) << text;
  report.workers.pop_back();
  EXPECT_EQ(format_hang_report(report).find("other nodes"), std::string::npos);
}

TEST(HangReportTest, TheStuckCollectiveFromTheTracesIsTheHeadline) {
  HangReport report;
  report.host = "node1";
  report.stalled_for = 4;
  for (int rank = 0; rank < 4; ++rank) {
    report.workers.push_back(rank == 2 ? worker(2, {kSleepLine, kMain})
                                       : worker(rank, {kAllReduce, kStepLine, kMain}));
    RankTrace trace;
    trace.rank = rank;
    if (rank != 2) {
      TracedCall call;
      call.group = "default";
      call.seq = 1;
      call.op = "all_reduce";
      call.group_size = 4;
      call.where = "train.py:12";
      call.in_flight = true;
      call.duration = 4;
      trace.calls.push_back(call);
    }
    report.traces.push_back(trace);
  }
  const std::string text = format_hang_report(report);
  EXPECT_EQ(first_line(text),
            "acc-launch: hang: no worker on node1 made progress for 4.0 s; stuck collective: rank "
            "2 never issued all_reduce #1 (group default, 4 ranks); ranks 0, 1, 3 have waited in "
            "it for 4.0 s");
  EXPECT_NE(text.find("\n    ranks 0, 1, 3: all_reduce #1 at train.py:12, waiting for 4.0 s\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("by the stacks: odd one out rank 2"), std::string::npos) << text;
}

TEST(HangReportTest, DescendantsAppearUnderTheirRankWithPidAndStack) {
  HangReport report;
  report.workers = {worker(0, {kMain}), worker(1, {kMain})};
  DescendantSnapshot loader;
  loader.pid = 4242;
  loader.parent = report.workers[1].pid;
  loader.name = "pt_data_worker";
  loader.state = "S";
  loader.stack.source = "python faulthandler";
  loader.stack.lines = {"main thread:", "  File \"loader.py\", line 7 in __getitem__"};
  report.workers[1].descendants.push_back(loader);
  const std::string text = format_hang_report(report);
  EXPECT_NE(text.find("    `-         4242      S      pt_data_worker (child)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nrank 1, its child pid 4242 (pt_data_worker, state S, stack from python "
                      "faulthandler):\n    main thread:\n      File \"loader.py\", line 7 in "
                      "__getitem__\n"),
            std::string::npos)
      << text;
}

TEST(HangReportTest, FormatsRankLists) {
  EXPECT_EQ(format_ranks({3, 0, 1, 2}), "0-3");
  EXPECT_EQ(format_ranks({0, 2}), "0, 2");
  EXPECT_EQ(format_ranks({5}), "5");
}

TEST(StackParseTest, FaulthandlerThreadIdsAreDroppedSoEqualStacksCompareEqual) {
  const auto a = parse_faulthandler(
      "Thread 0x00007f1 (most recent call first):\n  File \"t.py\", line 3 in run\n\n"
      "Current thread 0x00007f2 (most recent call first):\n  File \"m.py\", line 9 in <module>\n");
  const auto b = parse_faulthandler(
      "Thread 0x00007aa (most recent call first):\n  File \"t.py\", line 3 in run\n\n"
      "Current thread 0x00007bb (most recent call first):\n  File \"m.py\", line 9 in <module>\n");
  EXPECT_EQ(a.lines, b.lines);
  EXPECT_EQ(a.main_thread, std::vector<std::string>{"File \"m.py\", line 9 in <module>"});
}

// The recorder's wrapper between torch's function and the user's line is the launcher's frame.
TEST(StackParseTest, FaulthandlerStacksLeaveTheRecordersFrameOut) {
  const auto stack = parse_faulthandler(
      "Current thread 0x00007f2 (most recent call first):\n"
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1536 "
      "in all_reduce\n"
      "  File \"/tmp/acc-launch-run/python/acc_launch/_hook.py\", line 250 in recorded\n"
      "  File \"train.py\", line 9 in main\n");
  EXPECT_EQ(stack.main_thread,
            (std::vector<std::string>{"File \"/usr/lib/python3/dist-packages/torch/distributed/"
                                      "distributed_c10d.py\", line 1536 in all_reduce",
                                      "File \"train.py\", line 9 in main"}));
  EXPECT_EQ(stack.lines.size(), 3u);
}

TEST(StackParseTest, GdbFramesKeepFunctionAndPlaceButNotAddressesOrArguments) {
  const auto stack = parse_gdb(
      "[New LWP 12]\n"
      "Thread 2 (Thread 0x7f00 (LWP 12) \"worker\"):\n"
      "#0  0x00007f1 in __futex_abstimed_wait_common () from /lib/x86_64-linux-gnu/libc.so.6\n"
      "Thread 1 (Thread 0x7f01 (LWP 11) \"worker\"):\n"
      "#0  0x00007f2 in gloo::transport::tcp::UnboundBuffer::waitRecv(int*, "
      "std::chrono::duration<long, std::ratio<1l, 1000l> >) () from /lib/libgloo.so.0\n"
      "#1  0x00007f13860d44a3\n"
      "#2  main (argc=3, argv=0x7ffd) at worker.cc:42\n"
      "[Inferior 1 (process 11) detached]\n");
  EXPECT_EQ(stack.lines,
            (std::vector<std::string>{
                "thread 2 \"worker\":", "  __futex_abstimed_wait_common from libc.so.6",
                "thread 1 \"worker\":",
                "  gloo::transport::tcp::UnboundBuffer::waitRecv(int*, std::chrono::duration<long, "
                "std::ratio<1l, 1000l> >) from libgloo.so.0",
                "  ??", "  main at worker.cc:42"}));
  EXPECT_EQ(stack.main_thread.size(), 3u);
  EXPECT_TRUE(is_collective_frame(stack.main_thread[0]));
}

// `eu-stack -s`: the source line below a frame joins it; a frame without one stays as it was.
TEST(StackParseTest, EuStackSourceLinesJoinTheirFrames) {
  const WorkerStack stack = parse_eu_stack(
      "PID 22951 - process\n"
      "TID 22951:\n"
      "#0  0x00007ff572865503 clock_nanosleep@GLIBC_2.2.5\n"
      "    ../sysdeps/unix/sysv/linux/clock_nanosleep.c:71:10\n"
      "#1  0x000055d20732e4af\n"
      "#2  0x00007ff5727bd24a __libc_start_call_main\n"
      "    ../sysdeps/nptl/libc_start_call_main.h:58:16\n",
      22951);
  ASSERT_EQ(stack.main_thread.size(), 3u);
  EXPECT_EQ(stack.main_thread[0],
            "clock_nanosleep@GLIBC_2.2.5 at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:71");
  EXPECT_EQ(stack.main_thread[1], "??");
  EXPECT_EQ(stack.main_thread[2],
            "__libc_start_call_main at ../sysdeps/nptl/libc_start_call_main.h:58");
}

}  // namespace
}  // namespace acc::launcher
