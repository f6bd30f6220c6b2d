// The link between the launchers of a static job (nodes/job_link.h) on an in-memory store whose
// clock moves only when the test says: ends, restarts, lost nodes and barriers, node by node.

#include "nodes/job_link.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "acc/common/exit_code.h"
#include "acc/common/store_keys.h"
#include "json_fields.h"
#include "memory_store.h"

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using Kind = JobEvent::Kind;

class JobLinkTest : public ::testing::Test {
 protected:
  // `nnodes` links over one store, each joined.
  void start(int nnodes) {
    for (int n = 0; n < nnodes; ++n) {
      JobLink::Options options;
      options.node_rank = n;
      options.nnodes = nnodes;
      options.keep_alive_window = 5s;
      nodes_.push_back(std::make_unique<JobLink>(store_, store_, options));
      nodes_.back()->join();
    }
  }
  JobLink& node(int n) { return *nodes_[n]; }

  static JobEnd worker_failed(int node, int rank, int code) {
    JobEnd end;
    end.node = node;
    end.host = "host" + std::to_string(node);
    end.rank = rank;
    end.local_rank = rank % 2;
    end.pid = 4711;
    end.exit_code = code;
    end.status = code;
    end.reason = "rank " + std::to_string(rank) + " exited with " + std::to_string(code);
    return end;
  }

  rendezvous::MemoryStore store_;
  std::vector<std::unique_ptr<JobLink>> nodes_;
};

TEST(JobEndTest, AJobEndRoundTripsAsOneLineWithEveryField) {
  JobEnd end;
  end.node = 3;
  end.host = "gpu-07";
  end.rank = 25;
  end.local_rank = 1;
  end.pid = 4711;
  end.exit_code = 2;
  end.signal = 9;
  end.status = 137;
  end.reason = "rank 25 exited with SIGKILL (9)";
  const std::string line = format_job_end(end);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const JobEnd back = parse_job_end(line);
  EXPECT_EQ(back.node, 3);
  EXPECT_EQ(back.host, "gpu-07");
  EXPECT_EQ(back.rank, 25);
  EXPECT_EQ(back.local_rank, 1);
  EXPECT_EQ(back.pid, 4711);
  EXPECT_EQ(back.exit_code, 2);
  EXPECT_EQ(back.signal, 9);
  EXPECT_EQ(back.status, 137);
  EXPECT_EQ(back.reason, end.reason);
  EXPECT_EQ(describe_job_end(back), "node 3 (host gpu-07) ended the job: " + end.reason);
}

TEST(JobEndTest, AReasonWithQuotesNewlinesAndUnicodeSurvives) {
  JobEnd end;
  end.node = 1;
  end.host = "ноут-b";
  end.reason = "rank 3: \"CUDA error: an illegal memory access\"\n\tat train.py:12 \\ ✓ é 日本";
  const std::string line = format_job_end(end);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const JobEnd back = parse_job_end(line);
  EXPECT_EQ(back.reason, end.reason);
  EXPECT_EQ(back.host, end.host);
  EXPECT_EQ(back.node, 1);
}

// What another launcher's text would be read as: its own words, with a failure's status.
TEST(JobEndTest, TextThatIsNotAJobEndBecomesTheReason) {
  JobEnd end;
  end.node = 1;
  end.rank = 3;
  end.status = 3;
  end.reason = "rank 3 exited with 3";
  const std::string text = format_job_end(end);
  ASSERT_EQ(parse_job_end(text).status, 3);
  for (const std::string& other :
       {std::string("node=1 host=b rank=3 local_rank=1 pid=42 exit=3 signal=0 status=3 reason=x"),
        std::string(""), with_field(text, "/version", 2), with_field(text, "/format", "acc-trace"),
        with_field(text, "/rank", "3"), with_field(text, "/status", "x"),
        with_field(text, "/status", true), with_field(text, "/status", 3.5),
        with_field(text, "/reason", nullptr), without_field(text, "/status"),
        text.substr(0, text.size() - 1)}) {
    const JobEnd read = parse_job_end(other);
    EXPECT_EQ(read.reason, other);
    EXPECT_EQ(read.status, 1) << other;  // never a success, never a field read as zero
    EXPECT_EQ(read.rank, -1) << other;
  }
}

TEST_F(JobLinkTest, AFailureOnNodeOneIsSeenByNodeZeroAtItsNextTick) {
  start(2);
  EXPECT_EQ(node(0).tick(0).kind, Kind::kNone);
  const JobEnd published = node(1).end(worker_failed(1, 3, 3));
  EXPECT_EQ(published.node, 1);
  const JobEvent seen = node(0).tick(0);
  ASSERT_EQ(seen.kind, Kind::kEnded);
  EXPECT_TRUE(seen.shared);
  EXPECT_EQ(seen.end.node, 1);
  EXPECT_EQ(seen.end.host, "host1");
  EXPECT_EQ(seen.end.rank, 3);
  EXPECT_EQ(seen.end.status, 3);
}

TEST_F(JobLinkTest, TheFirstEndCountsForEveryNode) {
  start(3);
  node(2).end(worker_failed(2, 5, 3));
  // Node 0's own workers failed next (their peers were gone): the job's end is still node 2's.
  const JobEnd counted = node(0).end(worker_failed(0, 0, 1));
  EXPECT_EQ(counted.node, 2);
  EXPECT_EQ(counted.status, 3);
  EXPECT_EQ(node(1).ended()->node, 2);
}

