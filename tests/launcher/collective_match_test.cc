#include "hangs/collective_match.h"

#include <gtest/gtest.h>

#include "acc/common/progress_file.h"
#include "json_fields.h"
#include "launcher_harness.h"

namespace acc::launcher {
namespace {

TracedCall call(std::uint64_t seq, const std::string& op, bool in_flight, double duration = 1,
                const std::string& where = "train.py:12") {
  TracedCall c;
  c.group = "default";
  c.seq = seq;
  c.op = op;
  c.group_size = 4;
  c.numel = 1024;
  c.dtype = "float32";
  c.where = where;
  c.in_flight = in_flight;
  c.duration = duration;
  c.age = duration + (in_flight ? 0 : 2);
  return c;
}

RankTrace trace(int rank, std::vector<TracedCall> calls) {
  RankTrace t;
  t.rank = rank;
  t.calls = std::move(calls);
  return t;
}

TEST(CollectiveMatchTest, NamesTheRankThatIssuedAnotherOpUnderTheSameSequenceNumber) {
  std::vector<RankTrace> traces;
  for (int rank = 0; rank < 4; ++rank)
    traces.push_back(trace(rank, {call(56, "all_reduce", false),
                                  rank == 1 ? call(57, "broadcast", true, 9, "train.py:40")
                                            : call(57, "all_reduce", true, 9)}));
  const auto findings = match_collectives(traces);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, CollectiveFinding::Kind::kMismatch);
  EXPECT_EQ(describe(findings[0]),
            "rank 1 issued broadcast #57 where ranks 0, 2, 3 issued all_reduce #57 (group "
            "default, 4 ranks)");
  const auto sides = describe_sides(findings[0]);
  ASSERT_EQ(sides.size(), 2u);
  EXPECT_EQ(sides[0], "  ranks 0, 2, 3: all_reduce #57 at train.py:12, waiting for 9.0 s");
  EXPECT_EQ(sides[1], "  rank 1: broadcast #57 at train.py:40, waiting for 9.0 s");
}

TEST(CollectiveMatchTest, SameOpOfAnotherSizeIsAMismatchNamedWithTheSizes) {
  std::vector<RankTrace> traces;
  for (int rank = 0; rank < 4; ++rank) {
    TracedCall c = call(3, "all_reduce", true);
    if (rank == 2) c.numel = 10;
    traces.push_back(trace(rank, {c}));
  }
  const auto findings = match_collectives(traces);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(describe(findings[0]),
            "rank 2 issued all_reduce #3 of 10 float32 where ranks 0, 1, 3 issued all_reduce #3 "
            "of 1024 float32 (group default, 4 ranks)");
}

TEST(CollectiveMatchTest, NamesTheRankThatNeverIssuedTheCollectiveTheOthersWaitIn) {
  std::vector<RankTrace> traces;
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<TracedCall> calls = {call(57, "all_reduce", false)};
    if (rank != 2) calls.push_back(call(58, "all_reduce", true, 312 + rank));
    traces.push_back(trace(rank, calls));
  }
  const auto findings = match_collectives(traces);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, CollectiveFinding::Kind::kNeverIssued);
  EXPECT_EQ(describe(findings[0]),
            "rank 2 never issued all_reduce #58 (group default, 4 ranks); ranks 0, 1, 3 have "
            "waited in it for 312.0 s");
  const auto sides = describe_sides(findings[0]);
  ASSERT_EQ(sides.size(), 2u);
  EXPECT_EQ(sides[1],
            "  rank 2, its last call in group default: all_reduce #57 at train.py:12, completed "
            "2.0 s ago");
}

TEST(CollectiveMatchTest, ARankWithNoCallAtAllNeverIssuedTheFirstCollective) {
  std::vector<RankTrace> traces;
  for (int rank = 0; rank < 4; ++rank)
    traces.push_back(trace(rank, rank == 2
                                     ? std::vector<TracedCall>{}
                                     : std::vector<TracedCall>{call(1, "all_reduce", true, 5)}));
  const auto findings = match_collectives(traces);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(describe(findings[0]),
            "rank 2 never issued all_reduce #1 (group default, 4 ranks); ranks 0, 1, 3 have "
            "waited in it for 5.0 s");
  EXPECT_EQ(describe_sides(findings[0])[1], "  rank 2: no call in group default yet");
}

TEST(CollectiveMatchTest, EveryRankInTheSameCollectiveSaysTheCollectiveItselfHangs) {
  std::vector<RankTrace> traces;
  for (int rank = 0; rank < 2; ++rank)
    traces.push_back(trace(rank, {call(7, "all_reduce", true, 20)}));
  const auto findings = match_collectives(traces);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, CollectiveFinding::Kind::kAllWaiting);
  EXPECT_NE(describe(findings[0]).find("ranks 0, 1 all wait in all_reduce #7"), std::string::npos);
}

TEST(CollectiveMatchTest, NothingInFlightAndNoDisagreementIsNoFinding) {
  std::vector<RankTrace> traces;
  for (int rank = 0; rank < 4; ++rank)
    traces.push_back(trace(rank, {call(1, "all_reduce", false), call(2, "broadcast", false)}));
  EXPECT_TRUE(match_collectives(traces).empty());
  EXPECT_TRUE(match_collectives({}).empty());
}

