#include "acc/launcher/output/line_dedup.h"

#include <gtest/gtest.h>

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;
using DedupClock = LineDedup::Clock;

// A deduplicator over `sources` sources with the default prefix, and a fake clock.
struct Fixture {
  explicit Fixture(int sources, milliseconds window = milliseconds(100))
      : dedup(window, [](const std::vector<int>& ranks) {
          return expand_group_prefix("[rank${rank}]: ", ranks, ranks, "default", "host");
        }) {
    for (int i = 0; i < sources; ++i) dedup.add_source(i);
  }
  void add(int source, const std::string& line) { dedup.add(source, line + "\n", now); }
  std::string due() { return dedup.take_due(now); }
  DedupClock::time_point now = DedupClock::time_point() + std::chrono::hours(1);
  LineDedup dedup;
};

TEST(LineDedupTest, ALinePrintedByEverySourceComesOutOnceAtOnce) {
  Fixture f(4);
  for (int source : {2, 0, 3}) f.add(source, "loss 0.5");
  EXPECT_EQ(f.due(), "") << "three of four: waits for the fourth";
  f.add(1, "loss 0.5");
  EXPECT_EQ(f.due(), "[rank0-3]: loss 0.5\n");
  EXPECT_FALSE(f.dedup.next_due());
}

TEST(LineDedupTest, ALineOnlyOneSourcePrintsWaitsOneWindowAtMost) {
  Fixture f(8);
  f.add(5, "only me");
  EXPECT_EQ(*f.dedup.next_due(), f.now + milliseconds(100));
  f.now += milliseconds(99);
  EXPECT_EQ(f.due(), "");
  f.now += milliseconds(1);
  EXPECT_EQ(f.due(), "[rank5]: only me\n");
}

TEST(LineDedupTest, ALinePyTorchPrefixedAlreadyGetsNoSecondPrefix) {
  // PyTorch >= 2 prints an uncaught exception as "[rank1]: Traceback ..." itself.
  Fixture f(2);
  f.add(1, "[rank1]: Traceback (most recent call last):");
  f.add(0, "[rank1]: not rank 0's own prefix");
  f.now += milliseconds(100);
  EXPECT_EQ(f.due(),
            "[rank0]: [rank1]: not rank 0's own prefix\n"
            "[rank1]: Traceback (most recent call last):\n");
}

TEST(LineDedupTest, RangesAreCompressed) {
  Fixture f(8);
  for (int source : {0, 1, 2, 3, 5}) f.add(source, "x");
  f.now += milliseconds(100);
  EXPECT_EQ(f.due(), "[rank0-3,5]: x\n");
}

TEST(LineDedupTest, ASourcesOwnOrderIsKept) {
  Fixture f(2);
  f.add(0, "a");
  f.add(1, "b");
  f.add(1, "a");  // after its "b": joining rank 0's older "a" would put it before "b"
  f.add(0, "b");
  f.now += milliseconds(100);
  EXPECT_EQ(f.due(), "[rank0]: a\n[rank0-1]: b\n[rank1]: a\n");
}

TEST(LineDedupTest, RepeatedLinesOfOneSourceAreNotMerged) {
  Fixture f(2);
  f.add(0, "tick");
  f.add(0, "tick");
  f.add(1, "tick");
  EXPECT_EQ(f.due(), "[rank0-1]: tick\n");
  f.add(1, "tick");
  EXPECT_EQ(f.due(), "[rank0-1]: tick\n");
}

TEST(LineDedupTest, ALineTheOthersWentPastComesOutAtOnceAndTheSharedOneAfterIt) {
  Fixture f(2);
  f.add(0, "rank 0 alone");
  f.add(0, "shared");
  f.now += milliseconds(1);
  f.add(1, "shared");
  EXPECT_EQ(f.due(), "[rank0]: rank 0 alone\n[rank0-1]: shared\n");
}

TEST(LineDedupTest, ALineWaitsWhileAnotherSourceHasPrintedNothingSinceTheLastOne) {
  Fixture f(2);
  f.add(0, "maybe shared");
  EXPECT_EQ(f.due(), "") << "rank 1 may print it yet";
  f.add(1, "older than it");  // read in the same instant: rank 1 may be a line behind
  EXPECT_EQ(f.due(), "");
  f.now += milliseconds(1);
  f.add(1, "something else");
  EXPECT_EQ(f.due(), "[rank0]: maybe shared\n") << "rank 0 may print rank 1's lines yet";
}

TEST(LineDedupTest, ASourceThatEndedIsNotWaitedFor) {
  Fixture f(3);
  f.dedup.finish_source(2);
  f.add(0, "x");
  f.add(1, "x");
  EXPECT_EQ(f.due(), "[rank0-1]: x\n");
  f.add(2, "its last line, read as it ended");
  f.add(0, "y");  // in the same instant: rank 2 cannot have moved on in time, but it ended
  f.add(1, "y");
  EXPECT_EQ(f.due(), "[rank0-1]: y\n");
}

TEST(LineDedupTest, ALateCopyAfterTheWindowIsPrintedAgain) {
  Fixture f(2);
  f.add(0, "slow");
  f.now += milliseconds(150);
  EXPECT_EQ(f.due(), "[rank0]: slow\n");
  f.add(1, "slow");
  f.now += milliseconds(100);
  EXPECT_EQ(f.due(), "[rank1]: slow\n");
}

TEST(LineDedupTest, TakeAllEmptiesEverythingInOrder) {
  Fixture f(3);
  f.add(0, "one");
  f.add(1, "one");
  f.add(2, "two");
  EXPECT_EQ(f.dedup.take_all(), "[rank0-1]: one\n[rank2]: two\n");
  EXPECT_FALSE(f.dedup.next_due());
}

TEST(LineDedupTest, AtTheEndWhatIsLeftIsStillMerged) {
  Fixture f(3);
  for (int source : {0, 1, 2}) {
    f.add(source, "rank " + std::to_string(source));
    f.add(source, "everyone");
  }
  f.add(0, "a");
  f.add(0, "b");
  f.add(1, "b");
  f.add(1, "a");
  EXPECT_EQ(f.dedup.take_all(),
            "[rank0]: rank 0\n[rank1]: rank 1\n[rank2]: rank 2\n[rank0-2]: everyone\n"
            "[rank0]: a\n[rank0-1]: b\n[rank1]: a\n");
}

TEST(LineDedupTest, ALineWithoutNewlineGetsOne) {
  Fixture f(1);
  f.dedup.add(0, "no newline", f.now);
  EXPECT_EQ(f.due(), "[rank0]: no newline\n");
}

TEST(LineDedupTest, EightSourcesOfAThousandLinesGiveAThousand) {
  Fixture f(8);
  std::string out;
  for (int i = 0; i < 1000; ++i)
    for (int source = 0; source < 8; ++source) f.add(source, "step " + std::to_string(i));
  out = f.due();
  int lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 1000);
  EXPECT_EQ(out.substr(0, 21), "[rank0-7]: step 0\n[ra");
}

TEST(LineDedupTest, TheGroupPrefixExpandsEveryPlaceholder) {
  EXPECT_EQ(expand_group_prefix("${hostname}/${role_name}/${rank}/${local_rank}: ", {8, 9, 10, 12},
                                {0, 1, 2, 4}, "trainer", "node1"),
            "node1/trainer/8-10,12/0-2,4: ");
  EXPECT_EQ(expand_group_prefix("", {0, 1}, {0, 1}, "r", "h"), "");
}

}  // namespace
}  // namespace acc::launcher
