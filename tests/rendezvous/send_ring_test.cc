// BatchingChoice, the store server's choice between sending a round's replies together and one
// send each, driven by a fake preemption counter: it measures epochs of one send each, batches
// when one was preempted often, and measures again, less often while the measurements agree. And
// the Uring under the SendRing.

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "send_ring.h"
#include "uring.h"

namespace acc::rendezvous::detail {
namespace {

constexpr std::size_t kEpoch = BatchingChoice::kEpochReplies;
constexpr int kCycle = 1 + BatchingChoice::kExploitEpochs;

// A server preempted `each` times per reply when it sends each, `batched` times when it batches.
struct FakeServer {
  double each;
  double batched;
  double preemptions = 0;
  BatchingChoice choice{[this] { return preemptions; }};

  // Sends one epoch's replies, 8 a round, in whatever mode the choice gives; returns that mode.
  bool run_epoch() {
    const bool batch = choice.batch();
    for (std::size_t i = 0; i < kEpoch / 8; ++i) {
      preemptions += 8 * (choice.batch() ? batched : each);
      choice.sent(8);
    }
    return batch;
  }
};

TEST(BatchingChoiceTest, BatchesWhenClientsPreemptTheServerAfterEachSend) {
  FakeServer server{/*each=*/0.45, /*batched=*/0.04};  // 2 cores, as measured
  EXPECT_FALSE(server.run_epoch());                    // the measured epoch sends each
  EXPECT_NEAR(server.choice.measured(), 0.45, 1e-9);
  for (int i = 0; i < BatchingChoice::kExploitEpochs; ++i) EXPECT_TRUE(server.run_epoch());
  EXPECT_FALSE(server.run_epoch());  // measured again
  EXPECT_TRUE(server.run_epoch());
}

TEST(BatchingChoiceTest, SendsEachWhenClientsWakeOnCoresOfTheirOwn) {
  FakeServer server{/*each=*/0.01, /*batched=*/0.0};
  int batched_epochs = 0;
  for (int i = 0; i < 3 * kCycle; ++i) batched_epochs += server.run_epoch();
  EXPECT_EQ(batched_epochs, 0);
}

TEST(BatchingChoiceTest, FollowsAChangeAtTheNextMeasurement) {
  FakeServer server{/*each=*/0.45, /*batched=*/0.04};
  for (int i = 0; i < kCycle; ++i) server.run_epoch();
  server.each = 0.0;  // the clients moved to cores of their own
  int batched_epochs = 0;
  for (int i = 0; i < 2 * kCycle; ++i) batched_epochs += server.run_epoch();
  EXPECT_EQ(batched_epochs, 0);
}

TEST(BatchingChoiceTest, MeasuresLessOftenWhileTheMeasurementsAgree) {
  FakeServer server{/*each=*/0.45, /*batched=*/0.04};
  std::vector<int> measured_epochs;
  for (int i = 0; i < 1200; ++i) {
    if (!server.run_epoch()) measured_epochs.push_back(i);
  }
  // Batched runs of 30, 60, 120, 240, then 480 each: one measured epoch in 481 at most.
  const std::vector<int> expected = {0, 31, 92, 213, 454, 935};
  EXPECT_EQ(measured_epochs, expected);
}

TEST(BatchingChoiceTest, WhileSendingEachEveryEpochIsMeasured) {
  FakeServer server{/*each=*/0.01, /*batched=*/0.0};
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(server.run_epoch());
  server.each = 0.45;                // clients now share the server's cores
  EXPECT_FALSE(server.run_epoch());  // this epoch measures it
  EXPECT_NEAR(server.choice.measured(), 0.45, 1e-9);
  EXPECT_TRUE(server.run_epoch());
}

TEST(BatchingChoiceTest, AMeasurementThatDisagreesMakesTheNextChecksFrequentAgain) {
  FakeServer server{/*each=*/0.45, /*batched=*/0.04};
  for (int i = 0; i < 92; ++i) server.run_epoch();  // measured at 0, 31; batched up to 91
  server.each = 0.0;
  EXPECT_FALSE(server.run_epoch());  // epoch 92 measures one send each as cheap
  server.each = 0.45;
  EXPECT_FALSE(server.run_epoch());  // 93 measures the preemptions back
  for (int i = 0; i < BatchingChoice::kExploitEpochs; ++i) EXPECT_TRUE(server.run_epoch());
  EXPECT_FALSE(server.run_epoch());  // after 30 batched epochs again, not 240
}

// What the store server does where io_uring is missing or forbidden: the ring is off, the
// server sends one by one. A ring of no entries is one the kernel refuses everywhere.
TEST(UringTest, ARingTheKernelRefusesIsOffAndClosesSafely) {
  Uring ring(0);
  EXPECT_FALSE(ring.ok());
  EXPECT_EQ(ring.fd(), -1);
  ring.close();
  EXPECT_FALSE(ring.ok());
  EXPECT_FALSE(SendRing(0).ok());
}

TEST(UringTest, QueuedSendsAreSubmittedTogetherAndEachCompletesWithItsTag) {
  Uring ring(4);
  if (!ring.ok()) GTEST_SKIP() << "io_uring is not available here";
  ASSERT_GE(ring.entries(), 4u);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  const std::string first = "abc", second = "defg";
  for (const auto& [text, tag] : {std::pair{&first, 7}, std::pair{&second, 9}}) {
    io_uring_sqe& sqe = ring.queue();
    sqe.opcode = IORING_OP_SEND;
    sqe.fd = pair[0];
    sqe.addr = reinterpret_cast<std::uint64_t>(text->data());
    sqe.len = static_cast<std::uint32_t>(text->size());
    sqe.user_data = static_cast<std::uint64_t>(tag);
  }
  EXPECT_EQ(ring.queued(), 2u);
  EXPECT_EQ(ring.enter(2), 2);
  EXPECT_EQ(ring.queued(), 0u);
  std::vector<std::pair<std::uint64_t, int>> done;
  while (const io_uring_cqe* cqe = ring.next_completion()) {
    done.emplace_back(cqe->user_data, cqe->res);
    ring.pop_completion();
  }
  EXPECT_EQ(done, (std::vector<std::pair<std::uint64_t, int>>{{7, 3}, {9, 4}}));
  char received[16] = {};
  EXPECT_EQ(::recv(pair[1], received, sizeof(received), 0), 7);
  EXPECT_EQ(std::string(received), "abcdefg");
  ::close(pair[0]);
  ::close(pair[1]);
}

}  // namespace
}  // namespace acc::rendezvous::detail