TEST_F(JobLinkTest, ARestartMovesEveryNodeToTheSameCount) {
  start(2);
  EXPECT_EQ(node(1).restart(0), 1);
  const JobEvent seen = node(0).tick(0);
  ASSERT_EQ(seen.kind, Kind::kRestart);
  EXPECT_EQ(seen.restart_count, 1);
  // Node 0's workers failed too: asking again does not skip an attempt.
  EXPECT_EQ(node(0).restart(0), 1);
  EXPECT_EQ(node(0).tick(1).kind, Kind::kNone);
  EXPECT_EQ(node(1).tick(1).kind, Kind::kNone);
}

TEST_F(JobLinkTest, NodeZeroEndsTheJobForANodeSilentForTheWindow) {
  start(3);
  node(0).tick(0);  // first look: records every node's beat
  store_.advance(3s);
  node(2).beat();
  EXPECT_EQ(node(0).tick(0).kind, Kind::kNone);
  store_.advance(2s);  // node 1 silent for 5 s; node 2 for 2 s
  node(2).beat();
  const JobEvent seen = node(0).tick(0);
  ASSERT_EQ(seen.kind, Kind::kEnded);
  EXPECT_EQ(seen.end.node, 1);
  EXPECT_EQ(seen.end.rank, -1);
  EXPECT_EQ(seen.end.status, kExitNodeLost);
  EXPECT_EQ(seen.end.reason, "its launcher stopped beating for 5 s (seen by node 0)");
  EXPECT_EQ(node(2).tick(0).end.node, 1);
}

TEST_F(JobLinkTest, TheOtherNodesEndTheJobWhenNodeZeroIsSilent) {
  start(2);
  node(1).tick(0);
  store_.advance(5s);
  const JobEvent seen = node(1).tick(0);
  ASSERT_EQ(seen.kind, Kind::kEnded);
  EXPECT_EQ(seen.end.node, 0);
  EXPECT_EQ(seen.end.status, kExitNodeLost);
}

TEST_F(JobLinkTest, ANodeThatHasNotJoinedYetIsNotLost) {
  JobLink::Options options;
  options.node_rank = 0;
  options.nnodes = 2;
  options.keep_alive_window = 5s;
  JobLink zero(store_, store_, options);
  zero.join();
  zero.tick(0);
  store_.advance(60s);
  EXPECT_EQ(zero.tick(0).kind, Kind::kNone);
}

TEST_F(JobLinkTest, NodeZeroWaitsForEveryLiveNodeToLetGoButNotForALostOne) {
  start(3);
  node(0).tick(0);
  EXPECT_FALSE(node(0).others_let_go());
  node(1).let_go();
  EXPECT_FALSE(node(0).others_let_go());  // node 2 beats: it may still read the job's end
  store_.advance(5s);                     // node 2 silent for the window: lost
  node(1).beat();
  EXPECT_TRUE(node(0).others_let_go());
}

TEST_F(JobLinkTest, NodeZeroDoesNotWaitForANodeThatNeverJoined) {
  JobLink::Options options;
  options.node_rank = 0;
  options.nnodes = 3;
  options.keep_alive_window = 5s;
  JobLink zero(store_, store_, options);
  zero.join();
  EXPECT_TRUE(zero.others_let_go());
  options.node_rank = 1;
  JobLink one(store_, store_, options);
  one.join();
  EXPECT_FALSE(zero.others_let_go());
  one.let_go();
  EXPECT_TRUE(zero.others_let_go());
}

TEST_F(JobLinkTest, ABarrierIsCompleteWhenEveryNodeArrived) {
  start(3);
  const std::string barrier = store_keys::attempt_barrier(0);
  node(0).arrive(barrier);
  node(1).arrive(barrier);
  EXPECT_FALSE(node(0).all_arrived(barrier));
  node(2).arrive(barrier);
  EXPECT_TRUE(node(0).all_arrived(barrier));
  EXPECT_TRUE(node(2).all_arrived(barrier));
}

TEST_F(JobLinkTest, ANodeThatLeavesTheExitBarrierNoLongerCounts) {
  start(2);
  node(0).arrive(store_keys::exit_barrier());
  node(0).arrive(store_keys::exit_barrier(), -1);  // the job restarted meanwhile
  node(1).arrive(store_keys::exit_barrier());
  EXPECT_FALSE(node(1).all_arrived(store_keys::exit_barrier()));
}

TEST_F(JobLinkTest, TheLastNodeToArriveSetsTheKeyTheOthersWaitOn) {
  start(3);
  const std::string barrier = store_keys::attempt_barrier(0);
  const std::string ready = store_keys::attempt_ready(0);
  node(0).arrive(barrier, 1, ready);
  node(1).arrive(barrier, 1, ready);
  EXPECT_FALSE(store_.check({ready}));
  node(2).arrive(barrier, 1, ready);
  EXPECT_TRUE(store_.check({ready})) << "the waiting nodes' store WAIT ends on this key";
}

TEST_F(JobLinkTest, ARestartSetsTheKeyThatWakesTheNodesOfThatAttempt) {
  start(2);
  EXPECT_FALSE(store_.check({store_keys::attempt_over(0)}));
  EXPECT_EQ(node(1).restart(0), 1);
  EXPECT_TRUE(store_.check({store_keys::attempt_over(0)}));
  EXPECT_FALSE(store_.check({store_keys::attempt_over(1)}));
}

TEST_F(JobLinkTest, AnEndWakesTheNodesOfTheAttemptItWasPublishedIn) {
  start(2);
  node(1).set_attempt(2);
  node(1).end(worker_failed(1, 3, 3));
  EXPECT_TRUE(store_.check({store_keys::attempt_over(2)})) << "nodes whose workers run";
  EXPECT_TRUE(store_.check({store_keys::attempt_ready(2)})) << "nodes at the attempt barrier";
  EXPECT_FALSE(store_.check({store_keys::attempt_over(0)}));
}

}  // namespace
}  // namespace acc::launcher