TEST(CollectiveMatchTest, PointToPointCallsPairASendWithARecv) {
  TracedCall send = call(4, "send", true), recv = call(4, "recv", true);
  send.peer = 1;
  recv.peer = 0;
  const auto findings = match_collectives({trace(0, {send}), trace(1, {recv})});
  EXPECT_TRUE(findings.empty()) << describe(findings.front());
}

TEST(CollectiveMatchTest, ATraceSurvivesItsEncodingWithEveryField) {
  RankTrace t = trace(3, {call(57, "all_reduce", false), call(58, "broadcast", true, 4.25)});
  t.completed = 57;
  t.in_collective = 12.5;
  t.calls[1].where = "with\ttab\nand \"quotes\" ✓.py:3";
  t.calls[1].peer = 2;
  const auto decoded = decode_trace(encode_trace(t));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->rank, 3);
  EXPECT_EQ(decoded->completed, 57u);
  EXPECT_DOUBLE_EQ(decoded->in_collective, 12.5);
  ASSERT_EQ(decoded->calls.size(), 2u);
  const TracedCall& c = decoded->calls[1];
  EXPECT_EQ(c.group, "default");
  EXPECT_EQ(c.seq, 58u);
  EXPECT_EQ(c.op, "broadcast");
  EXPECT_EQ(c.group_size, 4);
  EXPECT_EQ(c.peer, 2);
  EXPECT_EQ(c.numel, 1024u);
  EXPECT_EQ(c.dtype, "float32");
  EXPECT_EQ(c.where, t.calls[1].where);
  EXPECT_EQ(c.age, t.calls[1].age);
  EXPECT_EQ(c.duration, 4.25);
  EXPECT_TRUE(c.in_flight);
  EXPECT_FALSE(decoded->calls[0].in_flight);
  EXPECT_FALSE(decode_trace(""));
}

TEST(CollectiveMatchTest, ATraceOfAnotherVersionOrWithABadFieldIsRefusedNotReadAsZero) {
  const std::string text = encode_trace(trace(3, {call(57, "all_reduce", true)}));
  ASSERT_TRUE(decode_trace(text));
  EXPECT_FALSE(decode_trace(with_field(text, "/version", 1)));
  EXPECT_FALSE(decode_trace(with_field(text, "/format", "acc-stragglers")));
  EXPECT_FALSE(decode_trace(with_field(text, "/rank", "3")));
  EXPECT_FALSE(decode_trace(with_field(text, "/completed", -1)));
  EXPECT_FALSE(decode_trace(with_field(text, "/calls/0/seq", "x")));
  EXPECT_FALSE(decode_trace(with_field(text, "/calls/0/group_size", "four")));
  EXPECT_FALSE(decode_trace(with_field(text, "/calls/0/peer", 0.5)));
  EXPECT_FALSE(decode_trace(with_field(text, "/calls/0/numel", -1)));
  EXPECT_FALSE(decode_trace(with_field(text, "/calls/0/age", "1.0")));
  EXPECT_FALSE(decode_trace(with_field(text, "/calls/0/in_flight", 1)));
  EXPECT_FALSE(decode_trace(with_field(text, "/calls/0/op", nullptr)));
  EXPECT_FALSE(decode_trace(without_field(text, "/calls/0/seq")));
  EXPECT_FALSE(decode_trace(text.substr(0, text.size() - 2)));
  // Version 1's lines, garbage and all, which its reader took for a call of sequence number 0 in
  // a group of 0 ranks.
  const std::string version_1 =
      "acc-trace 1 3 57 1.0\n"
      "default\tx\tall_reduce\tfour\t-1\t1024\tfloat32\tt.py:1\t1.0\t1.0\t1\n";
  EXPECT_FALSE(decode_trace(version_1));
}

// The launcher's side of a file a worker wrote with the Writer: ages from the reader's clock.
TEST(CollectiveMatchTest, ATraceFromAProgressFileHoldsItsLastCallsWithTheirAges) {
  acc::testing::TempDir dir;
  const std::string path = dir.path() + "/progress";
  progress_file::create(path);
  progress_file::Writer writer(path);
  for (std::uint64_t seq = 1; seq <= 40; ++seq)
    writer.end(writer.begin("default", seq, "all_reduce", 8, "float32", 2, -1, "train.py:9"));
  writer.begin("default", 41, "broadcast", 8, "float32", 2, -1, "train.py:10");
  const progress_file::Reader reader(path);
  const std::int64_t later = progress_file::now_ns() + 3'000'000'000;
  const RankTrace t = trace_from_snapshot(1, reader.snapshot(), later, 32);
  EXPECT_EQ(t.rank, 1);
  EXPECT_EQ(t.completed, 40u);
  ASSERT_EQ(t.calls.size(), 32u);
  EXPECT_EQ(t.calls.front().seq, 10u);
  const TracedCall& last = t.calls.back();
  EXPECT_EQ(last.seq, 41u);
  EXPECT_EQ(last.op, "broadcast");
  EXPECT_EQ(last.where, "train.py:10");
  EXPECT_TRUE(last.in_flight);
  EXPECT_GE(last.duration, 3.0);
  EXPECT_LT(last.duration, 60.0);
  EXPECT_FALSE(t.calls.front().in_flight);
}

}  // namespace
}  // namespace acc::launcher
